#define BOOST_TEST_MODULE reference
#include <boost/test/unit_test.hpp>

#include "core/bf16.hpp"
#include "core/finalize_inputs.hpp"
#include "core/fp8.hpp"
#include "core/ops/errors.hpp"
#include "core/rng.hpp"
#include "core/routing.hpp"
#include "kokkos_fixture.hpp"
#include "reference/activation.hpp"
#include "reference/finalize.hpp"
#include "reference/gemm.hpp"
#include "reference/permute.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace moefin;
using finalize::WeightType;

namespace {

/// Unit roundoff of bf16 (8-bit significand) and of fp32.
constexpr double kBf16U = 0x1p-8;
constexpr double kFp32U = 0x1p-24;

struct Problem {
  Routing routing;
  RoutingLayout layout;
  FinalizeInputs inputs;
};

Problem problem(std::int64_t T, std::int64_t E, std::int64_t K, std::int64_t H, std::int64_t Hp,
                Distribution d, double drop, std::uint64_t seed, bool scales = false) {
  RoutingSpec s = routing_spec(T, E, K, d, seed);
  s.drop_fraction = drop;
  Problem p;
  p.routing = generate_routing(s);
  p.layout = build_layout(p.routing, s, 8);
  p.inputs = make_finalize_inputs(p.layout, H, Hp, seed * 31 + 1, scales);
  return p;
}

double weight_at(Problem const& p, WeightType wt, std::size_t e) {
  switch (wt) {
  case WeightType::kNone:
    return 1.0;
  case WeightType::kBf16:
    return bf16_to_float(p.routing.weights_bf16[e]);
  case WeightType::kFp32:
    return p.routing.weights[e];
  }
  return 0;
}

/// The plain nested loop of docs/design/computation.md in double, straight from the arrays:
/// sum and sum of magnitudes (the latter bounds the fp32 accumulation error).
struct Exact {
  std::vector<double> sum, magnitude;
};
Exact nested_loop(Problem const& p, WeightType wt, bool scaled) {
  auto const T = static_cast<std::size_t>(p.layout.num_tokens);
  auto const K = static_cast<std::size_t>(p.layout.top_k);
  auto const H = static_cast<std::size_t>(p.inputs.hidden);
  auto const Hp = static_cast<std::size_t>(p.inputs.hidden_padded);
  auto const blocks = (Hp + 127) / 128;
  Exact x{std::vector<double>(T * H, 0.0), std::vector<double>(T * H, 0.0)};
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t k = 0; k < K; ++k) {
      std::int32_t const row = p.layout.expanded_to_permuted[t * K + k];
      if (row < 0)
        continue;
      auto const r = static_cast<std::size_t>(row);
      for (std::size_t h = 0; h < H; ++h) {
        double v = weight_at(p, wt, t * K + k) * bf16_to_float(p.inputs.gemm_out[r * Hp + h]);
        if (scaled)
          v *= p.inputs.in_scales[r * blocks + h / 128];
        x.sum[t * H + h] += v;
        x.magnitude[t * H + h] += std::fabs(v);
      }
    }
  return x;
}

/// The documented fp32 order (reference/finalize.hpp), written out again for a bitwise check.
float fp32_order(Problem const& p, WeightType wt, std::size_t t, std::size_t h, bool scaled) {
  auto const K = static_cast<std::size_t>(p.layout.top_k);
  auto const Hp = static_cast<std::size_t>(p.inputs.hidden_padded);
  auto const blocks = (Hp + 127) / 128;
  float acc = 0.0f;
  for (std::size_t k = 0; k < K; ++k) {
    std::int32_t const row = p.layout.expanded_to_permuted[t * K + k];
    if (row < 0)
      continue;
    auto const r = static_cast<std::size_t>(row);
    float x = bf16_to_float(p.inputs.gemm_out[r * Hp + h]);
    if (scaled)
      x = p.inputs.in_scales[r * blocks + h / 128] * x;
    float const prod = static_cast<float>(weight_at(p, wt, t * K + k)) * x;
    acc = acc + prod;
  }
  return acc;
}

struct FinalizeCase {
  std::int64_t T, E, K, H, Hp;
  Distribution d;
  double drop;
  WeightType wt;
};

std::string describe(FinalizeCase const& c) {
  return "T=" + std::to_string(c.T) + " E=" + std::to_string(c.E) + " K=" + std::to_string(c.K) +
         " H=" + std::to_string(c.H) + " Hp=" + std::to_string(c.Hp) + " " +
         distribution_name(c.d) + " drop=" + std::to_string(c.drop) +
         " w=" + weight_type_name(c.wt);
}

std::vector<FinalizeCase> const kCases{
    {16, 64, 8, 256, 256, Distribution::kUniform, 0.0, WeightType::kBf16},
    {16, 64, 8, 256, 320, Distribution::kUniform, 0.0, WeightType::kFp32},
    {5, 32, 6, 1003, 1011, Distribution::kZipf, 0.25, WeightType::kBf16}, // H % 8 != 0
    {3, 16, 4, 130, 136, Distribution::kHot, 0.5, WeightType::kNone},
    {1, 8, 1, 64, 64, Distribution::kUniform, 0.0, WeightType::kFp32},        // T = 1, K = 1
    {4, 64, 64, 200, 256, Distribution::kRoundRobin, 0.0, WeightType::kBf16}, // K = 64
    {9, 256, 64, 129, 129, Distribution::kScores, 0.1, WeightType::kFp32},
    {12, 1, 1, 96, 100, Distribution::kUniform, 0.0, WeightType::kBf16}, // all on one expert
    {6, 16, 4, 77, 80, Distribution::kUniform, 1.0, WeightType::kBf16},  // all dropped
};

} // namespace

BOOST_AUTO_TEST_CASE(finalize_matches_a_nested_loop_in_double_within_bf16_rounding) {
  for (auto const& c : kCases) {
    Problem const p = problem(c.T, c.E, c.K, c.H, c.Hp, c.d, c.drop, 17);
    std::vector<bf16_bits> out(static_cast<std::size_t>(c.T * c.H), kBf16Poison);
    auto const params = finalize_params(p.routing, p.layout, p.inputs, c.wt, out.data());
    reference::finalize(params);
    Exact const x = nested_loop(p, c.wt, false);
    // |out - exact| <= u_bf16 |acc| + |acc - exact|, with the fp32 sum off by at most
    // (K + 1) u_fp32 sum|w x| (K additions and, for fp32 weights, one product rounding each).
    double worst = 0, seen = 0;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      double const acc_err = (c.K + 1) * kFp32U * x.magnitude[i];
      double const tol = kBf16U * (std::fabs(x.sum[i]) + acc_err) + acc_err;
      double const err = std::fabs(bf16_to_float(out[i]) - x.sum[i]);
      bad += !(err <= tol);
      if (tol > 0)
        worst = std::max(worst, err / tol);
      if (x.sum[i] != 0)
        seen = std::max(seen, err / std::fabs(x.sum[i]));
    }
    BOOST_TEST(bad == 0u, describe(c) << ": worst error / tolerance " << worst);
    if (c.drop < 1.0 && c.K > 1) // K = 1 with renormalized weights copies the input exactly
      BOOST_TEST(seen > kBf16U / 4, describe(c)
                                        << ": the bf16 rounding is visible (" << seen << ")");
    // The oracle the CUDA checks use is this same sum.
    std::vector<double> const oracle = reference::finalize_exact(params);
    for (std::size_t i = 0; i < out.size(); ++i)
      BOOST_TEST(std::fabs(oracle[i] - x.sum[i]) <= 1e-12 * (1 + x.magnitude[i]));
  }
}

BOOST_AUTO_TEST_CASE(finalize_is_bitwise_the_documented_fp32_order) {
  for (auto const& c : kCases) {
    Problem const p = problem(c.T, c.E, c.K, c.H, c.Hp, c.d, c.drop, 23);
    std::vector<bf16_bits> out(static_cast<std::size_t>(c.T * c.H), kBf16Poison);
    reference::finalize(finalize_params(p.routing, p.layout, p.inputs, c.wt, out.data()));
    std::size_t mismatches = 0;
    for (std::size_t t = 0; t < static_cast<std::size_t>(c.T); ++t)
      for (std::size_t h = 0; h < static_cast<std::size_t>(c.H); ++h)
        mismatches += out[t * static_cast<std::size_t>(c.H) + h] !=
                      float_to_bf16(fp32_order(p, c.wt, t, h, false));
    BOOST_TEST(mismatches == 0u, describe(c));
  }
}

BOOST_AUTO_TEST_CASE(dropped_experts_are_skipped_and_padding_is_never_read) {
  // Padding rows and columns [H, Hp) hold NaN: any read of them would make an output NaN.
  Problem const p = problem(10, 32, 8, 100, 136, Distribution::kUniform, 0.5, 5);
  std::size_t poisoned = 0;
  for (auto v : p.inputs.gemm_out)
    poisoned += v == kBf16Poison;
  BOOST_TEST(poisoned > 0u);
  std::vector<bf16_bits> out(1000, kBf16Poison);
  reference::finalize(
      finalize_params(p.routing, p.layout, p.inputs, WeightType::kBf16, out.data()));
  for (auto v : out)
    BOOST_TEST(!std::isnan(bf16_to_float(v)));
  // A token whose every expert is dropped gets exact zeros.
  Problem const none = problem(4, 16, 4, 40, 40, Distribution::kUniform, 1.0, 5);
  BOOST_TEST(none.inputs.num_rows == 0);
  std::vector<bf16_bits> zero(160, kBf16Poison);
  reference::finalize(
      finalize_params(none.routing, none.layout, none.inputs, WeightType::kFp32, zero.data()));
  for (auto v : zero)
    BOOST_TEST(v == 0);
}

BOOST_AUTO_TEST_CASE(no_weights_mode_sums_the_rows_with_weight_one) {
  Problem const p = problem(6, 16, 3, 64, 64, Distribution::kUniform, 0.0, 8);
  std::vector<bf16_bits> out(6 * 64, kBf16Poison);
  auto params = finalize_params(p.routing, p.layout, p.inputs, WeightType::kNone, out.data());
  BOOST_TEST(params.expert_weights == nullptr);
  reference::finalize(params);
  for (std::size_t t = 0; t < 6; ++t)
    for (std::size_t h = 0; h < 64; ++h) {
      float acc = 0;
      for (std::size_t k = 0; k < 3; ++k)
        acc =
            acc +
            bf16_to_float(
                p.inputs.gemm_out
                    [static_cast<std::size_t>(p.layout.expanded_to_permuted[t * 3 + k]) * 64 + h]);
      BOOST_TEST(out[t * 64 + h] == float_to_bf16(acc));
    }
}

BOOST_AUTO_TEST_CASE(finalize_rejects_bad_params_naming_the_field) {
  Problem const p = problem(2, 8, 2, 16, 16, Distribution::kUniform, 0.0, 3);
  std::vector<bf16_bits> out(32);
  auto expect = [&](finalize::FinalizeParams const& bad, char const* what) {
    try {
      reference::finalize(bad);
      BOOST_ERROR("no InputError for " << what);
    } catch (InputError const& e) {
      BOOST_TEST(std::string(e.what()).find(what) != std::string::npos, e.what());
    }
  };
  auto params = finalize_params(p.routing, p.layout, p.inputs, WeightType::kBf16, out.data());
  auto a = params;
  a.hidden_padded = 8;
  expect(a, "hidden_padded 8 < hidden 16");
  auto b = params;
  b.expert_weights = nullptr;
  expect(b, "expert_weights is null");
  std::vector<std::int32_t> perm(p.layout.expanded_to_permuted);
  perm[1] = static_cast<std::int32_t>(p.inputs.num_rows);
  auto c = params;
  c.expanded_to_permuted = perm.data();
  expect(c, "expanded_to_permuted[1]");
  auto d = params;
  d.top_k = 65;
  expect(d, "top_k 65");
}

namespace {

/// E4M3 by definition: all 127 non-negative finite values, ascending with the code.
std::vector<double> e4m3_table() {
  std::vector<double> v;
  for (int m = 0; m < 8; ++m)
    v.push_back(std::ldexp(m, -9));
  for (int e = 1; e <= 15; ++e)
    for (int m = 0; m < 8; ++m)
      if (!(e == 15 && m == 7))
        v.push_back(std::ldexp(8 + m, e - 10));
  return v;
}

/// Nearest table value, ties to the even code; beyond 448 the nearest is 448 (saturation).
fp8_bits e4m3_by_search(float x, std::vector<double> const& table) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  auto const sign = static_cast<fp8_bits>((u >> 24) & 0x80);
  if (std::isnan(x))
    return static_cast<fp8_bits>(sign | 0x7F);
  double const a = std::fabs(static_cast<double>(x));
  std::size_t best = 0;
  for (std::size_t c = 1; c < table.size(); ++c) {
    double const d = std::fabs(table[c] - a), b = std::fabs(table[best] - a);
    if (d < b || (d == b && c % 2 == 0))
      best = c;
  }
  return static_cast<fp8_bits>(sign | best);
}

} // namespace

BOOST_AUTO_TEST_CASE(e4m3_decodes_every_code_and_encodes_it_back) {
  auto const table = e4m3_table();
  BOOST_TEST(table.size() == 127u);
  BOOST_TEST(table.back() == 448.0);
  for (int c = 0; c < 256; ++c) {
    auto const code = static_cast<fp8_bits>(c);
    float const v = e4m3_to_float(code);
    if ((c & 0x7F) == 0x7F) {
      BOOST_TEST(std::isnan(v), "code " << c);
      continue;
    }
    BOOST_TEST(std::fabs(v) == table[static_cast<std::size_t>(c & 0x7F)], "code " << c);
    BOOST_TEST(std::signbit(v) == (c >= 128), "code " << c);
    BOOST_TEST(float_to_e4m3(v) == code, "code " << c);
  }
}

BOOST_AUTO_TEST_CASE(e4m3_rounds_to_nearest_even_and_saturates_like_satfinite) {
  auto const table = e4m3_table();
  std::vector<float> xs{0.0f,
                        -0.0f,
                        0x1p-10f,
                        -0x1p-10f,
                        0x1.0001p-10f,
                        448.0f,
                        463.99f,
                        464.0f,
                        464.01f,
                        -1e30f,
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::denorm_min()};
  // Every midpoint between neighbours (ties), and the floats just around it.
  for (std::size_t c = 0; c + 1 < table.size(); ++c) {
    float const mid = static_cast<float>((table[c] + table[c + 1]) / 2);
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)})
      for (float s : {1.0f, -1.0f})
        xs.push_back(s * x);
  }
  Rng rng(77);
  for (int i = 0; i < 20000; ++i) {
    // Random sign and mantissa, exponent across the subnormal, normal and saturating range.
    auto const exp_field = static_cast<std::uint32_t>(127 - 16 + rng.below(30));
    std::uint32_t const bits =
        (static_cast<std::uint32_t>(rng.next()) & 0x807FFFFFu) | (exp_field << 23);
    float x;
    std::memcpy(&x, &bits, 4);
    xs.push_back(x);
  }
  std::size_t mismatches = 0;
  for (float x : xs)
    if (float_to_e4m3(x) != e4m3_by_search(x, table)) {
      if (++mismatches < 5)
        BOOST_TEST_MESSAGE("x = " << x << ": " << int(float_to_e4m3(x)) << " vs "
                                  << int(e4m3_by_search(x, table)));
    }
  BOOST_TEST(mismatches == 0u, "of " << xs.size());
  BOOST_TEST(float_to_e4m3(std::nanf("")) == 0x7F);
  BOOST_TEST(float_to_e4m3(-std::numeric_limits<float>::infinity()) == 0xFE);
  BOOST_TEST(float_to_e4m3(464.0f) == 0x7E); // the tie above 448 goes to 448 (even)
  BOOST_TEST(float_to_e4m3(-0x1p-10f) == 0x80);
}

BOOST_AUTO_TEST_CASE(deepseek_fp8_finalize_stays_within_e4m3_round_trip_bounds) {
  for (auto const& c : kCases) {
    Problem const p = problem(c.T, c.E, c.K, c.H, c.Hp, c.d, c.drop, 41, /*scales=*/true);
    auto const T = static_cast<std::size_t>(c.T), H = static_cast<std::size_t>(c.H);
    std::size_t const blocks = (H + 127) / 128;
    std::vector<fp8_bits> out(T * H, kFp8Poison);
    std::vector<float> scales(T * blocks, std::numeric_limits<float>::quiet_NaN());
    auto const params =
        finalize_params(p.routing, p.layout, p.inputs, c.wt, out.data(), scales.data());
    reference::finalize_deepseek_fp8(params);
    Exact const x = nested_loop(p, c.wt, true);
    std::size_t bad = 0, not_exact = 0, blocks_without_448 = 0;
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t b = 0; b < blocks; ++b) {
        // Bitwise: the documented fp32 order, amax / 448, then the (separately tested) encoder.
        std::size_t const h0 = b * 128, h1 = std::min(H, h0 + 128);
        std::vector<float> acc;
        float amax = 0;
        for (std::size_t h = h0; h < h1; ++h) {
          acc.push_back(fp32_order(p, c.wt, t, h, true));
          amax = std::max(amax, std::fabs(acc.back()));
        }
        float const scale = amax == 0 ? 1.0f : amax / 448.0f;
        not_exact += scales[t * blocks + b] != scale;
        bool has_448 = false;
        for (std::size_t h = h0; h < h1; ++h) {
          fp8_bits const q = out[t * H + h];
          not_exact += q != float_to_e4m3(acc[h - h0] / scale);
          has_448 = has_448 || (q & 0x7F) == 0x7E;
          // Round trip: E4M3 keeps 3 fraction bits (relative error 2^-4) down to 2^-6, then
          // absolute steps of 2^-9 (error 2^-10), both in units of the block scale; plus the
          // fp32 sum's error (3 roundings per term: scale, weight, add).
          double const acc_err = (3 * c.K + 1) * kFp32U * x.magnitude[t * H + h];
          double const tol = 0x1p-4 * (std::fabs(x.sum[t * H + h]) + acc_err) * (1 + 4 * kFp32U) +
                             0x1p-10 * scale + acc_err;
          double const decoded = static_cast<double>(e4m3_to_float(q)) * scale;
          bad += !(std::fabs(decoded - x.sum[t * H + h]) <= tol);
        }
        blocks_without_448 += amax != 0 && !has_448;
        if (amax == 0)
          BOOST_TEST(scale == 1.0f);
      }
    BOOST_TEST(bad == 0u, describe(c));
    BOOST_TEST(not_exact == 0u, describe(c));
    BOOST_TEST(blocks_without_448 == 0u, describe(c) << ": the block maximum maps to 448");
    std::vector<double> const oracle = reference::finalize_deepseek_fp8_exact(params);
    for (std::size_t i = 0; i < oracle.size(); ++i)
      BOOST_TEST(std::fabs(oracle[i] - x.sum[i]) <= 1e-12 * (1 + x.magnitude[i]));
  }
}

BOOST_AUTO_TEST_CASE(permute_gathers_token_rows_and_zeroes_padding) {
  Problem const p = problem(13, 16, 3, 8, 8, Distribution::kZipf, 0.25, 12);
  std::int64_t const H = 40;
  auto const hidden = random_bf16(13 * H, 99);
  std::int64_t const max_rows = p.layout.total_padded_rows + 5;
  std::vector<bf16_bits> permuted(static_cast<std::size_t>(max_rows * H), kBf16Poison);
  auto const total = static_cast<std::int32_t>(p.layout.total_padded_rows);
  permute::PermuteParams q;
  q.hidden_states = hidden.data();
  q.permuted_to_token = p.layout.permuted_to_token.data();
  q.total_padded_rows = &total;
  q.permuted = permuted.data();
  q.num_tokens = 13;
  q.hidden = H;
  q.max_rows = max_rows;
  reference::permute(q);
  for (std::int64_t r = 0; r < max_rows; ++r)
    for (std::int64_t h = 0; h < H; ++h) {
      auto const got = permuted[static_cast<std::size_t>(r * H + h)];
      if (r >= total) {
        BOOST_TEST(got == kBf16Poison, "row past the end " << r);
        continue;
      }
      std::int32_t const t = p.layout.permuted_to_token[static_cast<std::size_t>(r)];
      BOOST_TEST(got == (t < 0 ? 0 : hidden[static_cast<std::size_t>(t * H + h)]), "row " << r);
    }
}

BOOST_AUTO_TEST_CASE(grouped_gemm_matches_a_nested_loop_per_expert) {
  RoutingSpec s = routing_spec(20, 6, 2, Distribution::kUniform, 4);
  s.local_expert_begin = 1;
  s.num_local_experts = 4;
  Routing const r = generate_routing(s);
  std::int64_t const tile = 4, N = 24, Kd = 72, ldc = N + 3;
  RoutingLayout const L = build_layout(r, s, tile);
  std::int64_t const rows = L.total_padded_rows, max_rows = rows + tile;
  auto a = random_bf16(static_cast<std::size_t>(max_rows * Kd), 1);
  auto const b = random_bf16(static_cast<std::size_t>(4 * N * Kd), 2);
  std::vector<std::int32_t> cta(L.cta_to_expert);
  cta.push_back(-1);
  std::vector<bf16_bits> c(static_cast<std::size_t>(max_rows * ldc), kBf16Poison);
  auto const total = static_cast<std::int32_t>(rows);
  gemm::GroupedGemmParams g;
  g.a = a.data();
  g.b = b.data();
  g.c = c.data();
  g.cta_to_expert = cta.data();
  g.total_padded_rows = &total;
  g.max_rows = max_rows;
  g.n = N;
  g.k = Kd;
  g.ldc = ldc;
  g.tile_m = tile;
  g.num_local_experts = 4;
  reference::grouped_gemm(g);
  double seen = 0;
  for (std::int64_t row = 0; row < max_rows; ++row)
    for (std::int64_t j = 0; j < ldc; ++j) {
      auto const got = c[static_cast<std::size_t>(row * ldc + j)];
      if (row >= rows || j >= N) {
        BOOST_TEST(got == kBf16Poison, "untouched " << row << "," << j);
        continue;
      }
      auto const x =
          static_cast<std::int64_t>(L.cta_to_expert[static_cast<std::size_t>(row / tile)]);
      double exact = 0;
      for (std::int64_t i = 0; i < Kd; ++i)
        exact += static_cast<double>(bf16_to_float(a[static_cast<std::size_t>(row * Kd + i)])) *
                 bf16_to_float(b[static_cast<std::size_t>((x * N + j) * Kd + i)]);
      double const err = std::fabs(bf16_to_float(got) - exact);
      BOOST_TEST(err <= (kBf16U + 2 * kFp32U) * std::fabs(exact), row << "," << j);
      seen = std::max(seen, err / std::fabs(exact));
    }
  BOOST_TEST(seen > kBf16U / 4);
}

BOOST_AUTO_TEST_CASE(grouped_gemm_takes_padding_rows_as_zero_when_given_row_tokens) {
  RoutingSpec s = routing_spec(7, 8, 3, Distribution::kUniform, 5);
  Routing const r = generate_routing(s);
  std::int64_t const tile = 8, N = 16, Kd = 40;
  RoutingLayout const L = build_layout(r, s, tile);
  std::int64_t const rows = L.total_padded_rows;
  auto const a = random_bf16(static_cast<std::size_t>(rows * Kd), 6); // padding rows not zero
  auto const b = random_bf16(static_cast<std::size_t>(8 * N * Kd), 7);
  auto const total = static_cast<std::int32_t>(rows);
  std::vector<bf16_bits> all(static_cast<std::size_t>(rows * N), kBf16Poison), skip(all);
  gemm::GroupedGemmParams g;
  g.a = a.data();
  g.b = b.data();
  g.cta_to_expert = L.cta_to_expert.data();
  g.total_padded_rows = &total;
  g.max_rows = rows;
  g.n = N;
  g.k = Kd;
  g.ldc = N;
  g.tile_m = tile;
  g.num_local_experts = 8;
  g.c = all.data();
  reference::grouped_gemm(g);
  g.c = skip.data();
  g.row_token = L.permuted_to_token.data();
  reference::grouped_gemm(g);
  int padding = 0;
  for (std::int64_t row = 0; row < rows; ++row)
    for (std::int64_t j = 0; j < N; ++j) {
      auto const i = static_cast<std::size_t>(row * N + j);
      if (L.permuted_to_token[static_cast<std::size_t>(row)] < 0) {
        padding += 1;
        BOOST_TEST(skip[i] == 0, "padding " << row << "," << j);
        BOOST_TEST(all[i] != 0, "padding read " << row << "," << j);
      } else {
        BOOST_TEST(skip[i] == all[i], row << "," << j);
      }
    }
  BOOST_TEST(padding > 0);
}

BOOST_AUTO_TEST_CASE(activations_match_their_formulas) {
  std::int64_t const rows = 8, inter = 48;
  auto const in = random_bf16(static_cast<std::size_t>(rows * 2 * inter), 3, 0.01f, 6.0f);
  std::vector<bf16_bits> out(static_cast<std::size_t>((rows + 1) * inter), kBf16Poison);
  auto const total = static_cast<std::int32_t>(rows);
  activation::ActivationParams a;
  a.in = in.data();
  a.out = out.data();
  a.total_padded_rows = &total;
  a.max_rows = rows + 1;
  a.inter = inter;
  a.type = activation::Type::kSwiGlu;
  reference::activation(a);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < inter; ++j) {
      double const g = bf16_to_float(in[static_cast<std::size_t>(r * 2 * inter + j)]);
      double const u = bf16_to_float(in[static_cast<std::size_t>(r * 2 * inter + inter + j)]);
      double const want = g * 0.5 * (1 + std::tanh(g / 2)) * u; // silu via tanh
      double const got = bf16_to_float(out[static_cast<std::size_t>(r * inter + j)]);
      BOOST_TEST(std::fabs(got - want) <= (kBf16U + 1e-12) * std::fabs(want), r << "," << j);
    }
  for (std::int64_t j = 0; j < inter; ++j)
    BOOST_TEST(out[static_cast<std::size_t>(rows * inter + j)] == kBf16Poison);

  a.type = activation::Type::kRelu2;
  reference::activation(a);
  std::size_t negative = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < inter; ++j) {
      float const x = bf16_to_float(in[static_cast<std::size_t>(r * inter + j)]);
      negative += x < 0;
      BOOST_TEST(out[static_cast<std::size_t>(r * inter + j)] ==
                 (x > 0 ? float_to_bf16(x * x) : bf16_bits{0}));
    }
  BOOST_TEST(negative > 0u);
}
