#pragma once
// Host FP8 E4M3 conversions (OCP FP8 E4M3 as CUDA's __nv_fp8_e4m3: bias 7, no infinities,
// S.1111.111 is NaN, largest finite 448, smallest subnormal 2^-9). float_to_e4m3 is bit-exact with
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) (the CUDA header's host path; cuda_fp8.hpp
// of CUDA 13.0): round to nearest even; magnitudes above 448 + 16 (half a step) and infinities
// saturate to +-448; magnitudes at or below 2^-10 become a zero of the same sign; NaN becomes
// 0x7F with the input's sign bit.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace moefin {

using fp8_bits = std::uint8_t;

inline constexpr float kE4m3Max = 448.0f;
/// Columns per DeepSeek-FP8 scale block (input dequantization and output quantization).
inline constexpr std::int64_t kFp8ScaleBlock = 128;
/// An E4M3 NaN used to poison FP8 outputs before a kernel runs.
inline constexpr fp8_bits kFp8Poison = 0x7F;

inline float e4m3_to_float(fp8_bits c) {
  bool const negative = (c & 0x80u) != 0;
  int const exponent = (c >> 3) & 0xF;
  int const mantissa = c & 0x7;
  if (exponent == 0xF && mantissa == 0x7)
    return negative ? -std::numeric_limits<float>::quiet_NaN()
                    : std::numeric_limits<float>::quiet_NaN();
  float const magnitude = exponent == 0
                              ? std::ldexp(static_cast<float>(mantissa), -9)
                              : std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  return negative ? -magnitude : magnitude;
}

inline fp8_bits float_to_e4m3(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  auto const sign = static_cast<fp8_bits>((u >> 24) & 0x80u);
  if (std::isnan(f))
    return static_cast<fp8_bits>(sign | 0x7Fu);
  float const a = std::fabs(f);
  if (a > 464.0f) // beyond the midpoint between 448 and the next (absent) step
    return static_cast<fp8_bits>(sign | 0x7Eu);
  // Count steps of the target binade's quantum (2^-9 in the subnormal binade, else 2^(e-3));
  // the scaling is by a power of two, so only the rounding to an integer is inexact.
  int e = 0;
  std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1)
  int const binade = a < 0x1p-6f ? -6 : e - 1;
  int const quantum = binade - 3;
  auto const steps = static_cast<int>(std::nearbyint(std::ldexp(a, -quantum)));
  if (binade == -6 && steps <= 8) // subnormals; 8 steps is the smallest normal, code 0x08
    return static_cast<fp8_bits>(sign | steps);
  int const exponent = steps == 16 ? binade + 1 : binade; // rounding carried into the next binade
  int const mantissa = steps == 16 ? 0 : steps - 8;
  return static_cast<fp8_bits>(sign | ((exponent + 7) << 3) | mantissa);
}

/// The per-block quantization scale of the DeepSeek-FP8 finalize: amax / 448 in fp32, or 1 for an
/// all-zero block (so that zeros encode as zeros and the scale stays finite).
inline float e4m3_block_scale(float amax) {
  return amax == 0.0f ? 1.0f : amax / kE4m3Max;
}

} // namespace moefin
