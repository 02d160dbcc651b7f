#define BOOST_TEST_MODULE finalize_fast
#include <boost/test/unit_test.hpp>

// Host-only behaviour of the fast finalize paths: which launches take a lean instantiation,
// small_batch_v2's geometry (validation, the rule, the released geometry, the candidates, the
// policy table lookup) and plan(), its variant names, and the chain's small_batch_v2
// choice as the verifier sees it.

#include "core/chain/presets.hpp"
#include "core/chain/shape.hpp"
#include "core/chain/verifier_chain.hpp"
#include "core/ops/errors.hpp"
#include "core/ops/layer_plan.hpp"
#include "experiments/chain/race_cells.hpp"
#include "experiments/finalize/grid.hpp"
#include "kernels/chain/chain_launches.hpp"
#include "kernels/finalize/finalize.hpp"
#include "kernels/finalize/small_batch_v2.hpp"

#include <set>

using namespace moefin;
using finalize::Options;
namespace v2 = finalize::v2;

namespace {

void* const kPtr = reinterpret_cast<void*>(std::uintptr_t(1) << 20);

finalize::FinalizeParams shape(std::int64_t h, std::int64_t t, std::int64_t k) {
  finalize::FinalizeParams p;
  p.hidden = h;
  p.hidden_padded = h;
  p.num_tokens = t;
  p.top_k = k;
  p.num_rows = t * k;
  p.gemm_out = kPtr;
  p.out = kPtr;
  p.expert_weights = kPtr;
  p.expanded_to_permuted = static_cast<std::int32_t const*>(kPtr);
  p.in_scales = static_cast<float const*>(kPtr);
  p.out_scales = static_cast<float*>(kPtr);
  return p;
}

Options named(std::string const& name) {
  return fin::variant_options(name);
}

std::string picked(finalize::FinalizeParams const& p, Options const& o) {
  return finalize::select(p, o).name;
}

} // namespace

BOOST_AUTO_TEST_CASE(knob_free_launches_are_lean_and_any_probe_makes_them_instrumented) {
  auto const p = shape(4096, 2, 8);
  for (auto const* v : finalize::variants(finalize::kListCheck)) {
    if (v->source != finalize::Source::kMoefin) // released kernels have no lean instantiations
      continue;
    BOOST_TEST_CONTEXT(v->name) {
      Options o = named(v->name);
      BOOST_TEST(finalize::plan(p, o).lean);
      Options d = o;
      d.pdl.delay_ns = 10;
      BOOST_TEST(!finalize::plan(p, d).lean);
      Options s = o;
      s.pdl.stamps = reinterpret_cast<std::int64_t*>(kPtr);
      BOOST_TEST(!finalize::plan(p, s).lean);
      Options n = o;
      n.pre_wait_snapshot = static_cast<std::int32_t*>(kPtr);
      BOOST_TEST(!finalize::plan(p, n).lean);
      Options f = o;
      f.force_instrumented = true;
      BOOST_TEST(!finalize::plan(p, f).lean);
    }
  }
  // Placements without a lean kernel run instrumented.
  Options o = named("scalar");
  o.pdl.trigger = Trigger::kEntry;
  BOOST_TEST(!finalize::plan(p, o).lean);
  o = named("small_batch");
  o.pdl.trigger = Trigger::kAfterWait;
  BOOST_TEST(!finalize::plan(p, o).lean);
  o = named("small_batch_v2_no_shuffle");
  o.pdl.trigger = Trigger::kExit; // ablations are lean at their entry trigger only
  BOOST_TEST(!finalize::plan(p, o).lean);
  o = named("small_batch_v2");
  o.metadata_before_wait = false; // the run's permission: no lean kernel reads after the wait
  BOOST_TEST(!finalize::plan(p, o).lean);
  // The dispatch rule's pick is lean without probes.
  o = Options{};
  BOOST_TEST(finalize::plan(p, o).lean);
  BOOST_TEST(finalize::plan(p, o).variant->name == "small_batch");
}

BOOST_AUTO_TEST_CASE(v2_geometry_groups_fit_a_warp_and_cover_every_expert) {
  for (std::int64_t k = 1; k <= v2::Limits::kMaxTopK; ++k)
    for (int loads : {1, 2, 4, 8})
      for (int chunks = 4; chunks <= 128; chunks *= 2) {
        int const groups = [&] {
          int g = 1;
          while (g * loads < k)
            g *= 2;
          return g;
        }();
        bool const fits = groups <= 32 && chunks * groups >= 32 && chunks * groups <= 512;
        if (!fits) {
          BOOST_CHECK_THROW(v2::make_geometry(k, chunks, loads), InputError);
          continue;
        }
        auto const g = v2::make_geometry(k, chunks, loads);
        BOOST_TEST(g.groups == groups);
        BOOST_TEST(g.per_thread <= loads);
        BOOST_TEST(g.groups * g.per_thread >= k);
        BOOST_TEST((g.per_thread - 1) * g.groups < k); // no thread owns only padding slots
      }
  BOOST_CHECK_THROW(v2::make_geometry(8, 12, 4), InputError);  // not a power of two
  BOOST_CHECK_THROW(v2::make_geometry(8, 16, 3), InputError);  // loads not in {1, 2, 4, 8}
  BOOST_CHECK_THROW(v2::make_geometry(65, 16, 8), InputError); // K past 64
  BOOST_CHECK_THROW(v2::make_geometry(8, 16, 4, Trigger::kAfterWait), InputError);
}

BOOST_AUTO_TEST_CASE(v2_rule_fills_the_gpu_and_the_released_geometry_has_256_threads) {
  for (std::int64_t h : fin::grid_hidden())
    for (std::int64_t t : {1, 2, 4, 8, 64, 300})
      for (std::int64_t k = 1; k <= 64; ++k) {
        auto const g = v2::rule_geometry(h, t, k);
        BOOST_TEST((g.threads() >= 32 && g.threads() <= 512));
        std::int64_t const ctas = (h / 8 + g.chunks - 1) / g.chunks * t;
        int const narrowest = std::max(4, 32 / g.groups);
        BOOST_TEST((ctas >= 128 || g.chunks == narrowest), "H=" << h << " T=" << t << " K=" << k);
      }
  for (std::int64_t k : {5, 6, 8, 10, 16, 22, 32, 64}) {
    auto const g = v2::released_geometry(k);
    BOOST_TEST(g.threads() == 256, "K=" << k);
    BOOST_TEST(g.loads == 4);
    BOOST_TEST(g.groups * 4 >= k);
    BOOST_TEST((g.groups == 1 || g.groups * 2 < k)); // the smallest power of two
  }
}

BOOST_AUTO_TEST_CASE(v2_candidates_are_distinct_valid_and_named_reversibly) {
  for (std::int64_t k : {1, 6, 8, 10, 16, 22, 32, 64}) {
    auto const c = v2::candidates(k);
    BOOST_TEST(!c.empty());
    std::set<std::tuple<int, int, int>> seen;
    for (auto const& g : c) {
      BOOST_TEST(seen.insert({g.chunks, g.groups, g.per_thread}).second);
      auto const name = v2::candidate_name(g.chunks, g.loads);
      int chunks = 0, loads = 0;
      Trigger t = Trigger::kDefault;
      bool w = true;
      BOOST_TEST(v2::parse_candidate(name, &chunks, &loads, &t, &w));
      BOOST_TEST(chunks == g.chunks);
      BOOST_TEST(loads == g.loads);
      BOOST_TEST((t == Trigger::kEntry));
      BOOST_TEST(!w);
      BOOST_TEST(v2::parse_candidate(v2::candidate_name(g.chunks, g.loads, Trigger::kExit), &chunks,
                                     &loads, &t, &w));
      BOOST_TEST((t == Trigger::kExit));
      BOOST_TEST(!w);
      auto const wname = v2::candidate_name(g.chunks, g.loads, Trigger::kEntry, true);
      BOOST_TEST(wname == name + "/w");
      BOOST_TEST(v2::parse_candidate(wname, &chunks, &loads, &t, &w));
      BOOST_TEST((t == Trigger::kEntry));
      BOOST_TEST(w);
      Options const o = named(name);
      auto const lp = finalize::plan(shape(4096, 1, k), o);
      BOOST_TEST(lp.block_x == g.threads());
      BOOST_TEST(!lp.warp_groups);
      // A /w candidate: the same geometry in the released lane layout (fi_layout's kernels).
      auto const lw = finalize::plan(shape(4096, 1, k), named(wname));
      BOOST_TEST(lw.block_x == g.threads());
      BOOST_TEST(lw.warp_groups);
      BOOST_TEST(lw.variant->name == "small_batch_v2_fi_layout");
      BOOST_TEST((lw.trigger == Trigger::kEntry));
    }
  }
  int c = 0, l = 0;
  Trigger t;
  bool w = false;
  for (char const* bad :
       {"small_batch_v2", "small_batch_v2/c16", "small_batch_v2/c16/l", "small_batch_v2/c16/l4/x",
        "small_batch_v2/cx/l4", "small_batch/c16/l4", "small_batch_v2/c16/l4/exit/w",
        "small_batch_v2/c16/l4/w/exit"})
    BOOST_TEST(!v2::parse_candidate(bad, &c, &l, &t, &w), bad);
  // The warp-groups layout has no lean exit kernel: a geometry asking for one is refused.
  BOOST_CHECK_THROW(v2::make_geometry(8, 32, 4, Trigger::kExit, true), InputError);
}

BOOST_AUTO_TEST_CASE(v2_table_lookup_takes_the_nearest_tokens_then_top_k_then_hidden) {
  std::vector<v2::PolicyEntry> const t = {
      {1024, 1, 8, 8, 4, Trigger::kEntry},  {4096, 1, 8, 16, 2, Trigger::kEntry},
      {4096, 1, 16, 32, 8, Trigger::kExit}, {4096, 4, 8, 64, 4, Trigger::kEntry},
      {7168, 4, 32, 4, 1, Trigger::kEntry}, {2048, 4, 22, 32, 4, Trigger::kEntry, true},
  };
  auto g = v2::table_geometry(t, 4096, 1, 8);
  BOOST_TEST(g.chunks == 16);
  BOOST_TEST(g.loads == 2);
  BOOST_TEST(!g.warp_groups);
  g = v2::table_geometry(t, 2048, 4, 22); // the warp-groups entry keeps its layout
  BOOST_TEST(g.warp_groups);
  BOOST_TEST(g.chunks == 32);
  g = v2::table_geometry(t, 1500, 1, 6); // nearest H by ratio: 1024; K 6 -> the K = 8 entries
  BOOST_TEST(g.loads == 4);
  BOOST_TEST(g.chunks == 16);             // 8 chunks x 2 groups widened to a full warp
  g = v2::table_geometry(t, 4096, 1, 12); // K = 16 entry, its trigger
  BOOST_TEST(g.chunks == 32);
  BOOST_TEST((g.trigger == Trigger::kExit));
  g = v2::table_geometry(t, 4096, 2, 8); // T = 2: nearest is 1
  BOOST_TEST(g.chunks == 16);
  g = v2::table_geometry(t, 4096, 3, 8); // T = 3: nearest is 4
  BOOST_TEST(g.chunks == 64);
  g = v2::table_geometry(t, 7168, 4, 64); // largest K of T = 4 is 32; rebuilt for K = 64
  BOOST_TEST(g.groups * g.per_thread >= 64);
  BOOST_TEST((g.threads() >= 32 && g.threads() <= 512));
  auto const r = v2::table_geometry(t, 4096, 5, 8); // past the table's largest T: the rule
  auto const rule = v2::rule_geometry(4096, 5, 8);
  BOOST_TEST(r.chunks == rule.chunks);
  BOOST_TEST(r.loads == rule.loads);
  auto const e = v2::table_geometry({}, 4096, 1, 8);
  BOOST_TEST(e.chunks == v2::rule_geometry(4096, 1, 8).chunks);
  BOOST_TEST(std::string(v2::table_source()).size() > 0);
}

BOOST_AUTO_TEST_CASE(v2_table_layout_is_small_batch_v2s_own_not_its_ablations) {
  // Where the committed table picks the warp-groups layout, small_batch_v2 takes it and each
  // ablation keeps v2's layout (no lean kernel has both an ablation bit and the layout bit).
  int seen = 0;
  for (auto const& e : v2::table()) {
    if (!e.warp_groups)
      continue;
    ++seen;
    auto const p = shape(e.hidden, e.tokens, e.top_k);
    BOOST_TEST(finalize::plan(p, named("small_batch_v2")).warp_groups);
    for (char const* a : {"small_batch_v2_late_trigger", "small_batch_v2_no_shuffle",
                          "small_batch_v2_no_broadcast", "small_batch_v2_anchor",
                          "small_batch_v2_fi_geometry"})
      BOOST_TEST(!finalize::plan(p, named(a)).warp_groups, a);
    BOOST_TEST(finalize::plan(p, named("small_batch_v2_fi_layout")).warp_groups);
  }
  BOOST_TEST(seen > 0);
}

BOOST_AUTO_TEST_CASE(v2_plan_and_names_reach_every_ablation) {
  auto const p = shape(7168, 3, 22);
  auto lp = finalize::plan(p, named("small_batch_v2"));
  BOOST_TEST(lp.variant->name == "small_batch_v2");
  BOOST_TEST(lp.grid_y == 3);
  BOOST_TEST(lp.block_y == 1);
  BOOST_TEST(lp.block_x % 32 == 0);
  BOOST_TEST(lp.groups * lp.loads_per_thread >= 22);
  BOOST_TEST(lp.ctas() == lp.grid_x * 3);
  BOOST_TEST((finalize::plan(p, named("small_batch_v2_late_trigger")).trigger == Trigger::kExit));
  BOOST_TEST(v2::ablation_bits(*named("small_batch_v2_no_shuffle").variant) == v2::kShuffle);
  BOOST_TEST(v2::ablation_bits(*named("small_batch_v2_no_broadcast").variant) == v2::kBroadcast);
  BOOST_TEST(v2::ablation_bits(*named("small_batch_v2_anchor").variant) == v2::kAnchor);
  BOOST_TEST(v2::ablation_bits(*named("small_batch_v2_fi_layout").variant) == v2::kWarpGroups);
  // The released lane layout runs in the released geometry.
  auto const fl = finalize::plan(p, named("small_batch_v2_fi_layout"));
  auto const fg = finalize::plan(p, named("small_batch_v2_fi_geometry"));
  BOOST_TEST(fl.block_x == 256);
  BOOST_TEST(fl.block_x == fg.block_x);
  BOOST_TEST(fl.grid_x == fg.grid_x);
  BOOST_TEST(fl.groups == fg.groups);
  BOOST_TEST(v2::ablation_bits(*named("small_batch_v2").variant) == 0u);
  // The entries declare what the tables and the chain need.
  auto const& e = finalize::variant("small_batch_v2", "test");
  BOOST_TEST(e.baseline == "scalar");
  BOOST_TEST((e.default_trigger == Trigger::kEntry));
  BOOST_TEST(e.meta_before_wait);
  BOOST_TEST(!e.dispatchable);
  BOOST_TEST(e.in_list(finalize::kListSweep));
  BOOST_TEST(finalize::variant("small_batch_v2_no_shuffle", "test").ablation_of ==
             "small_batch_v2");
  BOOST_TEST(!finalize::variant("small_batch_v2_no_shuffle", "test").in_list(finalize::kListSweep));
  lp = finalize::plan(p, named("small_batch_v2_fi_geometry"));
  BOOST_TEST(lp.block_x == 256);
  BOOST_TEST(lp.groups == 8);
  BOOST_CHECK_THROW(named("small_batch_v2_fast"), InputError);
  // Candidates: small_batch_v2 (or its late-trigger entry for /exit) with a geometry override.
  auto const vs =
      fin::parse_variants("--variants", "small_batch_v2/c16/l4,small_batch_v2/c8/l2/exit");
  BOOST_TEST(vs.size() == 2u);
  BOOST_TEST(vs[0].entry->name == "small_batch_v2");
  BOOST_TEST(vs[0].options.v2_chunks == 16);
  BOOST_TEST(vs[1].entry->name == "small_batch_v2_late_trigger");
  BOOST_TEST(finalize::plan(p, vs[1].options).block_x == v2::make_geometry(22, 8, 2).threads());
  BOOST_TEST((finalize::plan(p, vs[1].options).trigger == Trigger::kExit));
  BOOST_CHECK_THROW(fin::parse_variants("--variants", "small_batch_v2/c16/l3"), InputError);
  std::vector<fin::Shape> const shapes = {{4096, 1, 8, finalize::WeightType::kBf16},
                                          {4096, 1, 32, finalize::WeightType::kBf16}};
  std::string const all = fin::expand_v2_candidates("scalar,small_batch_v2/candidates", shapes);
  BOOST_TEST(all.rfind("scalar,small_batch_v2/c", 0) == 0u, all);
  BOOST_TEST(all.find("/exit") == std::string::npos);
  BOOST_TEST(fin::expand_v2_candidates("small_batch_v2/candidates/exit", shapes).find("/exit") !=
             std::string::npos);
  std::string const warp = fin::expand_v2_candidates("small_batch_v2/candidates/w", shapes);
  BOOST_TEST(warp.find("/w") != std::string::npos, warp);
  BOOST_TEST(warp.find("/exit") == std::string::npos, warp);
  BOOST_TEST(fin::parse_variants("--variants", warp).front().entry->name ==
             "small_batch_v2_fi_layout");
  // The dispatch rule never picks it: it is forced (in the chain: --set finalize.variant=...).
  BOOST_TEST(picked(p, Options{}) == "small_batch");
  // Unaligned rows and huge strides are refused.
  auto q = shape(1002, 1, 8);
  BOOST_CHECK_THROW(finalize::plan(q, named("small_batch_v2")), InputError);
  q = shape(1024, 1, 8);
  q.hidden_padded = std::int64_t(1) << 30;
  BOOST_CHECK_THROW(finalize::plan(q, named("small_batch_v2")), InputError);
  Options half = named("small_batch_v2");
  half.v2_chunks = 16;
  BOOST_CHECK_THROW(finalize::plan(p, half), InputError); // chunks without loads
}

BOOST_AUTO_TEST_CASE(chain_runs_v2_as_a_forced_variant_the_verifier_judges) {
  using namespace moefin::chain;
  auto const& v2e = finalize::variant("small_batch_v2", "test");
  auto const& sb = finalize::variant("small_batch", "test");
  ChainConfig c = preset_config(Preset::kAllEarly);
  apply_overrides(c, "finalize.variant=small_batch_v2");
  BOOST_TEST(c.finalize.name() == "small_batch_v2");
  // It reads the metadata before its wait, as small_batch: the plan and the verifier say so.
  LayerPlan const plan = make_layer_plan(c, v2e);
  BOOST_TEST(plan.finalize_meta_before_wait());
  BOOST_TEST(plan.at(Kernel::kFinalize).impl == "small_batch_v2");
  BOOST_TEST((plan.at(Kernel::kFinalize).trigger == Trigger::kEntry));
  BOOST_TEST(verifier_chain(plan, "test", false).kernels.size() == plan.kernels.size());
  // Every kernel triggering at entry races for the pre-wait metadata reads, for small_batch and
  // small_batch_v2 alike; seed-after orders them.
  c.at(Kernel::kRouting).delay_ns = 25000;
  for (bool graph : {false, true}) {
    BOOST_TEST((verify_cell(c, sb, graph).metadata == pdl::Verdict::kRace));
    BOOST_TEST((verify_cell(c, v2e, graph).metadata == pdl::Verdict::kRace));
  }
  ChainConfig s = preset_config(Preset::kSeedAfter);
  BOOST_TEST((verify_cell(s, v2e, true).chain == pdl::Verdict::kOrdered));
  BOOST_TEST((verify_cell(s, v2e, false).metadata == pdl::Verdict::kOrdered));
  // Timing runs launch finalize without the snapshot (the lean kernel); checked runs with it.
  RunFlags timing;
  timing.checked = false;
  for (auto const& d : layer_launches(make_layer_plan(s, v2e), timing))
    BOOST_TEST(!d.snapshot);
  RunFlags checked;
  checked.checked = true;
  int snapshots = 0;
  for (auto const& d : layer_launches(make_layer_plan(s, v2e), checked))
    snapshots += d.snapshot && d.kernel == Kernel::kFinalize;
  BOOST_TEST(snapshots == 1);
  apply_overrides(s, "finalize.variant=small_batch_v2");
  BOOST_TEST(race::planned_finalize_variant(parse_shape("top-8"), 128, s).name == "small_batch_v2");
}

BOOST_AUTO_TEST_CASE(every_variant_name_fits_the_result_files_variant_column) {
  // /finalize_sweep and /finalize_check store the variant in 28 bytes (with the terminator).
  std::vector<std::string> names = fin::check_variant_names();
  for (std::int64_t k : {1, 6, 64})
    for (auto const& g : v2::candidates(k)) {
      names.push_back(v2::candidate_name(g.chunks, g.loads, Trigger::kExit));
      names.push_back(v2::candidate_name(g.chunks, g.loads, Trigger::kEntry, true));
    }
  for (auto const& n : names)
    BOOST_TEST(n.size() < 28u, n);
}
