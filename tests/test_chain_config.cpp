#define BOOST_TEST_MODULE chain_config
#include <boost/test/unit_test.hpp>

#include "core/chain/presets.hpp"
#include "core/chain/shape.hpp"
#include "core/chain/verifier_chain.hpp"
#include "core/ops/errors.hpp"
#include "core/pdl/verifier.hpp"
#include "core/router_scores.hpp"
#include "experiments/chain/race_cells.hpp"
#include "reference/kokkos_env.hpp"
#include "reference/routing.hpp"

#include <functional>
#include <ostream>
#include <set>

namespace moefin {
std::ostream& operator<<(std::ostream& os, Trigger t) {
  return os << trigger_name(t);
}
namespace chain {
std::ostream& operator<<(std::ostream& os, FinalizeChoice const& f) {
  return os << f.name();
}
} // namespace chain
namespace activation {
std::ostream& operator<<(std::ostream& os, Type t) {
  return os << type_name(t);
}
} // namespace activation
} // namespace moefin

using namespace moefin;
using namespace moefin::chain;

namespace {

struct Kokkos {
  reference::KokkosSession session;
};
BOOST_TEST_GLOBAL_FIXTURE(Kokkos);

bool throws_naming(std::function<void()> const& f, std::string const& needle) {
  try {
    f();
  } catch (InputError const& e) {
    return std::string(e.what()).find(needle) != std::string::npos;
  }
  return false;
}

} // namespace

BOOST_AUTO_TEST_CASE(presets_place_the_triggers_of_design_section_2) {
  auto const before = preset_config(Preset::kSeedBefore);
  BOOST_TEST(before.trigger(Kernel::kRouting) == Trigger::kAfterWrites);
  BOOST_TEST(!before.metadata_before_wait);
  BOOST_TEST(before.trigger(Kernel::kFinalize) == Trigger::kExit);
  auto const after = preset_config(Preset::kSeedAfter);
  BOOST_TEST(after.trigger(Kernel::kRouting) == Trigger::kAfterWait);
  BOOST_TEST(after.metadata_before_wait);
  BOOST_TEST(after.trigger(Kernel::kFinalize) == Trigger::kDefault); // small_batch: entry
  for (auto const* c : {&before, &after}) {
    BOOST_TEST(c->trigger(Kernel::kPermute) == Trigger::kEntry);
    BOOST_TEST(c->trigger(Kernel::kActivation) == Trigger::kEntry);
    BOOST_TEST(c->trigger(Kernel::kGemm1) == Trigger::kExit);
    BOOST_TEST(c->trigger(Kernel::kGemm2) == Trigger::kExit);
  }
  for (Kernel k : kAllKernels) {
    BOOST_TEST(preset_config(Preset::kAllEarly).trigger(k) == Trigger::kEntry);
    BOOST_TEST(preset_config(Preset::kSafe).trigger(k) == Trigger::kAfterWait);
  }
  BOOST_TEST(between_triggers(after) == "permute=entry,gemm1=exit,act=entry,gemm2=exit");
}

BOOST_AUTO_TEST_CASE(preset_and_trigger_names_round_trip) {
  for (Preset p : kAllPresets) {
    Preset q;
    BOOST_TEST(parse_preset(preset_name(p), &q));
    BOOST_TEST(static_cast<int>(q) == static_cast<int>(p));
  }
  for (Trigger t : {Trigger::kDefault, Trigger::kExit, Trigger::kEntry, Trigger::kAfterWait,
                    Trigger::kAfterWrites}) {
    Trigger u;
    BOOST_TEST(parse_trigger(trigger_name(t), &u));
    BOOST_TEST(static_cast<int>(u) == static_cast<int>(t));
  }
  Trigger u;
  BOOST_TEST(!parse_trigger("early", &u));
  Preset q;
  BOOST_TEST(!parse_preset("seed", &q));
}

BOOST_AUTO_TEST_CASE(overrides_change_only_the_named_knobs) {
  ChainConfig c = preset_config(Preset::kSeedAfter);
  apply_overrides(c, "gemm1.trigger=entry,routing.delay_ns=25000,finalize.meta=after,"
                     "gemm2.pdl=off,finalize.variant=previous");
  BOOST_TEST(c.trigger(Kernel::kGemm1) == Trigger::kEntry);
  BOOST_TEST(c.at(Kernel::kRouting).delay_ns == 25000);
  BOOST_TEST(!c.metadata_before_wait);
  BOOST_TEST(!c.at(Kernel::kGemm2).pdl);
  BOOST_TEST(c.at(Kernel::kGemm1).pdl);
  BOOST_TEST(c.finalize == FinalizeChoice::dispatch_previous());
  BOOST_TEST(c.trigger(Kernel::kRouting) == Trigger::kAfterWait);
  BOOST_TEST(c.trigger(Kernel::kGemm2) == Trigger::kExit);
  BOOST_TEST(describe(c).find("gemm2{trigger=exit,pdl=off}") != std::string::npos, describe(c));
}

BOOST_AUTO_TEST_CASE(bad_overrides_name_the_flag_item_and_choices) {
  ChainConfig c = preset_config(Preset::kSafe);
  BOOST_TEST(throws_naming([&] { apply_overrides(c, "gemm3.trigger=entry"); }, "gemm3"));
  BOOST_TEST(throws_naming([&] { apply_overrides(c, "gemm1.trigger=soon"); }, "after_writes"));
  BOOST_TEST(throws_naming([&] { apply_overrides(c, "gemm1.delay_ns=-4"); }, "[0, 1000000000]"));
  BOOST_TEST(throws_naming([&] { apply_overrides(c, "gemm1.delay_ns=3us"); }, "delay_ns"));
  BOOST_TEST(throws_naming([&] { apply_overrides(c, "gemm1.meta=before"); }, "unknown key"));
  BOOST_TEST(throws_naming([&] { apply_overrides(c, "routing", "--set"); }, "--set"));
  BOOST_TEST(throws_naming([&] { apply_overrides(c, "finalize.meta=early"); }, "before or after"));
  BOOST_TEST(throws_naming([&] { apply_overrides(c, "act.pdl=maybe"); }, "on or off"));
}

BOOST_AUTO_TEST_CASE(shapes_parse_by_name_and_by_dimensions) {
  auto const s = parse_shape("top-22");
  BOOST_TEST(s.hidden == 2048);
  BOOST_TEST(s.inter == 1280);
  BOOST_TEST(s.experts == 512);
  BOOST_TEST(s.act == activation::Type::kRelu2);
  BOOST_TEST(s.gemm1_n() == 1280);
  auto const t = parse_shape("H512/I256/E32/top-6");
  BOOST_TEST(t.gemm1_n() == 512);
  BOOST_TEST(t.name == "H512/I256/E32/top-6");
  BOOST_TEST(parse_shape("top-16").name == "H3584/I512/E896/top-16");
  BOOST_TEST(parse_shapes("top-8,top-16", "--shapes").size() == 2u);
  BOOST_TEST(throws_naming([] { parse_shape("H512/E32/top-6", "--shapes"); }, "--shapes"));
  BOOST_TEST(throws_naming([] { parse_shape("H512/I256/E32/top-6/gelu"); }, "gelu"));
  BOOST_TEST(throws_naming([] { parse_presets("safe,fast", "--presets"); }, "fast"));
}

BOOST_AUTO_TEST_CASE(validation_rejects_what_the_kernels_cannot_run) {
  auto const s = parse_shape("top-8");
  validate(s, 128, 16);
  BOOST_TEST(throws_naming([&] { validate(s, 129, 16); }, "--tokens"));
  BOOST_TEST(throws_naming([&] { validate(s, 0, 16); }, "--tokens"));
  BOOST_TEST(throws_naming([&] { validate(s, 4, 48); }, "--tile-m"));
  validate(s, 4, 8); // the decode GEMMs' tile (chain_run::check_weights_format refuses the tiled)
  BOOST_TEST(throws_naming([&] { validate(parse_shape("H500/I256/E32/top-6"), 4, 16); }, "hidden"));
  BOOST_TEST(throws_naming([&] { validate(parse_shape("H512/I256/E32/top-40"), 4, 16); }, "top-K"));
  BOOST_TEST(
      throws_naming([&] { validate(parse_shape("H512/I256/E2000/top-8"), 4, 16); }, "experts"));
}

BOOST_AUTO_TEST_CASE(padded_row_capacity_holds_every_expert_group) {
  auto const s = parse_shape("top-8");
  // T=1: 8 experts, each padded to 16 rows.
  BOOST_TEST(max_padded_rows(s, 1, 16) == 128);
  BOOST_TEST(max_padded_rows(s, 16, 16) % 16 == 0);
  BOOST_TEST(max_padded_rows(s, 16, 16) >= 16 * 8 + 128 * 15);
}

BOOST_AUTO_TEST_CASE(same_seed_gives_the_same_routings_and_seeds_differ) {
  auto const s = parse_shape("top-8");
  BOOST_TEST(routing_seed(7, s, 4, 11) == routing_seed(7, s, 4, 11));
  std::set<std::uint64_t> seen;
  for (std::int64_t i = 0; i < 1000; ++i)
    seen.insert(routing_seed(7, s, 4, i));
  BOOST_TEST(seen.size() == 1000u);
  BOOST_TEST(routing_seed(7, s, 4, 0) != routing_seed(8, s, 4, 0));
  BOOST_TEST(routing_seed(7, s, 4, 0) != routing_seed(7, s, 8, 0));
  BOOST_TEST(replay_predecessor(5) != 5u);
  auto const a = router_scores(routing_seed(7, s, 4, 3), 4, s.experts);
  auto const b = router_scores(routing_seed(7, s, 4, 3), 4, s.experts);
  BOOST_TEST((a == b));
  for (float v : a) {
    BOOST_TEST(v >= -4.0f);
    BOOST_TEST(v < 4.0f);
  }
  // The routing of a seed: same seed, same experts (through the Kokkos reference).
  auto route = [&](std::uint64_t seed) {
    auto const sc = router_scores(seed, 4, s.experts);
    std::vector<std::int32_t> ids(32), e2p(32), p2t(4096), p2e(4096), cnt(256), off(257), cta(256),
        tot(1);
    std::vector<std::uint16_t> w(32);
    routing::RoutingParams p;
    p.scores = sc.data();
    p.expert_ids = ids.data();
    p.expert_weights = w.data();
    p.expanded_to_permuted = e2p.data();
    p.permuted_to_token = p2t.data();
    p.permuted_to_expanded = p2e.data();
    p.expert_counts = cnt.data();
    p.expert_offsets = off.data();
    p.cta_to_expert = cta.data();
    p.total_padded_rows = tot.data();
    p.num_tokens = 4;
    p.num_experts = s.experts;
    p.top_k = 8;
    p.num_local_experts = s.experts;
    p.tile = 16;
    p.max_padded_rows = max_padded_rows(s, 4, 16);
    reference::routing(p);
    return ids;
  };
  BOOST_TEST((route(routing_seed(7, s, 4, 3)) == route(routing_seed(7, s, 4, 3))));
  BOOST_TEST((route(routing_seed(7, s, 4, 3)) != route(routing_seed(7, s, 4, 4))));
}

BOOST_AUTO_TEST_CASE(layer_plan_lists_pre_wait_reads_where_the_variant_makes_them) {
  ChainConfig c = preset_config(Preset::kSeedAfter);
  auto const& small_batch = finalize::variant("small_batch", "test");
  LayerPlan p = make_layer_plan(c, small_batch);
  BOOST_TEST(p.kernels.size() == 7u);
  BOOST_TEST(p.at(Kernel::kFinalize).name == "finalize");
  BOOST_TEST(p.at(Kernel::kFinalize).impl == "small_batch");
  BOOST_TEST(p.at(Kernel::kFinalize).trigger == Trigger::kEntry); // small_batch's own placement
  BOOST_TEST(p.at(Kernel::kFinalize).reads_before_wait.size() == 2u);
  BOOST_TEST(p.checksum().name == "checksum");
  BOOST_TEST(p.checksum().trigger == Trigger::kExit);
  for (std::size_t i = 0; i < p.kernels.size(); ++i) {
    BOOST_TEST(p.kernels[i].waits, p.kernels[i].name);
    BOOST_TEST(p.kernels[i].trigger != Trigger::kDefault, p.kernels[i].name);
    if (p.kernels[i].kernel != Kernel::kFinalize)
      BOOST_TEST(p.kernels[i].reads_before_wait.empty(), p.kernels[i].name);
  }
  auto const scalar = make_layer_plan(c, finalize::variant("scalar", "test"));
  BOOST_TEST(scalar.at(Kernel::kFinalize).trigger == Trigger::kExit);
  BOOST_TEST(scalar.at(Kernel::kFinalize).reads_before_wait.empty()); // reads after its wait
  BOOST_TEST(!scalar.finalize_meta_before_wait());
  c.metadata_before_wait = false;
  BOOST_TEST(!make_layer_plan(c, finalize::variant("vecload", "test")).finalize_meta_before_wait());
  c.at(Kernel::kFinalize).trigger = Trigger::kAfterWrites;
  BOOST_TEST(make_layer_plan(c, small_batch).at(Kernel::kFinalize).trigger ==
             Trigger::kAfterWrites);
  BOOST_CHECK_THROW(finalize::variant("auto", "test"), InputError);
}

BOOST_AUTO_TEST_CASE(chain_json_is_a_chain_the_verifier_reads) {
  ChainConfig c = preset_config(Preset::kAllEarly);
  pdl::Chain const parsed = pdl::parse_chain(
      chain_json(c, finalize::variant("small_batch", "test"), false), "chain_json");
  BOOST_TEST(parsed.kernels.size() == 7u);
  BOOST_TEST(parsed.iterations == kVerifierIterations);
  BOOST_TEST((pdl::verify(parsed, {false}).verdict() == pdl::Verdict::kRace));
  pdl::Chain const graph =
      pdl::parse_chain(chain_json(c, finalize::variant("small_batch", "test"), true), "graph");
  BOOST_TEST(graph.graph);
  BOOST_TEST(graph.kernels.size() == 14u);
  BOOST_TEST(graph.edges.size() == 13u);
}

BOOST_AUTO_TEST_CASE(verifier_chain_names_every_buffer_the_checksum_hashes) {
  pdl::Chain const c = verifier_chain(preset_config(Preset::kSeedAfter),
                                      finalize::variant("small_batch", "test"), false);
  pdl::Kernel const& checksum = c.kernels.back();
  BOOST_TEST_REQUIRE(checksum.name == "checksum");
  std::set<std::string> hashed;
  for (pdl::Op const& op : checksum.paths.at(0))
    if (op.kind == pdl::OpKind::kRead)
      hashed.insert(c.buffers.at(op.buffer));
  for (Buffer b : hashed_buffers())
    BOOST_TEST(hashed.count(buffer_name(b)) == 1u, buffer_name(b));
  BOOST_TEST(hashed.count("snapshot") == 1u); // seed-after reads metadata before the wait
}

BOOST_AUTO_TEST_CASE(cells_race_exactly_when_no_kernel_in_between_waits_before_it_triggers) {
  auto const verdict = [](ChainConfig const& c, char const* variant) {
    CellVerdict const v = verify_cell(c, finalize::variant(variant, "test"), false);
    BOOST_TEST((v.chain == v.metadata));
    return v.chain;
  };
  race::Axes axes;
  axes.presets = {kAllPresets.begin(), kAllPresets.end()};
  axes.full = true;
  axes.delays = {0};
  int races = 0, cells = 0;
  for (auto const& cell : race::cells(axes)) {
    bool linked = false; // a kernel in between waits before it triggers
    for (Kernel k : kBetweenKernels)
      linked = linked || cell.cfg.trigger(k) != Trigger::kEntry;
    bool const race = !linked && cell.cfg.metadata_before_wait;
    BOOST_TEST((verdict(cell.cfg, "small_batch") == pdl::Verdict::kRace) == race, cell.key);
    BOOST_TEST((verdict(cell.cfg, "scalar") == pdl::Verdict::kOrdered), cell.key);
    races += race;
    ++cells;
  }
  BOOST_TEST(races == 4); // one per preset: meta before, every kernel in between at entry
  BOOST_TEST(cells > 200);
}

BOOST_AUTO_TEST_CASE(race_rows_rebuild_the_configuration_of_their_cell) {
  race::Axes axes;
  axes.presets = {kAllPresets.begin(), kAllPresets.end()};
  axes.overrides = "routing.trigger=entry,gemm2.pdl=off";
  h5::Provenance const root = {{"overrides", axes.overrides}, {"launch", "stream"}};
  auto const cells = race::cells(axes);
  for (auto const& c : cells) {
    h5::Table t;
    t.rows = 1;
    t.strings["preset"] = {c.cfg.preset};
    t.strings["triggers"] = {c.triggers};
    t.strings["meta"] = {c.meta};
    t.strings["delayed_kernel"] = {c.delayed_kernel};
    t.strings["finalize"] = {"small_batch"};
    t.ints["delay_ns"] = {c.delay_ns};
    BOOST_TEST(describe(race::row_config(t, 0, root)) == describe(c.cfg), c.key);
    CellVerdict const a = race::row_verdict(t, 0, root);
    CellVerdict const b = verify_cell(c.cfg, finalize::variant("small_batch", "test"), false);
    BOOST_TEST((a.chain == b.chain), c.key);
    BOOST_TEST(a.races == b.races, c.key);
  }
  h5::Table t;
  t.rows = 1;
  t.strings["preset"] = {"seed-after"};
  t.strings["triggers"] = {"permute=entry"};
  t.strings["meta"] = {"before"};
  t.strings["delayed_kernel"] = {"none"};
  t.ints["delay_ns"] = {0};
  BOOST_CHECK_THROW(race::row_config(t, 0, {{"command_line", "moefin race --set x.y=z"}}),
                    InputError);
  t.strings["preset"] = {"fastest"};
  BOOST_CHECK_THROW(race::row_config(t, 0, {}), InputError);
}

BOOST_AUTO_TEST_CASE(planned_finalize_variant_follows_the_dispatch_rule) {
  LayerShape const s = parse_shape("top-8");
  ChainConfig c = preset_config(Preset::kSeedAfter);
  BOOST_TEST(race::planned_finalize_variant(s, 4, c).name == "small_batch");
  BOOST_TEST(race::planned_finalize_variant(s, 128, c).name == "vecload");
  c.finalize = FinalizeChoice::dispatch_previous();
  BOOST_TEST(race::planned_finalize_variant(s, 4, c).name == "scalar");
  c.finalize = FinalizeChoice::of(finalize::variant("small_batch_nosplit", "test"));
  BOOST_TEST(race::planned_finalize_variant(s, 128, c).name == "small_batch_nosplit");
}

BOOST_AUTO_TEST_CASE(race_cells_cover_every_gemm_placement_and_mark_the_benchmark) {
  race::Axes axes;
  axes.presets = {Preset::kSeedAfter, Preset::kAllEarly};
  auto const cells = race::cells(axes);
  std::set<std::string> keys, g1, g2;
  int bench = 0;
  for (auto const& c : cells) {
    BOOST_TEST(keys.insert(c.key).second, "duplicate key " << c.key);
    BOOST_TEST(c.key.size() + 40 < 160u);
    g1.insert(trigger_name(c.cfg.trigger(Kernel::kGemm1)));
    g2.insert(trigger_name(c.cfg.trigger(Kernel::kGemm2)));
    bench += c.benchmark;
    if (c.benchmark) {
      BOOST_TEST(c.triggers == "permute=entry,gemm1=entry,act=entry,gemm2=entry");
      BOOST_TEST(c.cfg.at(Kernel::kRouting).delay_ns >= 20000);
    }
  }
  BOOST_TEST(g1.size() == 4u);
  BOOST_TEST(g2.size() == 4u);
  BOOST_TEST(bench == 2); // one per preset
  axes.full = true;
  axes.presets = {Preset::kSafe};
  axes.metas = {"before"};
  axes.delays = {0};
  BOOST_TEST(race::cells(axes).size() == 64u);
}
