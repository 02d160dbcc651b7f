#define BOOST_TEST_MODULE routing
#include <boost/test/unit_test.hpp>

#include "core/bf16.hpp"
#include "core/ops/errors.hpp"
#include "core/routing.hpp"
#include "kokkos_fixture.hpp"
#include "kernels/routing/sort_network.hpp"
#include "reference/routing.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

using namespace moefin;

namespace {

RoutingSpec spec(std::int64_t T, std::int64_t E, std::int64_t K, Distribution d,
                 std::uint64_t seed = 7) {
  return routing_spec(T, E, K, d, seed);
}

std::vector<std::int64_t> counts(Routing const& r) {
  std::vector<std::int64_t> c(static_cast<std::size_t>(r.num_experts), 0);
  for (auto id : r.expert_ids)
    ++c[static_cast<std::size_t>(id)];
  return c;
}

bool distinct_per_token(Routing const& r) {
  for (std::int64_t t = 0; t < r.num_tokens; ++t)
    for (std::int64_t a = 0; a < r.top_k; ++a)
      for (std::int64_t b = 0; b < a; ++b)
        if (r.expert_ids[static_cast<std::size_t>(t * r.top_k + a)] ==
            r.expert_ids[static_cast<std::size_t>(t * r.top_k + b)])
          return false;
  return true;
}

/// Asserts that `fn` throws an InputError whose message contains every one of `parts`.
template <class Fn> void expect_input_error(Fn fn, std::vector<std::string> const& parts) {
  try {
    fn();
    BOOST_ERROR("no InputError; expected one mentioning " << parts.front());
  } catch (InputError const& e) {
    for (auto const& p : parts)
      BOOST_TEST(std::string(e.what()).find(p) != std::string::npos,
                 "'" << e.what() << "' mentions '" << p << "'");
  }
}

Distribution const kAll[] = {Distribution::kUniform, Distribution::kZipf, Distribution::kHot,
                             Distribution::kRoundRobin, Distribution::kScores};

} // namespace

BOOST_AUTO_TEST_CASE(a_seed_names_one_routing_and_another_seed_another) {
  for (auto d : kAll) {
    Routing const a = generate_routing(spec(50, 32, 4, d, 123));
    Routing const b = generate_routing(spec(50, 32, 4, d, 123));
    Routing const c = generate_routing(spec(50, 32, 4, d, 124));
    BOOST_TEST(a.expert_ids == b.expert_ids, distribution_name(d));
    BOOST_TEST(a.weights == b.weights, distribution_name(d));
    BOOST_TEST(a.weights_bf16 == b.weights_bf16, distribution_name(d));
    BOOST_TEST(a.weights != c.weights, distribution_name(d));
    if (d != Distribution::kRoundRobin)
      BOOST_TEST(a.expert_ids != c.expert_ids, distribution_name(d));
  }
}

BOOST_AUTO_TEST_CASE(uniform_choices_are_distinct_and_spread_evenly) {
  Routing const r = generate_routing(spec(4096, 16, 4, Distribution::kUniform));
  BOOST_TEST(distinct_per_token(r));
  // Each expert expects T*K/E = 1024 choices, standard deviation ~sqrt(1024 * 15/16) = 31.
  for (auto c : counts(r))
    BOOST_TEST(std::abs(c - 1024) < 160, "count " << c);
}

BOOST_AUTO_TEST_CASE(zipf_first_choices_follow_the_power_law) {
  RoutingSpec s = spec(20000, 32, 3, Distribution::kZipf);
  s.zipf_s = 1.2;
  Routing const r = generate_routing(s);
  BOOST_TEST(distinct_per_token(r));
  double norm = 0;
  for (int e = 0; e < 32; ++e)
    norm += std::pow(e + 1.0, -1.2);
  std::vector<double> first(32, 0);
  for (std::int64_t t = 0; t < s.num_tokens; ++t)
    ++first[static_cast<std::size_t>(r.expert_ids[static_cast<std::size_t>(t * 3)])];
  // The first choice is a plain draw from P(e) ~ 1/(e+1)^s; 5 sigma bounds.
  for (int e : {0, 1, 2, 5, 15, 31}) {
    double const p = std::pow(e + 1.0, -1.2) / norm;
    double const sigma = std::sqrt(s.num_tokens * p * (1 - p));
    BOOST_TEST(std::abs(first[static_cast<std::size_t>(e)] - s.num_tokens * p) < 5 * sigma,
               "expert " << e << ": " << first[static_cast<std::size_t>(e)] << " vs "
                         << s.num_tokens * p);
  }
  auto const c = counts(r);
  BOOST_TEST(c[0] > c[1]);
  BOOST_TEST(c[1] > c[3]);
  BOOST_TEST(c[3] > c[15]);
}

BOOST_AUTO_TEST_CASE(zipf_takes_every_expert_when_k_equals_e_even_when_steep) {
  RoutingSpec s = spec(200, 16, 16, Distribution::kZipf);
  s.zipf_s = 8; // the last experts carry ~2^-32 of the mass: rejection alone would stall
  Routing const r = generate_routing(s);
  BOOST_TEST(distinct_per_token(r));
  for (auto c : counts(r))
    BOOST_TEST(c == 200);
  // Steep: the first choice is almost always expert 0.
  std::int64_t first_zero = 0;
  for (std::int64_t t = 0; t < 200; ++t)
    first_zero += r.expert_ids[static_cast<std::size_t>(t * 16)] == 0;
  BOOST_TEST(first_zero > 190);
}

BOOST_AUTO_TEST_CASE(hot_expert_gets_every_token) {
  RoutingSpec s = spec(500, 24, 5, Distribution::kHot);
  s.hot_expert = 17;
  Routing const r = generate_routing(s);
  BOOST_TEST(distinct_per_token(r));
  auto const c = counts(r);
  BOOST_TEST(c[17] == 500);
  for (std::size_t e = 0; e < c.size(); ++e)
    if (e != 17)
      BOOST_TEST(c[e] < 250, "expert " << e);
  // The hot expert is not always in the same slot.
  std::vector<int> slot(5, 0);
  for (std::int64_t t = 0; t < 500; ++t)
    for (int k = 0; k < 5; ++k)
      slot[static_cast<std::size_t>(k)] += r.expert_ids[static_cast<std::size_t>(t * 5 + k)] == 17;
  for (int k = 0; k < 5; ++k)
    BOOST_TEST(slot[static_cast<std::size_t>(k)] > 50);
}

BOOST_AUTO_TEST_CASE(round_robin_is_balanced) {
  Routing const r = generate_routing(spec(48, 12, 4, Distribution::kRoundRobin));
  BOOST_TEST(distinct_per_token(r));
  for (auto c : counts(r))
    BOOST_TEST(c == 16);
  BOOST_TEST(r.expert_ids[4 * 5 + 2] == (5 * 4 + 2) % 12);
  Routing const odd = generate_routing(spec(7, 5, 3, Distribution::kRoundRobin));
  auto const c = counts(odd);
  BOOST_TEST(*std::max_element(c.begin(), c.end()) - *std::min_element(c.begin(), c.end()) <= 1);
}

BOOST_AUTO_TEST_CASE(weights_sum_to_one_unless_raw_and_bf16_is_their_rounding) {
  for (auto d : kAll)
    for (bool renormalize : {true, false}) {
      RoutingSpec s = spec(64, 32, 6, d);
      s.renormalize = renormalize;
      Routing const r = generate_routing(s);
      for (std::int64_t t = 0; t < 64; ++t) {
        double sum = 0;
        for (std::int64_t k = 0; k < 6; ++k) {
          auto const e = static_cast<std::size_t>(t * 6 + k);
          BOOST_TEST(r.weights[e] > 0.0f);
          BOOST_TEST(r.weights_bf16[e] == float_to_bf16(r.weights[e]));
          sum += r.weights[e];
        }
        if (renormalize)
          BOOST_TEST(std::abs(sum - 1.0) < 1e-6, distribution_name(d) << " token " << t);
        else if (d == Distribution::kScores)
          BOOST_TEST(sum < 1.0 - 1e-3, "raw softmax probabilities of 6 of 32 experts");
        else
          BOOST_TEST(std::abs(sum - 1.0) > 1e-6, "raw draws do not sum to 1");
      }
    }
}

BOOST_AUTO_TEST_CASE(score_routing_takes_the_largest_scores_ties_to_the_lower_id) {
  std::vector<float> const scores{1.0f, 3.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  std::int32_t ids[4];
  float w[4];
  route_token(scores.data(), 6, 3, routing::Method::kSoftmaxTopK, true, ids, w);
  BOOST_TEST((std::vector<std::int32_t>(ids, ids + 3) == std::vector<std::int32_t>{1, 2, 4}));
  for (int k = 0; k < 3; ++k)
    BOOST_TEST(w[k] == static_cast<float>(1.0 / 3.0));
  route_token(scores.data(), 6, 4, routing::Method::kSoftmaxTopK, false, ids, w);
  BOOST_TEST((std::vector<std::int32_t>(ids, ids + 4) == std::vector<std::int32_t>{1, 2, 4, 3}));
  double all = 0;
  for (float s : scores)
    all += std::exp(s - 3.0);
  BOOST_TEST(w[0] == static_cast<float>(1.0 / all));
  BOOST_TEST(w[3] == static_cast<float>(std::exp(-1.0) / all));
  route_token(scores.data(), 6, 4, routing::Method::kTopKSoftmax, false, ids, w);
  double const sel = 3 + std::exp(-1.0);
  BOOST_TEST(w[0] == static_cast<float>(1.0 / sel));
  BOOST_TEST(w[3] == static_cast<float>(std::exp(-1.0) / sel));
}

BOOST_AUTO_TEST_CASE(score_distribution_is_the_routing_reference_on_the_same_scores) {
  struct Case {
    routing::Method method;
    bool renormalize;
    finalize::WeightType weights;
    std::int64_t begin, count, tile;
  };
  for (Case c :
       {Case{routing::Method::kSoftmaxTopK, true, finalize::WeightType::kBf16, 0, 64, 128},
        Case{routing::Method::kSoftmaxTopK, false, finalize::WeightType::kFp32, 8, 24, 4},
        Case{routing::Method::kTopKSoftmax, true, finalize::WeightType::kFp32, 0, 0, 16},
        Case{routing::Method::kTopKSoftmax, false, finalize::WeightType::kNone, 40, 24, 1}}) {
    RoutingSpec s = spec(33, 64, 8, Distribution::kScores, 99);
    s.score_method = c.method;
    s.renormalize = c.renormalize;
    s.local_expert_begin = c.begin;
    s.num_local_experts = c.count;
    Routing const r = generate_routing(s);
    RoutingLayout const L = build_layout(r, s, c.tile);

    std::vector<float> const scores = router_scores(33, 64, 99);
    std::int64_t const cap = max_padded_rows(33, 8, c.count, c.tile);
    std::size_t const n = 33 * 8;
    std::vector<std::int32_t> ids(n, -7), e2p(n, -7), p2t(static_cast<std::size_t>(cap), -7),
        p2e(static_cast<std::size_t>(cap), -7), cnt(static_cast<std::size_t>(c.count), -7),
        off(static_cast<std::size_t>(c.count) + 1, -7),
        cta(static_cast<std::size_t>(cap / c.tile), -7);
    std::vector<float> w32(n, -7.0f);
    std::vector<bf16_bits> w16(n, kBf16Poison);
    std::int32_t total = -7;
    routing::RoutingParams p;
    p.scores = scores.data();
    p.expert_ids = ids.data();
    p.expert_weights = c.weights == finalize::WeightType::kFp32 ? static_cast<void*>(w32.data())
                                                                : static_cast<void*>(w16.data());
    p.expanded_to_permuted = e2p.data();
    p.permuted_to_token = p2t.data();
    p.permuted_to_expanded = p2e.data();
    p.expert_counts = cnt.data();
    p.expert_offsets = off.data();
    p.cta_to_expert = cta.data();
    p.total_padded_rows = &total;
    p.num_tokens = 33;
    p.num_experts = 64;
    p.top_k = 8;
    p.local_expert_begin = c.begin;
    p.num_local_experts = c.count;
    p.tile = c.tile;
    p.max_padded_rows = cap;
    p.method = c.method;
    p.renormalize = c.renormalize;
    p.weight_type = c.weights;
    reference::routing(p);

    BOOST_TEST(ids == r.expert_ids);
    if (c.weights == finalize::WeightType::kFp32)
      BOOST_TEST(w32 == r.weights);
    else if (c.weights == finalize::WeightType::kBf16)
      BOOST_TEST(w16 == r.weights_bf16);
    else
      BOOST_TEST((w16 == std::vector<bf16_bits>(n, kBf16Poison)), "no weights written for none");
    BOOST_TEST(e2p == L.expanded_to_permuted);
    BOOST_TEST(cnt == L.expert_counts);
    BOOST_TEST(off == L.expert_offsets);
    BOOST_TEST(total == L.total_padded_rows);
    auto const rows = static_cast<std::size_t>(total);
    BOOST_TEST(std::vector<std::int32_t>(p2t.begin(), p2t.begin() + rows) == L.permuted_to_token);
    BOOST_TEST(std::vector<std::int32_t>(p2e.begin(), p2e.begin() + rows) ==
               L.permuted_to_expanded);
    for (std::size_t i = rows; i < p2t.size(); ++i)
      BOOST_TEST((p2t[i] == -1 && p2e[i] == -1), "row past the end " << i);
    std::size_t const tiles = rows / static_cast<std::size_t>(c.tile);
    BOOST_TEST(std::vector<std::int32_t>(cta.begin(), cta.begin() + tiles) == L.cta_to_expert);
    for (std::size_t i = tiles; i < cta.size(); ++i)
      BOOST_TEST(cta[i] == -1, "tile past the end " << i);
  }
}

BOOST_AUTO_TEST_CASE(routing_reference_rejects_bad_params) {
  std::vector<float> scores(8, 0.5f);
  scores[3] = std::nanf("");
  std::int32_t ids[8], e2p[8], p2t[8], p2e[8], cnt[8], off[8], cta[8];
  std::int32_t total = 0;
  float w[8];
  routing::RoutingParams p;
  p.scores = scores.data();
  p.expert_ids = ids;
  p.expanded_to_permuted = e2p;
  p.permuted_to_token = p2t;
  p.permuted_to_expanded = p2e;
  p.expert_counts = cnt;
  p.expert_offsets = off;
  p.cta_to_expert = cta;
  p.expert_weights = w;
  p.total_padded_rows = &total;
  p.num_tokens = 2;
  p.num_experts = 4;
  p.top_k = 2;
  p.num_local_experts = 4;
  p.tile = 1;
  p.max_padded_rows = 4;
  p.weight_type = finalize::WeightType::kFp32;
  expect_input_error([&] { reference::routing(p); }, {"scores[0, 3]", "not finite"});
  scores[3] = 0.25f;
  p.top_k = 5;
  expect_input_error([&] { reference::routing(p); }, {"top_k 5"});
  p.top_k = 2;
  p.max_padded_rows = 2; // the layout needs 4 rows
  expect_input_error([&] { reference::routing(p); }, {"needs 4 rows", "max_padded_rows is 2"});
}

BOOST_AUTO_TEST_CASE(invalid_requests_name_the_flag_and_the_range) {
  expect_input_error([] { generate_routing(spec(4, 8, 9, Distribution::kUniform)); },
                     {"--top-k", "value 9", "[1, 8]"});
  expect_input_error([] { generate_routing(spec(4, 128, 65, Distribution::kUniform)); },
                     {"--top-k", "value 65", "[1, 64]"});
  expect_input_error([] { generate_routing(spec(0, 8, 2, Distribution::kUniform)); },
                     {"--tokens", "value 0", "[1, 1048576]"});
  expect_input_error([] { generate_routing(spec(4, 0, 1, Distribution::kUniform)); },
                     {"--experts", "value 0", "[1, 65536]"});
  for (double f : {-0.1, 1.5, std::nan("")}) {
    RoutingSpec s = spec(4, 8, 2, Distribution::kUniform);
    s.drop_fraction = f;
    expect_input_error([&] { generate_routing(s); }, {"--drop-fraction", "[0, 1]"});
  }
  RoutingSpec z = spec(4, 8, 2, Distribution::kZipf);
  z.zipf_s = -1;
  expect_input_error([&] { generate_routing(z); }, {"--zipf-s", "[0, 16]"});
  RoutingSpec h = spec(4, 8, 2, Distribution::kHot);
  h.hot_expert = 8;
  expect_input_error([&] { generate_routing(h); }, {"--hot-expert", "value 8", "[0, 7]"});
  RoutingSpec l = spec(4, 8, 2, Distribution::kUniform);
  l.local_expert_begin = 6;
  l.num_local_experts = 4;
  expect_input_error([&] { local_range(l); }, {"--local-experts", "6:4"});
  l.local_expert_begin = 0;
  l.drop_fraction = 0.5;
  expect_input_error([&] { local_range(l); }, {"--drop-fraction", "--local-experts"});
}

BOOST_AUTO_TEST_CASE(drop_fraction_drops_the_highest_experts) {
  RoutingSpec s = spec(200, 64, 4, Distribution::kUniform);
  s.drop_fraction = 0.25;
  LocalRange const l = local_range(s);
  BOOST_TEST(l.begin == 0);
  BOOST_TEST(l.count == 48);
  Routing const r = generate_routing(s);
  RoutingLayout const L = build_layout(r, s, 16);
  std::int64_t dropped = 0;
  for (std::size_t e = 0; e < r.expert_ids.size(); ++e) {
    BOOST_TEST((L.expanded_to_permuted[e] == -1) == (r.expert_ids[e] >= 48));
    dropped += r.expert_ids[e] >= 48;
  }
  // Uniform choices: a quarter of the 800 entries expected, sd ~12.
  BOOST_TEST(std::abs(dropped - 200) < 60, dropped);
}

BOOST_AUTO_TEST_CASE(router_scores_are_seeded_and_roughly_standard_normal) {
  auto const a = router_scores(100, 50, 5);
  BOOST_TEST(a == router_scores(100, 50, 5));
  BOOST_TEST(a != router_scores(100, 50, 6));
  double mean = 0, sq = 0;
  for (float v : a) {
    mean += v;
    sq += static_cast<double>(v) * v;
  }
  mean /= static_cast<double>(a.size());
  double const var = sq / static_cast<double>(a.size()) - mean * mean;
  BOOST_TEST(std::abs(mean) < 0.05);
  BOOST_TEST(std::abs(var - 1.0) < 0.05);
}

// The decode routing's per-lane sorting network (kernels/routing/sort_network.hpp): by the 0-1
// principle a network sorts every input when it sorts every 0/1 input, checked exhaustively up to
// 16 elements; at 32, random inputs with repeated values and against std::sort.
template <int kN>
void check_network_01() {
  for (std::uint32_t bits = 0; bits < (1u << kN); ++bits) {
    std::uint32_t x[kN];
    for (int i = 0; i < kN; ++i)
      x[i] = (bits >> i) & 1u;
    routing::net::sort_desc<kN>(x);
    for (int i = 0; i + 1 < kN; ++i)
      BOOST_REQUIRE_MESSAGE(x[i] >= x[i + 1], "n = " << kN << " input " << bits);
  }
}

BOOST_AUTO_TEST_CASE(sort_network_sorts) {
  check_network_01<2>();
  check_network_01<4>();
  check_network_01<8>();
  check_network_01<16>();
  static_assert(routing::net::exchanges<8>() == 19);
  static_assert(routing::net::exchanges<16>() == 63);
  static_assert(routing::net::exchanges<32>() == 191);
  std::uint64_t s = 12345;
  for (int trial = 0; trial < 2000; ++trial) {
    std::uint32_t x[32];
    std::vector<std::uint32_t> want(32);
    for (int i = 0; i < 32; ++i) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      x[i] = static_cast<std::uint32_t>(s >> 33) % (trial % 2 ? 7u : 0xffffffffu);
      want[static_cast<std::size_t>(i)] = x[i];
    }
    routing::net::sort_desc<32>(x);
    std::sort(want.begin(), want.end(), std::greater<>());
    for (int i = 0; i < 32; ++i)
      BOOST_REQUIRE_EQUAL(x[i], want[static_cast<std::size_t>(i)]);
  }
}
