#pragma once
// Host-side bfloat16 conversions, bit-exact with the device's __float2bfloat16_rn (round to
// nearest even, NaN kept quiet). Tensors cross the host/device boundary as raw uint16 bits.

#include <cstdint>
#include <cstring>

namespace moefin {

using bf16_bits = std::uint16_t;

inline float bf16_to_float(bf16_bits b) {
  std::uint32_t const u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bf16_bits float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep sign, force a quiet payload
    return static_cast<bf16_bits>((u >> 16) | 0x0040u);
  std::uint32_t const rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_bits>((u + rounding) >> 16);
}

/// The bf16 value nearest to f, as a float (what storing f as bf16 and reading it back gives).
inline float round_to_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

/// A bf16 NaN pattern used to poison outputs before a kernel runs: any element the kernel fails
/// to write stays NaN and fails every comparison.
inline constexpr bf16_bits kBf16Poison = 0x7fc1;

} // namespace moefin
