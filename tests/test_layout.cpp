#define BOOST_TEST_MODULE layout
#include <boost/test/unit_test.hpp>

#include "core/layout.hpp"
#include "core/ops/errors.hpp"
#include "core/routing.hpp"

#include <string>
#include <vector>

using namespace moefin;

namespace {

/// Every invariant of docs/design/computation.md, checked from the definitions (not from the
/// builder's algorithm). Returns the first violation, or "" when the layout is right.
std::string violation(Routing const& r, RoutingLayout const& L) {
  auto const n = static_cast<std::size_t>(r.num_tokens * r.top_k);
  auto const n_local = static_cast<std::size_t>(L.num_local_experts);
  auto const rows = static_cast<std::size_t>(L.total_padded_rows);
  if (L.expanded_to_permuted.size() != n || L.expert_counts.size() != n_local ||
      L.expert_offsets.size() != n_local + 1 || L.permuted_to_token.size() != rows ||
      L.permuted_to_expanded.size() != rows || L.cta_to_expert.size() * L.tile != rows)
    return "array sizes";
  if (L.expert_offsets[0] != 0 || L.expert_offsets[n_local] != L.total_padded_rows)
    return "offsets do not start at 0 and end at the total";
  for (std::size_t x = 0; x < n_local; ++x) {
    std::int64_t want = 0;
    for (std::size_t e = 0; e < n; ++e)
      want += r.expert_ids[e] == L.local_expert_begin + static_cast<std::int64_t>(x);
    if (L.expert_counts[x] != want)
      return "count of local expert " + std::to_string(x);
    std::int64_t const size = L.expert_offsets[x + 1] - L.expert_offsets[x];
    if (size % L.tile != 0 || size < want || size >= want + L.tile)
      return "group of local expert " + std::to_string(x) + " is not its count padded to the tile";
    std::int32_t prev_token = -1;
    for (std::int64_t row = L.expert_offsets[x]; row < L.expert_offsets[x + 1]; ++row) {
      auto const i = static_cast<std::size_t>(row);
      if (row % L.tile == 0 &&
          L.cta_to_expert[i / static_cast<std::size_t>(L.tile)] != static_cast<std::int32_t>(x))
        return "cta_to_expert of row " + std::to_string(row);
      if (row >= L.expert_offsets[x] + want) {
        if (L.permuted_to_token[i] != -1 || L.permuted_to_expanded[i] != -1)
          return "padding row " + std::to_string(row) + " is not -1";
        continue;
      }
      std::int32_t const e = L.permuted_to_expanded[i];
      if (e < 0 || static_cast<std::size_t>(e) >= n)
        return "row " + std::to_string(row) + " has no expanded index";
      if (r.expert_ids[static_cast<std::size_t>(e)] !=
          L.local_expert_begin + static_cast<std::int64_t>(x))
        return "row " + std::to_string(row) + " sits in the group of another expert";
      if (L.permuted_to_token[i] != e / r.top_k)
        return "permuted_to_token of row " + std::to_string(row);
      if (L.expanded_to_permuted[static_cast<std::size_t>(e)] != row)
        return "expanded_to_permuted is not the inverse at row " + std::to_string(row);
      if (L.permuted_to_token[i] <= prev_token)
        return "tokens not ascending inside the group of expert " + std::to_string(x);
      prev_token = L.permuted_to_token[i];
    }
  }
  for (std::size_t e = 0; e < n; ++e) {
    std::int64_t const x = r.expert_ids[e] - L.local_expert_begin;
    bool const local = x >= 0 && x < L.num_local_experts;
    std::int32_t const row = L.expanded_to_permuted[e];
    if (!local && row != -1)
      return "non-local expanded index " + std::to_string(e) + " has a row";
    if (local &&
        (row < 0 || row >= L.total_padded_rows ||
         L.permuted_to_expanded[static_cast<std::size_t>(row)] != static_cast<std::int32_t>(e)))
      return "local expanded index " + std::to_string(e) + " lacks its row";
  }
  if (L.total_padded_rows > max_padded_rows(r.num_tokens, r.top_k, L.num_local_experts, L.tile))
    return "more rows than max_padded_rows";
  return "";
}

Routing make(std::int64_t T, std::int64_t E, std::int64_t K, Distribution d, std::uint64_t seed) {
  return generate_routing(routing_spec(T, E, K, d, seed));
}

Routing by_hand(std::int64_t E, std::int64_t K, std::vector<std::int32_t> ids) {
  Routing r;
  r.num_experts = E;
  r.top_k = K;
  r.num_tokens = static_cast<std::int64_t>(ids.size()) / K;
  r.weights.assign(ids.size(), 0.5f);
  r.weights_bf16.assign(ids.size(), 0x3f00);
  r.expert_ids = std::move(ids);
  return r;
}

using V = std::vector<std::int32_t>;

} // namespace

BOOST_AUTO_TEST_CASE(hand_worked_example_gives_the_exact_arrays) {
  // Tokens: 0 -> {2, 0}, 1 -> {0, 3}, 2 -> {2, 1}; tile 2.
  Routing const r = by_hand(4, 2, {2, 0, 0, 3, 2, 1});
  RoutingLayout const L = build_layout(r, 2);
  BOOST_TEST(L.expert_counts == (V{2, 1, 2, 1}), boost::test_tools::per_element());
  BOOST_TEST(L.expert_offsets == (V{0, 2, 4, 6, 8}), boost::test_tools::per_element());
  BOOST_TEST(L.expanded_to_permuted == (V{4, 0, 1, 6, 5, 2}), boost::test_tools::per_element());
  BOOST_TEST(L.permuted_to_token == (V{0, 1, 2, -1, 0, 2, 1, -1}),
             boost::test_tools::per_element());
  BOOST_TEST(L.permuted_to_expanded == (V{1, 2, 5, -1, 0, 4, 3, -1}),
             boost::test_tools::per_element());
  BOOST_TEST(L.cta_to_expert == (V{0, 1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(L.total_padded_rows == 8);

  // Experts 1 and 2 local: choices of experts 0 and 3 are dropped.
  RoutingLayout const P = build_layout(r, 2, 1, 2);
  BOOST_TEST(P.expert_counts == (V{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(P.expert_offsets == (V{0, 2, 4}), boost::test_tools::per_element());
  BOOST_TEST(P.expanded_to_permuted == (V{2, -1, -1, -1, 3, 0}), boost::test_tools::per_element());
  BOOST_TEST(P.permuted_to_token == (V{2, -1, 0, 2}), boost::test_tools::per_element());
  BOOST_TEST(P.cta_to_expert == (V{0, 1}), boost::test_tools::per_element());
  BOOST_TEST(dropped_entries(P) == 3);
  BOOST_TEST(violation(r, L) == "");
  BOOST_TEST(violation(r, P) == "");
}

BOOST_AUTO_TEST_CASE(invariants_hold_for_every_distribution_tile_and_local_range) {
  struct LocalCase {
    std::int64_t begin, count;
  };
  for (auto d : {Distribution::kUniform, Distribution::kZipf, Distribution::kHot,
                 Distribution::kRoundRobin, Distribution::kScores})
    for (std::int64_t tile : {1, 3, 8, 128})
      for (LocalCase l : {LocalCase{0, -1}, LocalCase{0, 16}, LocalCase{16, 20}, LocalCase{63, 1},
                          LocalCase{10, 0}}) {
        Routing const r = make(37, 64, 6, d, 11 + static_cast<std::uint64_t>(tile));
        RoutingLayout const L = build_layout(r, tile, l.begin, l.count);
        BOOST_TEST(violation(r, L) == "", distribution_name(d) << " tile " << tile << " local "
                                                               << l.begin << ":" << l.count);
      }
}

BOOST_AUTO_TEST_CASE(edge_shapes_keep_the_invariants) {
  // T = 1, K = 1, K = 64 (= E and < E), every token on one expert, H-independent.
  std::vector<Routing> const cases{
      make(1, 8, 1, Distribution::kUniform, 1),   make(1, 64, 64, Distribution::kUniform, 2),
      make(300, 256, 64, Distribution::kZipf, 3), make(50, 64, 1, Distribution::kUniform, 4),
      make(50, 1, 1, Distribution::kUniform, 5),  make(40, 64, 64, Distribution::kRoundRobin, 6),
      make(1, 1, 1, Distribution::kHot, 7),       make(1000, 16, 1, Distribution::kHot, 8)};
  for (std::size_t i = 0; i < cases.size(); ++i)
    for (std::int64_t tile : {1, 5, 128}) {
      RoutingLayout const L = build_layout(cases[i], tile);
      BOOST_TEST(violation(cases[i], L) == "", "case " << i << " tile " << tile);
      BOOST_TEST(dropped_entries(L) == 0);
    }
  // All tokens on one expert: one group, T rows padded to the tile.
  RoutingLayout const one = build_layout(cases[4], 16);
  BOOST_TEST(one.expert_counts == (V{50}), boost::test_tools::per_element());
  BOOST_TEST(one.total_padded_rows == 64);
  BOOST_TEST(one.cta_to_expert == (V{0, 0, 0, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(all_experts_dropped_gives_an_empty_layout) {
  Routing const r = make(20, 32, 4, Distribution::kUniform, 9);
  for (auto range : {std::pair<std::int64_t, std::int64_t>{0, 0}, {32, 0}, {5, 0}}) {
    RoutingLayout const L = build_layout(r, 128, range.first, range.second);
    BOOST_TEST(L.total_padded_rows == 0);
    BOOST_TEST(dropped_entries(L) == 80);
    BOOST_TEST(L.permuted_to_token.empty());
    BOOST_TEST(L.cta_to_expert.empty());
    BOOST_TEST(L.expert_offsets == (V{0}), boost::test_tools::per_element());
    BOOST_TEST(violation(r, L) == "");
  }
  RoutingSpec s = routing_spec(20, 32, 4, Distribution::kUniform, 9);
  s.drop_fraction = 1.0;
  RoutingLayout const L = build_layout(generate_routing(s), s, 128);
  BOOST_TEST(L.num_local_experts == 0);
  BOOST_TEST(dropped_entries(L) == 80);
}

BOOST_AUTO_TEST_CASE(dropped_experts_map_to_minus_one_and_take_no_rows) {
  Routing const r = make(64, 16, 4, Distribution::kUniform, 21);
  RoutingLayout const L = build_layout(r, 4, 4, 8); // experts 4..11 local
  std::int64_t dropped = 0;
  for (std::size_t e = 0; e < r.expert_ids.size(); ++e) {
    bool const local = r.expert_ids[e] >= 4 && r.expert_ids[e] < 12;
    BOOST_TEST((L.expanded_to_permuted[e] == -1) == !local, "expanded index " << e);
    dropped += !local;
  }
  BOOST_TEST(dropped > 0);
  BOOST_TEST(dropped_entries(L) == dropped);
  std::int64_t used_rows = 0;
  for (auto t : L.permuted_to_token)
    used_rows += t >= 0;
  BOOST_TEST(used_rows == 64 * 4 - dropped);
}

BOOST_AUTO_TEST_CASE(max_padded_rows_bounds_every_layout_and_is_reached) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed)
    for (std::int64_t tile : {1, 7, 64}) {
      Routing const r = make(1 + static_cast<std::int64_t>(seed) * 3, 40, 5,
                             seed % 2 ? Distribution::kZipf : Distribution::kUniform, seed);
      RoutingLayout const L = build_layout(r, tile);
      BOOST_TEST(L.total_padded_rows <= max_padded_rows(r.num_tokens, 5, 40, tile));
    }
  // One token per expert: every group is 1 row padded to the tile, the bound is tight.
  Routing const r = by_hand(4, 4, {0, 1, 2, 3});
  BOOST_TEST(build_layout(r, 8).total_padded_rows == max_padded_rows(1, 4, 4, 8));
}

BOOST_AUTO_TEST_CASE(malformed_routings_and_ranges_are_rejected) {
  BOOST_CHECK_THROW(build_layout(by_hand(4, 2, {1, 1, 0, 2}), 4), InputError); // duplicate
  BOOST_CHECK_THROW(build_layout(by_hand(4, 2, {1, 4, 0, 2}), 4), InputError); // id >= E
  BOOST_CHECK_THROW(build_layout(by_hand(4, 2, {1, -1, 0, 2}), 4), InputError);
  Routing short_weights = by_hand(4, 2, {1, 2, 0, 3});
  short_weights.weights.pop_back();
  BOOST_CHECK_THROW(build_layout(short_weights, 4), InputError);
  Routing const ok = by_hand(4, 2, {1, 2, 0, 3});
  BOOST_CHECK_THROW(build_layout(ok, 0), InputError);
  BOOST_CHECK_THROW(build_layout(ok, 4, 3, 2), InputError);
  BOOST_CHECK_THROW(build_layout(ok, 4, 5, 0), InputError);
  try {
    build_layout(ok, 4, 3, 2);
  } catch (InputError const& e) {
    BOOST_TEST(std::string(e.what()).find("--local-experts: value 3:2") != std::string::npos,
               e.what());
  }
}
