// The routing implementations of `moefin sweep routing` (experiments/routing/impls.cpp): the
// released routing block kernel is an entry exactly when the build has the released kernels,
// and its absence is a one-line note and a one-line error, never a silent empty row (unit).
#define BOOST_TEST_MODULE routing_impls
#include <boost/test/unit_test.hpp>

#include "core/chain/released_kernels.hpp"
#include "core/ops/errors.hpp"
#include "experiments/routing/arrays.hpp"
#include "experiments/routing/impls.hpp"
#include "kernels/routing/fast_routing.hpp"

#include <algorithm>
#include <string>
#include <vector>

using namespace moefin;

namespace {

bool listed(std::vector<routing_bench::RoutingImpl> const& l, std::string const& name) {
  return std::any_of(l.begin(), l.end(), [&](auto const& r) { return r.name == name; });
}

} // namespace

BOOST_AUTO_TEST_CASE(the_released_entry_follows_the_build) {
  bool const built = chain::released_kernels() != nullptr;
  BOOST_TEST_MESSAGE("released kernels in this build: " << (built ? "yes" : "no"));
  auto const& all = routing_bench::routing_impls();
  BOOST_REQUIRE(all.size() >= 2u);
  BOOST_TEST(all[0].name == "block"); // ratio_vs_block needs it first
  BOOST_TEST(listed(all, routing_bench::kReleasedRouting) == built);
  BOOST_TEST(listed(routing_bench::select_routing_impls("all", "--impls"),
                    routing_bench::kReleasedRouting) == built);
  BOOST_TEST(routing_bench::released_routing_note().empty() == built);
  if (built) {
    auto const one = routing_bench::select_routing_impls("released", "--impls");
    BOOST_REQUIRE(one.size() == 1u);
    BOOST_TEST(!one[0].moefin_layout); // its own layout: no check row against the reference
  } else {
    BOOST_TEST(routing_bench::released_routing_note().find("no 'released' rows") !=
               std::string::npos);
    try {
      routing_bench::select_routing_impls("block,released", "--impls");
      BOOST_FAIL("--impls released accepted without the released kernels");
    } catch (InputError const& e) {
      BOOST_TEST(std::string(e.what()).find("--impls released") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_released_entry_takes_the_shapes_its_kernels_serve) {
  routing_bench::RoutingImpl const r = routing_bench::released_routing_impl();
  bool const built = chain::released_kernels() != nullptr;
  // The sweep asks with a shape whose arrays are not allocated yet.
  auto const t1 = routing_arrays::shape(1, 256, 8, 16, 0, 256);
  auto const t16 = routing_arrays::shape(16, 512, 22, 16, 0, 512);
  auto const t64 = routing_arrays::shape(64, 256, 8, 16, 0, 256);
  BOOST_TEST(r.supports(t1) == built);  // the block kernel
  BOOST_TEST(r.supports(t16) == built); // the dynamic-block kernel
  BOOST_TEST(!r.supports(t64));         // the cluster kernels are not built
  BOOST_TEST(!r.supports(routing_arrays::shape(1, 4096, 8, 16, 0, 4096))); // > 2048 experts
}

BOOST_AUTO_TEST_CASE(the_decode_routing_kernel_holds_every_expert_in_a_power_of_two_per_lane) {
  // The instantiation run_fast launches and the audit names (experiments/audit/moefin_plan.cpp).
  struct Case {
    std::int64_t experts;
    int per;
  };
  for (Case c : {Case{1, 1}, Case{32, 1}, Case{33, 2}, Case{64, 2}, Case{100, 4}, Case{256, 8},
                 Case{257, 16}, Case{512, 16}, Case{896, 32}, Case{1024, 32}})
    BOOST_TEST(moefin::routing::fast_scores_per_lane(c.experts) == c.per, c.experts);
}

BOOST_AUTO_TEST_CASE(the_sorted_selection_is_for_tokens_whose_lanes_hold_distinct_scores) {
  using moefin::routing::fast_selection_is_sorted;
  using moefin::routing::score_key;
  // Keys order as the floats, -0 is +0, and only padding (no expert) is key 0.
  BOOST_TEST(score_key(-1.0f) < score_key(-0.5f));
  BOOST_TEST(score_key(-0.5f) < score_key(0.0f));
  BOOST_TEST(score_key(0.0f) == score_key(-0.0f));
  BOOST_TEST(score_key(0.0f) < score_key(1e-30f));
  BOOST_TEST(score_key(1.0f) < score_key(2.0f));
  BOOST_TEST(score_key(-3.4e38f) > 0u);
  // Lane l holds experts l, l + 32, ...: equal scores in different lanes keep the sorted lists,
  // equal scores in one lane (experts 5 and 37, or +0 and -0 there) do not.
  std::vector<float> s(96);
  for (std::size_t i = 0; i < s.size(); ++i)
    s[i] = static_cast<float>(i / 32); // lane l: 0, 1, 2 (every lane alike)
  BOOST_TEST(fast_selection_is_sorted(s.data(), 96));
  s[37] = s[5];
  BOOST_TEST(!fast_selection_is_sorted(s.data(), 96));
  BOOST_TEST(fast_selection_is_sorted(s.data(), 37)); // expert 37 is not a score of this row
  s[37] = -0.0f;
  s[5] = 0.0f;
  BOOST_TEST(!fast_selection_is_sorted(s.data(), 96));
  // One expert per lane (E <= 32) is always sorted.
  std::vector<float> const flat(32, 0.5f);
  BOOST_TEST(fast_selection_is_sorted(flat.data(), 32));
}
