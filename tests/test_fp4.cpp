// The 4-bit weight format (core/fp4.hpp), the split-K decode GEMM's plan and the reference that
// dequantizes the same way (unit label: no GPU).
#define BOOST_TEST_MODULE fp4
#include <boost/test/unit_test.hpp>

#include "core/bf16.hpp"
#include "core/fp4.hpp"
#include "core/fp8.hpp"
#include "core/ops/errors.hpp"
#include "core/rng.hpp"
#include "kernels/gemm/decode.hpp"
#include "kokkos_fixture.hpp"
#include "reference/decode_gemm.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using namespace moefin;

namespace {

constexpr float kE2m1Table[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

float as_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

} // namespace

BOOST_AUTO_TEST_CASE(e2m1_codes_decode_to_the_sixteen_values) {
  for (unsigned c = 0; c < 16; ++c) {
    float const want = (c & 8u) ? -kE2m1Table[c & 7u] : kE2m1Table[c & 7u];
    BOOST_TEST(fp4::e2m1_value(c) == want, "code " << c);
  }
}

BOOST_AUTO_TEST_CASE(e2m1_rounding_is_to_nearest_with_ties_to_the_even_mantissa) {
  // Every value maps back to its own code.
  for (unsigned c = 0; c < 16; ++c)
    if (c != 8) // -0 and +0 share a value; the sign of zero is kept
      BOOST_TEST(fp4::e2m1_nearest(fp4::e2m1_value(c)) == c, "code " << c);
  // Midpoints go to the code with mantissa bit 0.
  float const mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  unsigned const tie[7] = {0, 2, 2, 4, 4, 6, 6};
  for (int i = 0; i < 7; ++i) {
    BOOST_TEST(fp4::e2m1_nearest(mid[i]) == tie[i], "midpoint " << mid[i]);
    BOOST_TEST(fp4::e2m1_nearest(-mid[i]) == (tie[i] | 8u), "midpoint " << -mid[i]);
  }
  // Brute force: the code minimizes the distance, saturating past 6.
  Rng rng(17);
  for (int i = 0; i < 20000; ++i) {
    float const q = static_cast<float>(rng.uniform(-8.0, 8.0));
    unsigned const c = fp4::e2m1_nearest(q);
    double const d = std::fabs(q - fp4::e2m1_value(c));
    for (unsigned o = 0; o < 16; ++o)
      BOOST_REQUIRE_LE(d, std::fabs(q - fp4::e2m1_value(o)));
  }
  BOOST_TEST(fp4::e2m1_nearest(1e30f) == 7u);
  BOOST_TEST(fp4::e2m1_nearest(-1e30f) == 15u);
  BOOST_TEST(fp4::e2m1_nearest(-0.0f) == 8u);
}

BOOST_AUTO_TEST_CASE(e4m3_codec_matches_the_cuda_compatible_host_conversion) {
  for (unsigned b = 0; b < 256; ++b) {
    float const mine = fp4::e4m3_value(b), ref = e4m3_to_float(static_cast<fp8_bits>(b));
    if (std::isnan(ref))
      BOOST_TEST(std::isnan(mine), "byte " << b);
    else
      BOOST_TEST(mine == ref, "byte " << b);
  }
  // Every positive float from 2^-12 to 2^10 on a grid of its bits (all exponents, mantissas in
  // steps that hit every e4m3 midpoint), plus random ones.
  std::int64_t compared = 0;
  for (std::uint32_t u = 0x39800000u; u <= 0x44800000u; u += 0x800u) {
    float const x = as_float(u);
    BOOST_REQUIRE_EQUAL(fp4::e4m3_nearest_positive(x), float_to_e4m3(x));
    ++compared;
  }
  Rng rng(3);
  for (int i = 0; i < 200000; ++i) {
    float const x =
        static_cast<float>(std::ldexp(rng.uniform(1.0, 2.0), static_cast<int>(rng.below(24)) - 14));
    BOOST_REQUIRE_EQUAL(fp4::e4m3_nearest_positive(x), float_to_e4m3(x));
    ++compared;
  }
  BOOST_TEST(compared > 290000);
}

BOOST_AUTO_TEST_CASE(the_gemm_bit_trick_gives_e2m1_times_2_to_the_minus_126_for_every_pair) {
  // Every word whose nibbles 0 and 4 (and 1 and 5) take all 256 combinations, other nibbles
  // random: the pairs must be exactly e2m1 * 2^-126 in bf16, whatever the neighbours hold.
  Rng rng(5);
  for (unsigned lo = 0; lo < 16; ++lo)
    for (unsigned hi = 0; hi < 16; ++hi)
      for (int rep = 0; rep < 4; ++rep) {
        auto const noise = static_cast<std::uint32_t>(rng.next());
        std::uint32_t const w0 = (noise & 0xFFF0FFF0u) | lo | (hi << 16);
        std::uint32_t const w1 = (noise & 0xFF0FFF0Fu) | (lo << 4) | (hi << 20);
        for (std::uint32_t r : {fp4::e2m1_pair_bits<0>(w0), fp4::e2m1_pair_bits<1>(w1)}) {
          BOOST_REQUIRE_EQUAL(r & 0xFFFFu, float_to_bf16(std::ldexp(fp4::e2m1_value(lo), -126)));
          BOOST_REQUIRE_EQUAL(r >> 16, float_to_bf16(std::ldexp(fp4::e2m1_value(hi), -126)));
        }
      }
}

BOOST_AUTO_TEST_CASE(packed_words_are_a_bit_permutation_that_the_gemm_undoes_in_8_instructions) {
  // pack_word moves every bit somewhere else once: the 32 places are distinct.
  std::uint32_t seen = 0;
  for (int i = 0; i < 4; ++i)
    for (int b = 0; b < 8; ++b) {
      int const at = fp4::packed_bit(i, b);
      BOOST_TEST_REQUIRE((at >= 0 && at < 32));
      BOOST_TEST_REQUIRE(((seen >> at) & 1u) == 0u, "pair " << i << " bit " << b);
      seen |= 1u << at;
    }
  BOOST_TEST(seen == 0xFFFFFFFFu);
  // Each pair's 8 bits take all 256 values under random neighbours: the packed pair equals the
  // nibble word's pair (nibbles i, i + 4; 2 and 3 from w >> 8), and unpack_word undoes pack_word.
  Rng rng(11);
  for (int i = 0; i < 4; ++i)
    for (unsigned v = 0; v < 256; ++v)
      for (int rep = 0; rep < 4; ++rep) {
        auto w = static_cast<std::uint32_t>(rng.next());
        for (int b = 0; b < 8; ++b)
          w = (w & ~(1u << fp4::nibble_bit(i, b))) | (((v >> b) & 1u) << fp4::nibble_bit(i, b));
        std::uint32_t const p = fp4::pack_word(w);
        BOOST_REQUIRE_EQUAL(fp4::unpack_word(p), w);
        std::uint32_t const want[4] = {fp4::e2m1_pair_bits<0>(w), fp4::e2m1_pair_bits<1>(w),
                                       fp4::e2m1_pair_bits<0>(w >> 8),
                                       fp4::e2m1_pair_bits<1>(w >> 8)};
        std::uint32_t const got[4] = {fp4::packed_pair_bits<0>(p), fp4::packed_pair_bits<1>(p),
                                      fp4::packed_pair_bits<2>(p), fp4::packed_pair_bits<3>(p)};
        for (int j = 0; j < 4; ++j)
          BOOST_REQUIRE_EQUAL(got[j], want[j]);
      }
  // The identity is not a packing: a nibble word read as packed gives other pairs.
  int differ = 0;
  for (int rep = 0; rep < 64; ++rep) {
    auto const w = static_cast<std::uint32_t>(rng.next());
    differ += fp4::packed_pair_bits<1>(w) != fp4::e2m1_pair_bits<1>(w) ? 1 : 0;
  }
  BOOST_TEST(differ > 48);
}

BOOST_AUTO_TEST_CASE(value_layout_names_parse_back_and_nothing_else_does) {
  for (fp4::ValueLayout l :
       {fp4::ValueLayout::kNibbles, fp4::ValueLayout::kPacked, fp4::ValueLayout::kTiles}) {
    BOOST_TEST(fp4::known_value_layout(l));
    auto const back = fp4::value_layout_from_name(fp4::value_layout_name(l));
    BOOST_TEST_REQUIRE(back.has_value());
    BOOST_TEST((*back == l));
  }
  BOOST_TEST(!fp4::known_value_layout(static_cast<fp4::ValueLayout>(3)));
  for (char const* bad : {"", "?", "Packed", "nibble", "packed ", "tile"})
    BOOST_TEST(!fp4::value_layout_from_name(bad).has_value(), bad);
}

BOOST_AUTO_TEST_CASE(the_chain_packs_values_where_its_scales_are_tiled_only) {
  // The tiles kernel reads packed words in warp-stage tiles with tiled scales; row-major scales
  // have one kernel, which reads nibbles (chain::LayerWeights' default, `sweep layer` without
  // --fp4-values).
  BOOST_TEST((fp4::chain_value_layout(fp4::ScaleLayout::kTiled) == fp4::ValueLayout::kTiles));
  BOOST_TEST((fp4::chain_value_layout(fp4::ScaleLayout::kRowMajor) == fp4::ValueLayout::kNibbles));
  // and launches the GEMMs wide where the values are packed (the only layout that kernel reads).
  BOOST_TEST(fp4::chain_wide_gemms(fp4::ValueLayout::kPacked));
  BOOST_TEST(!fp4::chain_wide_gemms(fp4::ValueLayout::kNibbles));
  // Tiled values are packed words, which only the wide kernel reads.
  BOOST_TEST(fp4::packed_words(fp4::ValueLayout::kTiles));
  BOOST_TEST(fp4::chain_wide_gemms(fp4::ValueLayout::kTiles));
}

BOOST_AUTO_TEST_CASE(tiled_values_move_every_chunk_once_and_keep_each_warp_stage_contiguous) {
  // Rows over two experts of n = 64 (4 bands of 32), k = 384 (3 stages of 128): every 16-byte
  // chunk lands on its own place in the same bytes; the chunks of one warp-stage (32 rows of one
  // band x 128 k) fill one fp4::kStageBytes block, at the place where the GEMM's copy (m, h) of
  // lane (g, q) puts it in shared memory; the stages follow in k order, the bands in row order.
  std::int64_t const rows = 128, k = 384, chunks = k / 32;
  std::vector<int> seen(static_cast<std::size_t>(rows * chunks), 0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < chunks; ++c) {
      std::int64_t const at = fp4::value_chunk_offset(fp4::ValueLayout::kTiles, r, c, k);
      BOOST_TEST_REQUIRE(at % 16 == 0);
      BOOST_TEST_REQUIRE(at >= 0);
      BOOST_TEST_REQUIRE(at < rows * k / 2);
      ++seen[static_cast<std::size_t>(at / 16)];
      std::int64_t const stage = (r / 32) * (k / 128) + c / 4;
      BOOST_TEST_REQUIRE(at / fp4::kStageBytes == stage);
      int const m = static_cast<int>(r % 32) / 16, h = static_cast<int>(r % 16) / 8;
      int const lane = 4 * static_cast<int>(r % 8) + static_cast<int>(c % 4);
      BOOST_TEST_REQUIRE(at % fp4::kStageBytes / 16 == (2 * m + h) * 32 + lane);
      // Nibbles and packed words stay row-major.
      BOOST_TEST_REQUIRE(fp4::value_chunk_offset(fp4::ValueLayout::kPacked, r, c, k) ==
                         r * (k / 2) + 16 * c);
    }
  BOOST_TEST(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(seen.size()));
  // tile_chunks moves the bytes there and changes none.
  std::vector<std::uint8_t> in(static_cast<std::size_t>(rows * k / 2)), out(in.size(), 0xEE);
  Rng rng(3);
  for (auto& x : in)
    x = static_cast<std::uint8_t>(rng.below(256));
  fp4::tile_chunks(in.data(), out.data(), rows, k);
  BOOST_TEST((out != in));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < chunks; ++c)
      BOOST_TEST_REQUIRE(
          std::memcmp(out.data() + fp4::value_chunk_offset(fp4::ValueLayout::kTiles, r, c, k),
                      in.data() + r * (k / 2) + 16 * c, 16) == 0);
}

BOOST_AUTO_TEST_CASE(dequantized_weights_are_exact_in_bf16_after_the_gemms_2_to_the_minus_8) {
  // The kernel multiplies e2m1 * 2^-126 by bf16(e4m3 * 2^118): both factors exact in bf16 and the
  // product exact, for every code and every finite scale byte.
  for (unsigned s = 0; s < 256; ++s) {
    float const sv = fp4::e4m3_value(s);
    if (std::isnan(sv))
      continue;
    float const sm = std::ldexp(sv, 118);
    BOOST_REQUIRE(std::isfinite(sm) && round_to_bf16(sm) == sm);
    for (unsigned c = 0; c < 16; ++c) {
      double const w = static_cast<double>(fp4::e2m1_value(c)) * sv;
      BOOST_REQUIRE_EQUAL(fp4::dequantized(c, s), static_cast<float>(w));
      float const scaled = std::ldexp(static_cast<float>(w), -8);
      BOOST_REQUIRE_EQUAL(round_to_bf16(scaled), scaled);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_lean_scale_placement_is_e4m3_times_2_to_the_minus_120_for_every_byte) {
  // fp4::e4m3x2_bits and the two exact multiplies of the lean scale path give the bits of the
  // conversion path (e4m3 -> fp32, times 2^118, rounded to bf16) for every positive byte, in
  // either half of the pair.
  BOOST_TEST(bf16_to_float(static_cast<std::uint16_t>(fp4::kBf16Pair2p119 & 0xFFFFu)) ==
             std::ldexp(1.0f, 119));
  BOOST_TEST((fp4::kBf16Pair2p119 >> 16) == (fp4::kBf16Pair2p119 & 0xFFFFu));
  int subnormal = 0;
  for (unsigned b = 0; b <= 0x7Eu; ++b) {
    std::uint32_t const pair = fp4::e4m3x2_bits(b | ((0x7Eu - b) << 8) | 0xABCD0000u);
    auto const lo = static_cast<std::uint16_t>(pair & 0xFFFFu);
    BOOST_REQUIRE_EQUAL(pair >> 16, fp4::e4m3x2_bits(0x7Eu - b)); // the high half: byte 1 alone
    float const e4m3 = fp4::e4m3_value(b);
    subnormal += b != 0 && e4m3 < 0x1p-6f;
    BOOST_REQUIRE_EQUAL(bf16_to_float(lo), std::ldexp(e4m3, -120));
    // Each multiply is exact in bf16 (a bf16 rounding leaves it unchanged).
    float const once = bf16_to_float(lo) * 0x1p119f;
    BOOST_REQUIRE_EQUAL(bf16_to_float(float_to_bf16(once)), once);
    float const twice = once * 0x1p119f;
    BOOST_REQUIRE_EQUAL(bf16_to_float(float_to_bf16(twice)), twice);
    BOOST_REQUIRE_EQUAL(float_to_bf16(twice), float_to_bf16(e4m3 * 0x1p118f));
  }
  BOOST_TEST(subnormal == 7); // every e4m3 subnormal was among them
}

BOOST_AUTO_TEST_CASE(quantized_blocks_use_the_nvfp4_scale_and_the_nearest_values) {
  float const scale = 1.0f / std::sqrt(6144.0f);
  float const g = fp4::global_scale(scale);
  std::int64_t zeros = 0, codes = 0;
  std::vector<int> amplitude_seen(fp4::kAmplitudeSteps, 0);
  for (std::uint64_t b = 0; b < 4000; ++b) {
    std::uint8_t v[8], s = 0;
    fp4::quantize_block(99, b, scale, g, v, &s);
    float x[16], amax = 0;
    for (int j = 0; j < 16; ++j) {
      x[j] = fp4::source_weight(99, b * 16 + static_cast<std::uint64_t>(j), scale);
      BOOST_REQUIRE(x[j] != 0.0f);
      BOOST_REQUIRE_LE(std::fabs(x[j]), fp4::kSourceHi * scale);
      amax = std::max(amax, std::fabs(x[j]));
    }
    BOOST_REQUIRE_EQUAL(s, float_to_e4m3(amax / 6.0f / g));
    int const a = static_cast<int>(
        std::lround(std::log2(static_cast<double>(fp4::kSourceHi) * scale / amax)));
    if (a >= 0 && a < fp4::kAmplitudeSteps)
      ++amplitude_seen[static_cast<std::size_t>(a)];
    float const step = fp4::e4m3_value(s) * g;
    for (int j = 0; j < 16; ++j) {
      unsigned const c = j % 2 ? v[j / 2] >> 4 : v[j / 2] & 0xFu;
      BOOST_REQUIRE_EQUAL(c, fp4::e2m1_nearest(x[j] / step));
      zeros += (c & 7u) == 0;
      ++codes;
    }
  }
  // Source magnitudes of at least 1/20 of the block's largest never round to zero.
  BOOST_TEST(zeros == 0);
  BOOST_TEST(codes == 64000);
  for (int a = 0; a < fp4::kAmplitudeSteps; ++a)
    BOOST_TEST(amplitude_seen[static_cast<std::size_t>(a)] > 300, "amplitude 2^-" << a);
}

BOOST_AUTO_TEST_CASE(the_quantizer_names_the_same_bits_for_a_seed_and_others_for_another) {
  float const scale = 0.03f, g = fp4::global_scale(scale);
  std::uint8_t v1[8], v2[8], v3[8], s1, s2, s3;
  int differ = 0;
  for (std::uint64_t b = 0; b < 64; ++b) {
    fp4::quantize_block(7, b, scale, g, v1, &s1);
    fp4::quantize_block(7, b, scale, g, v2, &s2);
    fp4::quantize_block(8, b, scale, g, v3, &s3);
    BOOST_REQUIRE(std::memcmp(v1, v2, 8) == 0 && s1 == s2);
    differ += std::memcmp(v1, v3, 8) != 0;
  }
  BOOST_TEST(differ > 60);
}

BOOST_AUTO_TEST_CASE(the_split_fills_the_gpu_at_one_token_for_the_seed_shapes) {
  using gemm::WeightFormat;
  struct Case {
    std::int64_t tiles, n, k;
    WeightFormat f;
    int ks;
  };
  // T = 1: one row tile per expert (8, 22, 16 experts); GEMM1 then GEMM2 of each shape.
  Case const cases[] = {
      {8, 1024, 6144, WeightFormat::kFp4, 4},  {8, 6144, 512, WeightFormat::kFp4, 2},
      {22, 1280, 2048, WeightFormat::kFp4, 8}, {22, 2048, 1280, WeightFormat::kFp4, 2},
      {16, 1024, 3584, WeightFormat::kFp4, 2}, {8, 1024, 6144, WeightFormat::kBf16, 4},
      {22, 2048, 1280, WeightFormat::kBf16, 8}};
  for (Case const& c : cases) {
    gemm::DecodeSplit const s = gemm::plan_split(c.tiles, c.n, c.k, c.f, 132);
    BOOST_TEST_CONTEXT("tiles " << c.tiles << " n " << c.n << " k " << c.k << " "
                                << gemm::weight_format_name(c.f)) {
      BOOST_TEST(s.ks == c.ks);
      BOOST_TEST(s.groups * s.ks == gemm::DecodePolicy::kWarps);
      BOOST_TEST(s.units == c.tiles * s.row_blocks);
      BOOST_TEST(s.row_blocks * s.groups * gemm::DecodePolicy::kWarpRows >= c.n);
      // The busiest CTA has at most 13% more than an even share (top-22's GEMM2: 352 units).
      double const even = static_cast<double>(s.units) / 132.0;
      BOOST_TEST(static_cast<double>(s.waves) <= std::max(1.0, even * 1.13));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_split_is_the_cheapest_valid_one_and_a_forced_ks_is_obeyed) {
  using gemm::WeightFormat;
  for (std::int64_t tiles : {0, 1, 3, 8, 40, 200})
    for (std::int64_t k : {128, 384, 512, 1280, 6144})
      for (int forced : {0, 1, 2, 4, 8}) {
        gemm::DecodeSplit const s =
            gemm::plan_split(tiles, 1024, k, WeightFormat::kFp4, 132, forced);
        std::int64_t const steps = k / 128;
        if (forced > 0 && steps % forced != 0) {
          BOOST_TEST(s.ks == 0);
          continue;
        }
        BOOST_REQUIRE(s.ks >= 1);
        BOOST_TEST(steps % s.ks == 0);
        if (forced > 0)
          BOOST_TEST(s.ks == forced);
        BOOST_TEST(s.units == tiles * s.row_blocks);
        BOOST_TEST(s.waves == (s.units + 131) / 132);
      }
}

namespace {

/// A one-expert, one-tile problem: a [16][k] activations, w [n][k] in both formats.
struct Tiny {
  std::int64_t n = 32, k = 128, rows = 16;
  std::vector<std::uint16_t> a;
  std::vector<std::uint16_t> wb;    // bf16
  std::vector<std::uint8_t> wq, sq; // fp4
  std::vector<float> global{0.5f};
  std::vector<std::int32_t> cta{0}, total{16}, row_token;
  std::vector<std::uint16_t> c;
  Tiny()
      : a(static_cast<std::size_t>(rows * k)), wb(static_cast<std::size_t>(n * k)),
        wq(static_cast<std::size_t>(n * k / 2)), sq(static_cast<std::size_t>(n * k / 16)),
        row_token(16, -1), c(static_cast<std::size_t>(rows * n), kBf16Poison) {
    Rng rng(11);
    for (auto& x : a)
      x = float_to_bf16(static_cast<float>(rng.uniform(-1, 1)));
    for (auto& x : wb)
      x = float_to_bf16(static_cast<float>(rng.uniform(-1, 1)));
    for (auto& x : wq)
      x = static_cast<std::uint8_t>(rng.below(256));
    for (auto& x : sq)
      x = static_cast<std::uint8_t>(rng.below(0x7F)); // every finite positive byte
    row_token[0] = 0;
    row_token[1] = 3;
    row_token[5] = 1;
  }
  gemm::DecodeGemmParams params(gemm::WeightFormat f) {
    gemm::DecodeGemmParams p;
    p.format = f;
    p.gemm.a = a.data();
    p.gemm.b = f == gemm::WeightFormat::kFp4 ? static_cast<void const*>(wq.data()) : wb.data();
    p.gemm.c = c.data();
    p.gemm.cta_to_expert = cta.data();
    p.gemm.total_padded_rows = total.data();
    p.gemm.row_token = row_token.data();
    p.gemm.max_rows = rows;
    p.gemm.n = n;
    p.gemm.k = k;
    p.gemm.ldc = n;
    p.gemm.tile_m = 16;
    p.gemm.num_local_experts = 1;
    p.scales = sq.data();
    p.global_scale = global.data();
    return p;
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(the_reference_dequantizes_fp4_and_writes_only_the_real_rows) {
  Tiny t;
  reference::GemmOracle oracle;
  reference::decode_gemm(t.params(gemm::WeightFormat::kFp4), &oracle);
  for (std::int64_t r = 0; r < t.rows; ++r)
    for (std::int64_t j = 0; j < t.n; ++j) {
      std::size_t const at = static_cast<std::size_t>(r * t.n + j);
      if (t.row_token[static_cast<std::size_t>(r)] < 0) {
        BOOST_REQUIRE_EQUAL(t.c[at], kBf16Poison);
        BOOST_REQUIRE(std::isnan(oracle.exact[at]));
        continue;
      }
      double sum = 0;
      for (std::int64_t i = 0; i < t.k; ++i) {
        std::uint8_t const byte = t.wq[static_cast<std::size_t>((j * t.k + i) / 2)];
        unsigned const code = i % 2 ? byte >> 4 : byte & 0xFu;
        double const w = static_cast<double>(fp4::e2m1_value(code)) *
                         fp4::e4m3_value(t.sq[static_cast<std::size_t>((j * t.k + i) / 16)]);
        sum += w * bf16_to_float(t.a[static_cast<std::size_t>(r * t.k + i)]);
      }
      sum *= 0.5;
      BOOST_REQUIRE_CLOSE(oracle.exact[at], sum, 1e-9);
      BOOST_REQUIRE_EQUAL(t.c[at], float_to_bf16(static_cast<float>(sum)));
    }
}

BOOST_AUTO_TEST_CASE(the_check_passes_the_reference_and_fails_one_wrong_element) {
  for (auto f : {gemm::WeightFormat::kBf16, gemm::WeightFormat::kFp4}) {
    Tiny t;
    reference::GemmOracle oracle;
    reference::decode_gemm(t.params(f), &oracle);
    reference::GemmCheck const ok = reference::check_gemm(t.c, t.n, t.n, oracle);
    BOOST_TEST(ok.pass);
    BOOST_TEST(ok.checked == 3 * t.n);
    BOOST_TEST(ok.naive_err > 0.0); // the tolerance is never degenerate
    BOOST_TEST(ok.tolerance < 0.02 * ok.peak);
    // One output off by 2% of the peak fails, and is named.
    std::vector<std::uint16_t> bad = t.c;
    std::size_t const at = static_cast<std::size_t>(5 * t.n + 7);
    bad[at] = float_to_bf16(bf16_to_float(bad[at]) + static_cast<float>(0.02 * ok.peak));
    reference::GemmCheck const no = reference::check_gemm(bad, t.n, t.n, oracle);
    BOOST_TEST(!no.pass);
    BOOST_TEST(no.worst == static_cast<std::int64_t>(at));
    // An unwritten (poisoned) real row fails.
    std::vector<std::uint16_t> hole = t.c;
    hole[static_cast<std::size_t>(t.n + 3)] = kBf16Poison;
    BOOST_TEST(!reference::check_gemm(hole, t.n, t.n, oracle).pass);
  }
}

BOOST_AUTO_TEST_CASE(scale_layout_names_parse_back_and_nothing_else_does) {
  for (fp4::ScaleLayout l : {fp4::ScaleLayout::kRowMajor, fp4::ScaleLayout::kTiled}) {
    auto const back = fp4::scale_layout_from_name(fp4::scale_layout_name(l));
    BOOST_TEST_REQUIRE(back.has_value());
    BOOST_TEST((*back == l));
  }
  for (char const* bad : {"", "?", "Tiled", "row-major", "tiled "})
    BOOST_TEST(!fp4::scale_layout_from_name(bad).has_value(), bad);
}

BOOST_AUTO_TEST_CASE(tiled_scales_are_a_permutation_of_the_row_major_bytes_in_128_byte_tiles) {
  // The word order the header documents: word 4 (r % 8) + r / 8 + 2 (b / 4), byte b % 4.
  BOOST_TEST(fp4::tiled_byte(0, 0) == 0);
  BOOST_TEST(fp4::tiled_byte(8, 0) == 4);
  BOOST_TEST(fp4::tiled_byte(0, 4) == 8);
  BOOST_TEST(fp4::tiled_byte(1, 0) == 16);
  BOOST_TEST(fp4::tiled_byte(9, 7) == 31);
  BOOST_TEST(fp4::tiled_byte(15, 7) == 127);
  for (std::int64_t rows : {16, 48}) {
    for (std::int64_t k : {128, 384, 1024}) {
      std::int64_t const blocks = k / fp4::kBlock;
      std::vector<int> seen(static_cast<std::size_t>(rows * blocks), 0);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t b = 0; b < blocks; ++b) {
          BOOST_REQUIRE_EQUAL(fp4::scale_offset(fp4::ScaleLayout::kRowMajor, r, b, k),
                              r * blocks + b);
          std::int64_t const o = fp4::scale_offset(fp4::ScaleLayout::kTiled, r, b, k);
          BOOST_REQUIRE(o >= 0);
          BOOST_REQUIRE(o < rows * blocks);
          ++seen[static_cast<std::size_t>(o)];
          // Tile (r / 16, b / 8): the row bands in order, a band's tiles in k order.
          BOOST_REQUIRE_EQUAL(o / fp4::kTileBytes, (r / 16) * (k / 128) + b / 8);
        }
      for (int s : seen)
        BOOST_REQUIRE_EQUAL(s, 1);
    }
  }
}

BOOST_AUTO_TEST_CASE(both_scale_layouts_stage_the_image_the_decode_gemm_lanes_read) {
  // Emulates the copies of kernels/gemm/decode_kernels.cuh for one warp and stage (the offsets
  // of gemm::ScaleStaging, which the kernel calls) on a map from each global byte to its
  // (row, block), and checks the shared-memory image against what the MMA lanes read: lane
  // (g, q) of tile m takes the two bytes at 4 (4 g + (q & 2) + h) + 2 (q & 1) for row
  // 16 m + g + 8 h, blocks 2 q and 2 q + 1 of the stage.
  using Staging = gemm::ScaleStaging;
  constexpr int kImage = gemm::DecodePolicy::kM16 * fp4::kTileBytes;
  for (std::int64_t k : {256, 1024}) {
    std::int64_t const blocks = k / fp4::kBlock, rows = 96;
    std::vector<std::pair<std::int64_t, std::int64_t>> rm(static_cast<std::size_t>(rows * blocks)),
        tiled(rm.size());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t b = 0; b < blocks; ++b) {
        rm[static_cast<std::size_t>(fp4::scale_offset(fp4::ScaleLayout::kRowMajor, r, b, k))] = {r,
                                                                                                 b};
        tiled[static_cast<std::size_t>(fp4::scale_offset(fp4::ScaleLayout::kTiled, r, b, k))] = {r,
                                                                                                 b};
      }
    for (std::int64_t row0 : {0, 32, 64})
      for (std::int64_t k0 = 0; k0 < k; k0 += 128)
        for (int stage = 0; stage * 128 + k0 < k; ++stage) {
          BOOST_TEST_CONTEXT("k " << k << " row0 " << row0 << " k0 " << k0 << " stage " << stage) {
            std::vector<std::pair<std::int64_t, std::int64_t>> want(kImage), got_rm(kImage),
                got_tiled(kImage);
            for (int m = 0; m < gemm::DecodePolicy::kM16; ++m)
              for (int lane = 0; lane < 32; ++lane)
                for (int h = 0; h < 2; ++h)
                  for (int j = 0; j < 2; ++j) {
                    int const g = lane >> 2, q = lane & 3;
                    int const at = m * 128 + 4 * (4 * g + (q & 2) + h) + 2 * (q & 1) + j;
                    want[static_cast<std::size_t>(at)] = {row0 + 16 * m + g + 8 * h,
                                                          k0 / 16 + 8 * stage + 2 * q + j};
                  }
            // Row-major: per lane and tile 4 bytes to word 32 m + lane, the tiles k bytes apart.
            for (int m = 0; m < gemm::DecodePolicy::kM16; ++m)
              for (int lane = 0; lane < 32; ++lane) {
                int const g = lane >> 2, q = lane & 3;
                std::int64_t const src =
                    Staging::rowmajor_src(row0 + g, static_cast<int>(k0), k, q) + m * k +
                    stage * Staging::stage_advance(fp4::ScaleLayout::kRowMajor);
                // The formula is fp4::scale_offset's.
                BOOST_REQUIRE_EQUAL(src - stage * 8,
                                    fp4::scale_offset(fp4::ScaleLayout::kRowMajor,
                                                      row0 + 16 * m + g + 8 * (q & 1),
                                                      k0 / 16 + 4 * (q >> 1), k));
                for (int j = 0; j < 4; ++j)
                  got_rm[static_cast<std::size_t>(m * 128 + 4 * lane + j)] =
                      rm[static_cast<std::size_t>(src + j)];
              }
            // Tiled: lanes 0..15, 16 contiguous bytes each to chunk `lane`.
            for (int lane = 0; lane < Staging::kTiledLanes; ++lane) {
              std::int64_t const src = Staging::tiled_src(row0, static_cast<int>(k0), k, lane) +
                                       stage * Staging::stage_advance(fp4::ScaleLayout::kTiled);
              BOOST_REQUIRE_EQUAL(src % 16, 0); // cp.async of 16 bytes: aligned source
              for (int j = 0; j < 16; ++j)
                got_tiled[static_cast<std::size_t>(16 * lane + j)] =
                    tiled[static_cast<std::size_t>(src + j)];
            }
            BOOST_TEST((got_rm == want));
            BOOST_TEST((got_tiled == want));
          }
        }
  }
}

namespace {

/// A Tiny of 48 rows (three 16-row bands) and k = 256 with random activations, values and scales,
/// its output poisoned.
Tiny random_tiny(std::uint64_t seed, std::int64_t n = 48, std::int64_t k = 256) {
  Tiny t;
  t.n = n;
  t.k = k;
  t.wq.resize(static_cast<std::size_t>(t.n * t.k / 2));
  t.sq.resize(static_cast<std::size_t>(t.n * t.k / 16));
  t.a.resize(static_cast<std::size_t>(t.rows * t.k));
  Rng rng(seed);
  for (auto& x : t.a)
    x = float_to_bf16(static_cast<float>(rng.uniform(-1, 1)));
  for (auto& x : t.wq)
    x = static_cast<std::uint8_t>(rng.below(256));
  for (auto& x : t.sq)
    x = static_cast<std::uint8_t>(rng.below(0x7F));
  t.c.assign(static_cast<std::size_t>(t.rows * t.n), kBf16Poison);
  return t;
}

} // namespace

BOOST_AUTO_TEST_CASE(the_reference_reads_tiled_scales_to_the_same_bits) {
  Tiny t = random_tiny(5);
  reference::GemmOracle o_rm, o_tiled;
  reference::decode_gemm(t.params(gemm::WeightFormat::kFp4), &o_rm);
  std::vector<std::uint16_t> const c_rm = t.c;
  std::vector<std::uint8_t> tiled(t.sq.size());
  for (std::int64_t r = 0; r < t.n; ++r)
    for (std::int64_t b = 0; b < t.k / 16; ++b)
      tiled[static_cast<std::size_t>(fp4::scale_offset(fp4::ScaleLayout::kTiled, r, b, t.k))] =
          t.sq[static_cast<std::size_t>(r * (t.k / 16) + b)];
  BOOST_TEST((tiled != t.sq)); // a real permutation
  auto p = t.params(gemm::WeightFormat::kFp4);
  p.scales = tiled.data();
  p.scale_layout = fp4::ScaleLayout::kTiled;
  t.c.assign(t.c.size(), kBf16Poison);
  reference::decode_gemm(p, &o_tiled);
  BOOST_TEST((t.c == c_rm));
  BOOST_TEST(std::memcmp(o_rm.exact.data(), o_tiled.exact.data(), o_rm.exact.size() * 8) == 0);
  // The row-major reading of the tiled bytes is another GEMM.
  p.scale_layout = fp4::ScaleLayout::kRowMajor;
  reference::decode_gemm(p);
  BOOST_TEST((t.c != c_rm));
  // Tiled needs k a multiple of 128 and n of 16.
  p.scale_layout = fp4::ScaleLayout::kTiled;
  p.gemm.n = p.gemm.ldc = 40;
  BOOST_CHECK_THROW(reference::decode_gemm(p), InputError);
}

namespace {

/// The reference on `bytes` (t's values in `layout`) gives the bits and the exact sums it gives
/// on t's nibbles; the same bytes read as `other` are another GEMM.
void reads_to_the_nibbles_bits(Tiny& t, std::vector<std::uint8_t> const& bytes,
                               fp4::ValueLayout layout, fp4::ValueLayout other) {
  reference::GemmOracle o_nib, o_layout;
  reference::decode_gemm(t.params(gemm::WeightFormat::kFp4), &o_nib);
  std::vector<std::uint16_t> const c_nib = t.c;
  auto p = t.params(gemm::WeightFormat::kFp4);
  p.gemm.b = bytes.data();
  p.value_layout = layout;
  t.c.assign(t.c.size(), kBf16Poison);
  reference::decode_gemm(p, &o_layout);
  BOOST_TEST((t.c == c_nib));
  BOOST_TEST(std::memcmp(o_nib.exact.data(), o_layout.exact.data(), o_nib.exact.size() * 8) == 0);
  p.value_layout = other;
  reference::decode_gemm(p);
  BOOST_TEST((t.c != c_nib));
}

} // namespace

BOOST_AUTO_TEST_CASE(the_reference_reads_packed_values_to_the_same_bits) {
  Tiny t = random_tiny(6);
  std::vector<std::uint8_t> packed(t.wq.size());
  fp4::pack_words(t.wq.data(), packed.data(), packed.size());
  BOOST_TEST((packed != t.wq)); // a real permutation
  // The packed bytes read as nibbles are another GEMM.
  reads_to_the_nibbles_bits(t, packed, fp4::ValueLayout::kPacked, fp4::ValueLayout::kNibbles);
  // Packed values are fp4 only.
  auto q = t.params(gemm::WeightFormat::kBf16);
  q.value_layout = fp4::ValueLayout::kPacked;
  BOOST_CHECK_THROW(reference::decode_gemm(q), InputError);
}

BOOST_AUTO_TEST_CASE(the_reference_reads_tiled_values_to_the_same_bits) {
  // n = 64, k = 256: two bands of 32 rows, two stages of 128 k.
  Tiny t = random_tiny(7, 64, 256);
  std::vector<std::uint8_t> packed(t.wq.size()), tiles(t.wq.size());
  fp4::pack_words(t.wq.data(), packed.data(), packed.size());
  fp4::tile_chunks(packed.data(), tiles.data(), t.n, t.k);
  BOOST_TEST((tiles != packed));
  // The tiled bytes read as packed row-major words are another GEMM.
  reads_to_the_nibbles_bits(t, tiles, fp4::ValueLayout::kTiles, fp4::ValueLayout::kPacked);
  // Tiles need n a multiple of 32 (48 is not) and fp4 weights.
  Tiny u = random_tiny(8);
  auto r = u.params(gemm::WeightFormat::kFp4);
  r.value_layout = fp4::ValueLayout::kTiles;
  BOOST_CHECK_THROW(reference::decode_gemm(r), InputError);
  auto q = t.params(gemm::WeightFormat::kBf16);
  q.value_layout = fp4::ValueLayout::kTiles;
  BOOST_CHECK_THROW(reference::decode_gemm(q), InputError);
}

BOOST_AUTO_TEST_CASE(the_reference_rejects_bad_params_naming_the_field) {
  Tiny t;
  auto p = t.params(gemm::WeightFormat::kFp4);
  p.scales = nullptr;
  BOOST_CHECK_THROW(reference::decode_gemm(p), InputError);
  p = t.params(gemm::WeightFormat::kFp4);
  t.cta[0] = 1;
  BOOST_CHECK_THROW(reference::decode_gemm(p), InputError);
  t.cta[0] = 0;
  p.gemm.k = 120;
  BOOST_CHECK_THROW(reference::decode_gemm(p), InputError);
}

BOOST_AUTO_TEST_CASE(variant_and_format_names_round_trip) {
  for (auto v : {gemm::Variant::kTiled, gemm::Variant::kSplitK}) {
    gemm::Variant back{};
    BOOST_TEST(gemm::parse_variant(gemm::variant_name(v), &back));
    BOOST_TEST(static_cast<int>(back) == static_cast<int>(v));
  }
  for (auto f : {gemm::WeightFormat::kBf16, gemm::WeightFormat::kFp4}) {
    gemm::WeightFormat back{};
    BOOST_TEST(gemm::parse_weight_format(gemm::weight_format_name(f), &back));
    BOOST_TEST(static_cast<int>(back) == static_cast<int>(f));
  }
  BOOST_TEST(!gemm::parse_variant("warp", nullptr));
  BOOST_TEST(!gemm::parse_weight_format("nvfp4", nullptr));
}

BOOST_AUTO_TEST_CASE(the_chain_gives_each_decode_gemm_half_the_sms_at_one_cta_per_sm) {
  // One resident wave (race and equivalence): two CTAs of 256 x 128 registers fill an SM, so
  // GEMM1 and GEMM2 beside permute and activation need distinct SMs.
  BOOST_TEST(gemm::chain_grid(132, 1) == 66);
  BOOST_TEST(gemm::chain_grid(1, 1) == 1);
  // Otherwise the wave num_ctas launches (sweep layer's default of 2 per SM, the policy's 1).
  BOOST_TEST(gemm::chain_grid(132, 2) == 264);
  BOOST_TEST(gemm::chain_grid(132, 0) == 132 * gemm::DecodePolicy::kCtasPerSm);
  // The split of a smaller launch is planned for the wave (DecodeLaunch::plan_grid): a grid of
  // 66 alone would pick another ks for top-8 GEMM1 at T = 1 (other sums, other bits).
  gemm::DecodeSplit const wave = gemm::plan_split(8, 1024, 6144, gemm::WeightFormat::kFp4, 132);
  gemm::DecodeSplit const half = gemm::plan_split(8, 1024, 6144, gemm::WeightFormat::kFp4, 66);
  BOOST_TEST(wave.ks != half.ks);
}

BOOST_AUTO_TEST_CASE(grid_ctas_is_a_split_k_option_and_never_negative) {
  Tiny t;
  gemm::DecodeGemmParams p = t.params(gemm::WeightFormat::kBf16);
  p.gemm.n = p.gemm.ldc = 64; // the tiled GEMM's column tile; c is only checked for null
  gemm::DecodeOptions o;
  gemm::validate(p, gemm::Variant::kTiled, o);
  o.grid_ctas = 4;
  BOOST_CHECK_THROW(gemm::validate(p, gemm::Variant::kTiled, o), InputError);
  p = t.params(gemm::WeightFormat::kFp4);
  gemm::validate(p, gemm::Variant::kSplitK, o);
  o.grid_ctas = -1;
  BOOST_CHECK_THROW(gemm::validate(p, gemm::Variant::kSplitK, o), InputError);
}

BOOST_AUTO_TEST_CASE(tiled_scales_are_read_by_the_split_k_fp4_kernel_only_from_aligned_memory) {
  Tiny t;
  alignas(16) static std::uint8_t aligned[32 * 128 / 16 + 16];
  gemm::DecodeGemmParams p = t.params(gemm::WeightFormat::kFp4);
  p.scales = aligned;
  p.scale_layout = fp4::ScaleLayout::kTiled;
  gemm::DecodeOptions o;
  gemm::validate(p, gemm::Variant::kSplitK, o);
  auto rejects = [](gemm::DecodeGemmParams const& q, gemm::Variant v,
                    gemm::DecodeOptions const& opt, char const* says) {
    try {
      gemm::validate(q, v, opt);
    } catch (InputError const& e) {
      BOOST_TEST(std::string(e.what()).find(says) != std::string::npos, e.what());
      return;
    }
    BOOST_ERROR("accepted: " << says);
  };
  gemm::DecodeGemmParams q = p;
  q.scales = aligned + 4;
  rejects(q, gemm::Variant::kSplitK, o, "aligned to 16 bytes");
  o.deep = true;
  rejects(p, gemm::Variant::kSplitK, o, "without deep");
  o.deep = false;
  o.loads_only = true;
  rejects(p, gemm::Variant::kSplitK, o, "loads_only");
  o.loads_only = false;
  q = t.params(gemm::WeightFormat::kBf16);
  q.scale_layout = fp4::ScaleLayout::kTiled;
  rejects(q, gemm::Variant::kSplitK, o, "fp4 weights only");
  q = p;
  q.scale_layout = static_cast<fp4::ScaleLayout>(7);
  rejects(q, gemm::Variant::kSplitK, o, "unknown scale layout");
  // Packed values: read by the tiled-scale kernel only.
  q = p;
  q.value_layout = fp4::ValueLayout::kPacked;
  gemm::validate(q, gemm::Variant::kSplitK, o);
  o.lean = true;
  gemm::validate(q, gemm::Variant::kSplitK, o);
  o.lean = false;
  q.scale_layout = fp4::ScaleLayout::kRowMajor;
  rejects(q, gemm::Variant::kSplitK, o, "value layout packed");
  q = p;
  q.value_layout = static_cast<fp4::ValueLayout>(3);
  rejects(q, gemm::Variant::kSplitK, o, "unknown value layout");
  // Tiled values: read by the wide launch of the tiled-scale kernel only.
  q = p;
  q.value_layout = fp4::ValueLayout::kTiles;
  rejects(q, gemm::Variant::kSplitK, o, "value layout tiles is read by the wide kernel only");
  o.wide = true;
  BOOST_CHECK_NO_THROW(gemm::validate(q, gemm::Variant::kSplitK, o));
  q.scale_layout = fp4::ScaleLayout::kRowMajor;
  rejects(q, gemm::Variant::kSplitK, o, "value layout tiles is read by the tiled-scale kernels");
  o.wide = false;
  // Two warp-stages a stage (wide): built into the packed-value kernel only, lean or not.
  o.wide = true;
  rejects(p, gemm::Variant::kSplitK, o, "wide is built into the packed-value kernels");
  q = p;
  q.value_layout = fp4::ValueLayout::kPacked;
  for (bool lean : {false, true}) {
    o.lean = lean;
    BOOST_CHECK_NO_THROW(gemm::validate(q, gemm::Variant::kSplitK, o));
  }
}

BOOST_AUTO_TEST_CASE(the_wide_kernel_keeps_the_bytes_in_flight_that_fit) {
  // One stage of the wide launch holds two warp-stages. At two CTAs per SM both CTAs share an
  // SM's 228 KiB (1 KiB of it reserved per CTA), with one stage in flight; at one CTA per SM two
  // stages are in flight: the default launch's 4 warp-stages, in at most 227 KiB.
  using gemm::DecodePolicy;
  auto const fp4 = gemm::WeightFormat::kFp4;
  for (std::int64_t tile : {8, 16}) {
    std::size_t const two =
        DecodePolicy::smem_bytes(fp4, tile, DecodePolicy::wide_stages(2), DecodePolicy::kWideWidth);
    BOOST_TEST(2 * (two + 1024) <= 228u * 1024u, "tile " << tile << ": " << two);
    BOOST_TEST(two - DecodePolicy::smem_bytes(fp4, tile, DecodePolicy::wide_stages(2)) ==
               static_cast<std::size_t>(DecodePolicy::kWarps * DecodePolicy::wide_stages(2) *
                                        DecodePolicy::stage_bytes(fp4)));
    std::size_t const one =
        DecodePolicy::smem_bytes(fp4, tile, DecodePolicy::wide_stages(1), DecodePolicy::kWideWidth);
    BOOST_TEST(one <= 227u * 1024u, "tile " << tile << ": " << one);
    BOOST_TEST((DecodePolicy::wide_stages(1) - 1) * DecodePolicy::kWideWidth ==
               DecodePolicy::stages(fp4) - 1);
    BOOST_TEST(DecodePolicy::wide_stages(0) == DecodePolicy::wide_stages(1));
  }
}
