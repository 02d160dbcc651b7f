#pragma once
// 4-bit weights laid out like NVFP4: e2m1 values packed two per byte (the lower k in the low
// nibble), one e4m3 scale per 16 consecutive k of a row, one fp32 global scale per matrix:
//   w[r][k] = e2m1(value nibble) * e4m3(scale[r][k / 16]) * global,
// the scales stored row-major or in 16 x 128 tiles (ScaleLayout below).
// The codecs and the seeded quantizer run unchanged on the host (reference, tests) and on the
// device (the generator of GBs of weights, the GEMM's dequantization). Every float operation of
// the quantizer is a single IEEE operation with an explicit rounding (fma where a product is
// added), so the host twin and the device produce the same bits; tests/test_fp4.cpp and the
// gpu test pin that.

#include "core/ops/scale_layout.hpp"
#include "core/ops/value_layout.hpp"
#include "core/router_scores.hpp" // MOEFIN_HD, mix64

#include <cstdint>
#include <cstring>

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace moefin::fp4 {

inline constexpr int kBlock = 16;         // k per e4m3 scale
inline constexpr float kE2m1Max = 6.0f;   // largest e2m1 magnitude
inline constexpr float kE4m3Max = 448.0f; // largest finite e4m3 magnitude
inline constexpr float kSourceLo = 0.05f; // source weights: |x| in [lo, hi] * amplitude * scale
inline constexpr float kSourceHi = 1.0f;
inline constexpr int kAmplitudeSteps = 6; // block amplitudes 2^0 .. 2^-5 (varied scales)

MOEFIN_HD std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

MOEFIN_HD float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

/// Value of an e2m1 code (bit 3 sign, bits 2..1 exponent with bias 1, bit 0 mantissa):
/// 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
MOEFIN_HD float e2m1_value(unsigned code) {
  unsigned const e = (code >> 1) & 3u, m = code & 1u;
  // e = 0: subnormal m * 0.5; else 2^(e-1) * (1 + m/2), i.e. (2 + m) * 2^(e-2).
  float const mag = e == 0 ? 0.5f * static_cast<float>(m)
                           : static_cast<float>(2u + m) * static_cast<float>(1u << e) * 0.25f;
  return (code & 8u) ? -mag : mag;
}

/// The e2m1 code nearest to q (ties to the even mantissa, as IEEE rounding), saturating to +-6;
/// q must not be NaN. Zero keeps q's sign.
MOEFIN_HD unsigned e2m1_nearest(float q) {
  unsigned const sign = (float_bits(q) >> 28) & 8u;
  float const a = q < 0.0f ? -q : q;
  // Midpoints between neighbours 0 .5 1 1.5 2 3 4 6; at a midpoint the even code (mantissa 0)
  // wins: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4.
  unsigned c;
  if (a <= 0.25f)
    c = 0;
  else if (a < 0.75f)
    c = 1;
  else if (a <= 1.25f)
    c = 2;
  else if (a < 1.75f)
    c = 3;
  else if (a <= 2.5f)
    c = 4;
  else if (a < 3.5f)
    c = 5;
  else if (a <= 5.0f)
    c = 6;
  else
    c = 7;
  return sign | c;
}

/// Value of an e4m3 byte (bias 7, S.1111.111 NaN, largest 448, smallest subnormal 2^-9).
MOEFIN_HD float e4m3_value(unsigned byte) {
  unsigned const e = (byte >> 3) & 0xFu, m = byte & 7u;
  if (e == 0xFu && m == 7u)
    return bits_float(0x7fc00000u | ((byte & 0x80u) << 24));
  // Normal: (8 + m) * 2^(e - 10); subnormal: m * 2^-9. Both exact: assemble the float's bits.
  float const mag = e == 0 ? static_cast<float>(m) * 0x1p-9f
                           : bits_float(((e + 120u) << 23) | (m << 20)); // 2^(e-7) * (1 + m/8)
  return (byte & 0x80u) ? -mag : mag;
}

/// The e4m3 byte nearest to x > 0 (round to nearest even), saturating to 448 above it: the
/// conversion of core/fp8.hpp (CUDA's satfinite E4M3) for positive finite x.
MOEFIN_HD unsigned e4m3_nearest_positive(float x) {
  if (!(x < kE4m3Max))
    return 0x7Eu; // 448 (midpoint 464 rounds to the even mantissa 6 = 448 too)
  if (x < 0x1p-6f) {
    // Subnormal binade: steps of 2^-9; x * 2^9 is exact, rint rounds ties to even. 8 steps is
    // the smallest normal, whose code is 0x08 as well.
    float const steps = x * 512.0f;
#if defined(__CUDA_ARCH__)
    return static_cast<unsigned>(rintf(steps));
#else
    return static_cast<unsigned>(std::rint(steps));
#endif
  }
  std::uint32_t const u = float_bits(x);
  unsigned e = (u >> 23) - 127u + 7u; // biased e4m3 exponent, 1..15
  std::uint32_t const frac = u & 0x7FFFFFu;
  unsigned m = frac >> 20;
  std::uint32_t const rest = frac & 0xFFFFFu;
  if (rest > 0x80000u || (rest == 0x80000u && (m & 1u)))
    ++m;
  if (m == 8u) {
    m = 0;
    ++e;
  }
  if (e > 15u || (e == 15u && m == 7u))
    return 0x7Eu;
  return (e << 3) | m;
}

// ------------------------------------------------------------------------------------------
// The seeded quantizer: random source weights (never zero), quantized block by block.

MOEFIN_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

MOEFIN_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

MOEFIN_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

/// Global scale of a matrix whose source weights are bounded by kSourceHi * scale: the NVFP4
/// recipe amax / (6 * 448) with the bound in place of the measured amax (so that the device
/// generator needs no reduction pass over GBs). Block scales then fall in (0, 448].
MOEFIN_HD float global_scale(float scale) {
  return div_rn(mul_rn(kSourceHi, scale), kE2m1Max * kE4m3Max);
}

/// The amplitude 2^-a of block b's source weights, a in 0..5 from a hash of (seed, b).
MOEFIN_HD float block_amplitude(std::uint64_t seed, std::uint64_t b) {
  auto const a = static_cast<int>(mix64(seed ^ mix64(b ^ 0xb10cb10cb10cULL)) % kAmplitudeSteps);
  return bits_float(static_cast<std::uint32_t>(127 - a) << 23); // exact
}

/// Source weight of element i of a block of amplitude `amp`: sign and magnitude from a hash of
/// (seed, i), |x| uniform in [lo, hi] times amp times `scale`.
MOEFIN_HD float source_weight_in(std::uint64_t seed, std::uint64_t i, float amp, float scale) {
  std::uint64_t const u = mix64(seed ^ mix64(i));
  float const f = static_cast<float>(u >> 40) * 0x1p-24f;
  float const mag = fma_rn(kSourceHi - kSourceLo, f, kSourceLo);
  float const x = mul_rn(mul_rn(mag, amp), scale);
  return (u & 1u) ? -x : x;
}

/// Source weight of element i (row-major index over [experts][n][k]) of a matrix with seed
/// `seed`, its block being i / 16.
MOEFIN_HD float source_weight(std::uint64_t seed, std::uint64_t i, float scale) {
  return source_weight_in(seed, i, block_amplitude(seed, i / kBlock), scale);
}

/// Quantizes block b (elements 16 b .. 16 b + 15 of the row-major [experts][n][k] order; k is a
/// multiple of 16, so a block never crosses a row) of the matrix: the 8 packed value bytes
/// (element 2j in the low nibble of byte j) and the e4m3 scale byte. `global` is
/// global_scale(scale). The scale is the NVFP4 one, e4m3(amax / 6 / global), and each value the
/// e2m1 nearest to x / (e4m3 value * global).
MOEFIN_HD void quantize_block(std::uint64_t seed, std::uint64_t b, float scale, float global,
                              std::uint8_t (&values)[kBlock / 2], std::uint8_t* scale_byte) {
  float x[kBlock];
  float amax = 0.0f;
  float const amp = block_amplitude(seed, b);
#pragma unroll
  for (int j = 0; j < kBlock; ++j) {
    x[j] = source_weight_in(seed, b * kBlock + static_cast<std::uint64_t>(j), amp, scale);
    float const a = x[j] < 0.0f ? -x[j] : x[j];
    amax = a > amax ? a : amax;
  }
  unsigned const s = e4m3_nearest_positive(div_rn(div_rn(amax, kE2m1Max), global));
  float const step = mul_rn(e4m3_value(s), global);
#pragma unroll
  for (int j = 0; j < kBlock / 2; ++j) {
    unsigned const lo = e2m1_nearest(div_rn(x[2 * j], step));
    unsigned const hi = e2m1_nearest(div_rn(x[2 * j + 1], step));
    values[j] = static_cast<std::uint8_t>(lo | (hi << 4));
  }
  *scale_byte = static_cast<std::uint8_t>(s);
}

/// The bits of a pair of bf16 that the GEMM's conversion sets: (e1 e0 m) at 8..6 and the sign
/// at 15 of both halves.
inline constexpr std::uint32_t kPairBits = 0x81C081C0u;

/// The GEMM's conversion of two nibbles of a 32-bit word of 8 values: nibbles kI and kI + 4
/// (kI = 0, 1; nibbles 2, 3 come from w >> 8) as a pair of bf16 bits (low half: nibble kI) of
/// e2m1 * 2^-126. Bits (e1 e0 m) at bf16 bits 8..6 are the value times 2^-126 (code 1, 0.5, a
/// bf16 subnormal), the sign goes to bit 15: one multiply places two copies of the nibble side
/// by side, and the mask keeps the sign of the copy at bits 12..15 and the magnitude of the one
/// at bits 6..9.
template <int kI> MOEFIN_HD std::uint32_t e2m1_pair_bits(std::uint32_t w) {
  static_assert(kI == 0 || kI == 1, "nibbles 0 and 1 of each half; shift the word for 2, 3");
  constexpr std::uint32_t kMask = 0x000F000Fu << (4 * kI);
  constexpr std::uint32_t kCopies = (1u << (12 - 4 * kI)) | (1u << (6 - 4 * kI));
  return ((w & kMask) * kCopies) & kPairBits;
}

// ------------------------------------------------------------------------------------------
// Packed values (ValueLayout::kPacked). e2m1_pair_bits spends three integer instructions on
// each pair (mask, multiply, mask) and a shift per two pairs: 13 per word of 8 values. The
// packed layout stores each 32-bit word with its bits permuted so that the same four pairs
// (nibbles i and i + 4, i = 0..3) come out in 8:
//   pair 0  already at its place:            w & kPairBits                       (1)
//   pair 1  10 bits below it, cyclically:    rotl(w, 10) & kPairBits              (2)
//   pair 2  13 bits below it, cyclically:    rotl(w, 13) & kPairBits              (2)
//   pair 3  in the 8 bits left, 3 groups:    ((w & 0x001B001B) * 0x4108) & kPairBits (3)
// Pair 3's bits sit at 0, 1, 3, 4 (+16): the multiply adds three copies shifted by 3, 8 and 14
// that overlap nowhere (no carries), and exactly one copy of a right bit lands on each bit of
// kPairBits. 7 would need four disjoint rotations of kPairBits covering the word, and there are
// none (tools/fp4_pack_search.py searches them all, and lists the 8 layouts of cost 8); a pair
// taken any other way costs a multiply and a mask beside its masking, so 8 is the least of this
// family (shift or rotate, mask, multiply). The GEMM's pairs and its output bits do not change.

inline constexpr std::uint32_t kPackedPair3Mask = 0x001B001Bu;
inline constexpr std::uint32_t kPackedPair3Copies = (1u << 3) | (1u << 8) | (1u << 14);

/// Bit of kPairBits that bit `b` (0..7: bits 0..3 of the low nibble, then of the high one) of a
/// pair lands on.
MOEFIN_HD constexpr int pair_target_bit(int b) {
  return 16 * (b >> 2) + ((b & 3) == 3 ? 15 : 6 + (b & 3));
}

/// Where bit `b` of pair `i` (nibbles i and i + 4 of the word) lies in a packed word.
MOEFIN_HD constexpr int packed_bit(int i, int b) {
  return i == 0   ? pair_target_bit(b)
         : i == 1 ? (pair_target_bit(b) - 10) & 31
         : i == 2 ? (pair_target_bit(b) - 13) & 31
                  : 16 * (b >> 2) + ((b & 3) < 2 ? 3 + (b & 3) : (b & 3) - 2);
}

/// Where bit `b` of pair `i` lies in a word of nibbles.
MOEFIN_HD constexpr int nibble_bit(int i, int b) {
  return 4 * i + (b & 3) + 16 * (b >> 2);
}

/// The packed word of a word of 8 nibbles (a bit permutation).
MOEFIN_HD std::uint32_t pack_word(std::uint32_t w) {
  std::uint32_t out = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int b = 0; b < 8; ++b)
      out |= ((w >> nibble_bit(i, b)) & 1u) << packed_bit(i, b);
  return out;
}

/// The word of nibbles of a packed word (pack_word's inverse).
MOEFIN_HD std::uint32_t unpack_word(std::uint32_t p) {
  std::uint32_t out = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int b = 0; b < 8; ++b)
      out |= ((p >> packed_bit(i, b)) & 1u) << nibble_bit(i, b);
  return out;
}

/// Host: `bytes` bytes of nibble words (a multiple of 4, as a row of values is) packed word by
/// word into `out` (the layout the generator writes with ValueLayout::kPacked).
inline void pack_words(std::uint8_t const* in, std::uint8_t* out, std::size_t bytes) {
  for (std::size_t i = 0; i + 4 <= bytes; i += 4) {
    std::uint32_t w;
    std::memcpy(&w, in + i, 4);
    w = pack_word(w);
    std::memcpy(out + i, &w, 4);
  }
}

// ------------------------------------------------------------------------------------------
// Where the values are stored (ValueLayout, core/ops/value_layout.hpp), in 16-byte chunks of 32
// values of one row (chunk c of a row holds k = 32 c .. 32 c + 31), rows counted over
// [experts][n]:
//   kNibbles, kPacked  row-major: chunk c of row r at byte r * (k / 2) + 16 c.
//   kTiles             packed words; the chunks of each decode GEMM warp-stage (kStageRows rows
//                      x kStageK k, kStageBytes) contiguous, in the order the warp's copies fill
//                      its shared memory (kernels/gemm/decode_kernels.cuh: copy (m, h) of lane
//                      (g, q) is row 16 m + 8 h + g, chunk q of the stage, at stage chunk
//                      (2 m + h) * 32 + 4 g + q); the stages of a 32-row band in k order, the
//                      bands in row order. A warp then streams its k slice as one contiguous run
//                      of bytes instead of 64-byte pieces of 32 rows. Needs n a multiple of 32
//                      (a band never crosses an expert) and k of 128.
inline constexpr int kStageRows = 32;
inline constexpr int kStageK = 128;
inline constexpr int kStageBytes = kStageRows * kStageK / 2;

/// Byte offset of chunk `chunk` (k / 32) of row `row` in values of rows of k in layout l.
MOEFIN_HD constexpr std::int64_t value_chunk_offset(ValueLayout l, std::int64_t row,
                                                    std::int64_t chunk, std::int64_t k) {
  if (l != ValueLayout::kTiles)
    return row * (k / 2) + 16 * chunk;
  constexpr int kChunksPerRow = kStageK / 32;
  std::int64_t const stage = (row / kStageRows) * (k / kStageK) + chunk / kChunksPerRow;
  int const r = static_cast<int>(row % kStageRows);
  int const q = static_cast<int>(chunk % kChunksPerRow);
  return stage * kStageBytes + 16 * ((r >> 3) * 32 + 4 * (r & 7) + q);
}

/// Host: `rows` rows of k values stored row-major (nibbles or packed words) copied into `out`
/// with their chunks where kTiles puts them (the words themselves are not changed).
inline void tile_chunks(std::uint8_t const* rowmajor, std::uint8_t* out, std::int64_t rows,
                        std::int64_t k) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < k / 32; ++c)
      std::memcpy(out + value_chunk_offset(ValueLayout::kTiles, r, c, k),
                  rowmajor + value_chunk_offset(ValueLayout::kPacked, r, c, k), 16);
}

MOEFIN_HD std::uint32_t rotl32(std::uint32_t w, int s) {
  return (w << s) | (w >> (32 - s));
}

/// Pair kI (0..3) of a packed word: the bits e2m1_pair_bits gives for nibbles kI and kI + 4 of
/// the word it was packed from.
template <int kI> MOEFIN_HD std::uint32_t packed_pair_bits(std::uint32_t p) {
  static_assert(kI >= 0 && kI < 4, "a word holds 4 pairs");
  if constexpr (kI == 0)
    return p & kPairBits;
  else if constexpr (kI == 1)
    return rotl32(p, 10) & kPairBits;
  else if constexpr (kI == 2)
    return rotl32(p, 13) & kPairBits;
  else
    return ((p & kPackedPair3Mask) * kPackedPair3Copies) & kPairBits;
}

// ------------------------------------------------------------------------------------------
// Where the scales are stored. Both layouts hold the same bytes, one per (row, block of 16 k),
// rows counted over [experts][n] (n a multiple of 16: a tile never crosses an expert).
//   kRowMajor  scale[row][k / 16]: byte row * (k / 16) + block.
//   kTiled     tiles of 16 rows x 128 k (8 blocks), 128 bytes each, the tiles of a row band in
//              k order, the bands in row order: tile (row / 16) * (k / 128) + block / 8. Inside a
//              tile, word (4 bytes) 4 (r % 8) + r / 8 + 2 (b / 4) holds blocks 4 (b / 4) ..
//              4 (b / 4) + 3 of tile row r, byte b % 4 being block b: the image the decode GEMM's
//              lanes read from shared memory (kernels/gemm/decode_kernels.cuh), so that a warp
//              stages a 16-row tile's scales of one pipeline stage with 8 copies of 16 contiguous
//              bytes instead of 32 4-byte copies from 16 rows. Needs k a multiple of 128.
// The enum and the tile sizes are in core/ops/scale_layout.hpp (the GEMM params name them).

static_assert(kTileBytes == kTileRows * kTileK / kBlock, "a kTiled tile is a byte per block");

/// Byte of the block (row r, block b) inside its kTiled tile (r < 16, b < 8).
MOEFIN_HD constexpr int tiled_byte(int r, int b) {
  return (4 * (r & 7) + (r >> 3) + 2 * (b >> 2)) * 4 + (b & 3);
}

/// Byte offset of the scale of (row, block) in the scales of a [rows][k] matrix in layout l.
MOEFIN_HD constexpr std::int64_t scale_offset(ScaleLayout l, std::int64_t row, std::int64_t block,
                                              std::int64_t k) {
  if (l == ScaleLayout::kRowMajor)
    return row * (k / kBlock) + block;
  constexpr int kBlocksPerTile = kTileK / kBlock;
  std::int64_t const tile = (row / kTileRows) * (k / kTileK) + block / kBlocksPerTile;
  return tile * kTileBytes +
         tiled_byte(static_cast<int>(row % kTileRows), static_cast<int>(block % kBlocksPerTile));
}

/// The two positive e4m3 scale bytes (0x00 .. 0x7E) in the low half of `two` (low byte first) at
/// bf16 bits 10..4 of the low and the high half of a pair: exactly e4m3(byte) * 2^-120 for every
/// byte, zero and subnormals included (e4m3's m * 2^-9 and bf16's m * 2^-129 at that place line
/// up). Two bf16 multiplies by 2^119 (kBf16Pair2p119), each exact, make the GEMM's
/// e4m3 * 2^118 (the lean scale path of kernels/gemm/decode_kernels.cuh). One byte permute and
/// one shift on the device.
MOEFIN_HD std::uint32_t e4m3x2_bits(std::uint32_t two) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(two, 0, 0x4140) << 4;
#else
  return ((two & 0xFFu) << 4) | ((two & 0xFF00u) << 12);
#endif
}
inline constexpr std::uint32_t kBf16Pair2p119 = 0x7B007B00u; // (2^119, 2^119) as bf16 bits

/// The dequantized weight (without the global scale) of nibble `code` under scale byte `s`:
/// exact in bf16 (a 2-bit by a 4-bit significand), as the GEMM multiplies it.
MOEFIN_HD float dequantized(unsigned code, unsigned s) {
  return mul_rn(e2m1_value(code), e4m3_value(s));
}

} // namespace moefin::fp4
