// The released chain flavour on the host (no GPU): the contracts of the released kernels in the
// layer plan, the verifier's verdicts on its presets, the race cells it builds and the command
// line's errors.

#define BOOST_TEST_MODULE released_chain
#include <boost/test/unit_test.hpp>

#include "core/chain/presets.hpp"
#include "core/chain/released_kernels.hpp"
#include "core/chain/verifier_chain.hpp"
#include "core/ops/errors.hpp"
#include "core/ops/layer_plan.hpp"
#include "experiments/chain/race_cells.hpp"
#include "kernels/chain/chain_launches.hpp"
#include "kernels/finalize/finalize.hpp"
#include "tests/run_moefin.hpp"

#include <algorithm>
#include <string>
#include <vector>

using namespace moefin;
using namespace moefin::chain;

namespace {

bool has(std::vector<Buffer> const& v, Buffer b) {
  return std::find(v.begin(), v.end(), b) != v.end();
}

ChainConfig released(Preset p) {
  ChainConfig c = preset_config(p);
  set_flavour(c, "released");
  return c;
}

finalize::FinalizeVariant const& small_batch() {
  return finalize::variant("small_batch", "test");
}

using test::run;

} // namespace

BOOST_AUTO_TEST_CASE(contracts_are_the_released_code) {
  LayerPlan const p = make_layer_plan(released(Preset::kSeedAfter), small_batch());
  BOOST_TEST(p.flavour == "released");
  BOOST_TEST(p.gate_second);
  BOOST_TEST(p.repoison);
  KernelPlan const& r = p.at(Kernel::kRouting);
  BOOST_TEST(r.released);
  BOOST_TEST(r.impl == "flashinfer.routing_block");
  BOOST_TEST((r.trigger == Trigger::kAfterWait)); // right after its wait, before every write
  BOOST_TEST(r.reads_before_wait.empty());
  BOOST_TEST(has(r.reads_after_wait, Buffer::kScores));
  for (Buffer b : {Buffer::kExpertIds, Buffer::kExpertCounts, Buffer::kExpertOffsets})
    BOOST_TEST(!has(r.writes, b), buffer_name(b)); // the block kernels write none of them
  for (Buffer b : {Buffer::kExpandedToPermuted, Buffer::kExpertWeights, Buffer::kCtaToExpert,
                   Buffer::kPermutedToToken, Buffer::kTotalPaddedRows})
    BOOST_TEST(has(r.writes, b), buffer_name(b));
  for (Kernel k : {Kernel::kPermute, Kernel::kActivation}) {
    KernelPlan const& x = p.at(k);
    BOOST_TEST(x.released);
    BOOST_TEST((x.trigger == Trigger::kEntry)); // trigger, then wait
    BOOST_TEST(x.reads_before_wait.empty());
    BOOST_TEST(has(x.reads_after_wait, Buffer::kExpandedToPermuted));
  }
  // moefin's GEMMs read nothing the released routing leaves unwritten.
  for (Kernel k : {Kernel::kGemm1, Kernel::kGemm2}) {
    KernelPlan const& g = p.at(k);
    BOOST_TEST(!g.released);
    for (Buffer b : {Buffer::kExpertIds, Buffer::kExpertCounts, Buffer::kExpertOffsets})
      BOOST_TEST(!has(g.reads_after_wait, b));
  }
  BOOST_TEST(has(p.checksum().writes, Buffer::kPermuted)); // the re-poisoning is in the plan
  // moefin's flavour is unchanged by all this.
  LayerPlan const m = make_layer_plan(preset_config(Preset::kSeedAfter), small_batch());
  BOOST_TEST(m.flavour == "moefin");
  BOOST_TEST(!m.repoison);
  BOOST_TEST(!m.gate_second);
  BOOST_TEST(m.snapshot);
  BOOST_TEST(!m.at(Kernel::kRouting).released);
}

BOOST_AUTO_TEST_CASE(fixed_kernels_ignore_trigger_knobs_and_refuse_delays) {
  ChainConfig c = preset_config(Preset::kSafe); // permute and act after their wait
  c.flavour = "released";
  LayerPlan const p = make_layer_plan(c, small_batch());
  BOOST_TEST((p.at(Kernel::kPermute).trigger == Trigger::kEntry));
  BOOST_TEST((p.at(Kernel::kActivation).trigger == Trigger::kEntry));
  BOOST_TEST((p.at(Kernel::kGemm1).trigger == Trigger::kAfterWait)); // moefin's: every placement
  set_flavour(c, "released");
  BOOST_TEST(between_triggers(c) == "permute=entry,gemm1=after_wait,act=entry,gemm2=after_wait");
  BOOST_TEST(describe(c).find("flavour=released") != std::string::npos);
  ChainConfig d = released(Preset::kAllEarly);
  d.at(Kernel::kRouting).delay_ns = 25000;
  BOOST_CHECK_THROW(make_layer_plan(d, small_batch()), InputError);
  d.at(Kernel::kRouting).delay_ns = 0;
  d.at(Kernel::kGemm1).delay_ns = 25000; // moefin's GEMM keeps its delay knob
  BOOST_TEST(make_layer_plan(d, small_batch()).at(Kernel::kGemm1).delay_ns == 25000);
  BOOST_CHECK_THROW(chain_flavour("fused"), InputError);
}

BOOST_AUTO_TEST_CASE(released_finalize_in_the_chain) {
  auto const* fi = finalize::find_variant("fi_small_batch");
  if (fi == nullptr) {
    BOOST_TEST_MESSAGE("fi_small_batch not registered (build without the released kernels)");
    return;
  }
  ChainConfig c = released(Preset::kSafe); // finalize after its wait: the released one cannot
  LayerPlan const p = make_layer_plan(c, *fi);
  BOOST_TEST((p.at(Kernel::kFinalize).trigger == fi->default_trigger));
  BOOST_TEST(p.at(Kernel::kFinalize).released);
  BOOST_TEST(!p.snapshot); // it cannot record what it read
  BOOST_TEST(p.finalize_meta_before_wait());
  for (LaunchDescriptor const& d : layer_launches(p, RunFlags{}))
    BOOST_TEST(!d.snapshot);
  c.metadata_before_wait = false;
  BOOST_CHECK_THROW(make_layer_plan(c, *fi), InputError);
}

BOOST_AUTO_TEST_CASE(verifier_on_the_released_presets) {
  for (bool graph : {true, false}) {
    BOOST_TEST((verify_cell(released(Preset::kSeedAfter), small_batch(), graph).chain ==
                pdl::Verdict::kOrdered));
    BOOST_TEST((verify_cell(released(Preset::kSafe), small_batch(), graph).chain ==
                pdl::Verdict::kOrdered));
    // Every kernel in between triggers at entry and the released routing triggers before its
    // writes: finalize's early reads race with them.
    auto const v = verify_cell(released(Preset::kAllEarly), small_batch(), graph);
    BOOST_TEST((v.chain == pdl::Verdict::kRace));
    BOOST_TEST((v.metadata == pdl::Verdict::kRace));
    // GEMM1 waiting before it triggers orders them again.
    ChainConfig c = released(Preset::kAllEarly);
    c.at(Kernel::kGemm1).trigger = Trigger::kAfterWait;
    BOOST_TEST((verify_cell(c, small_batch(), graph).metadata == pdl::Verdict::kOrdered));
  }
}

BOOST_AUTO_TEST_CASE(race_cells_of_the_released_flavour) {
  race::Axes a;
  a.presets = {Preset::kSeedAfter, Preset::kAllEarly, Preset::kSafe};
  a.delays = {0};
  a.flavour = "released";
  auto const cs = race::cells(a);
  BOOST_REQUIRE(!cs.empty());
  std::vector<std::string> keys;
  for (auto const& c : cs) {
    BOOST_TEST(c.cfg.flavour == "released");
    BOOST_TEST((c.cfg.trigger(Kernel::kPermute) == Trigger::kEntry), c.key);
    BOOST_TEST((c.cfg.trigger(Kernel::kActivation) == Trigger::kEntry), c.key);
    keys.push_back(c.key);
  }
  std::sort(keys.begin(), keys.end());
  BOOST_TEST((std::adjacent_find(keys.begin(), keys.end()) == keys.end())); // no duplicate cell
  a.flavour = "moefin";
  BOOST_TEST(race::cells(a).size() > cs.size()); // moefin's permute/act placements are swept too
  a.flavour = "released";
  a.delays = {0, 25000};
  BOOST_CHECK_THROW(race::cells(a), InputError); // routing is the delayed kernel by default
  a.delay_kernels = {Kernel::kGemm1};
  BOOST_CHECK_NO_THROW(race::cells(a));
}

BOOST_AUTO_TEST_CASE(command_line) {
  auto const bogus = run("race --flavour fused --list");
  BOOST_TEST(bogus.status == 2, bogus.out);
  BOOST_TEST(bogus.out.find("--flavour") != std::string::npos, bogus.out);
  bool const built = released_kernels() != nullptr;
  for (char const* cmd : {"race --delay-ns 0", "equivalence", "sweep layer"}) {
    auto const r = run(std::string(cmd) + " --flavour released --list");
    if (built) {
      BOOST_TEST(r.status == 0, r.out);
    } else {
      BOOST_TEST(r.status == 2, r.out);
      BOOST_TEST(r.out.find("lacks the released FlashInfer kernels") != std::string::npos, r.out);
    }
  }
  if (built) {
    auto const d = run("race --flavour released --list"); // default delays delay routing
    BOOST_TEST(d.status == 2, d.out);
    BOOST_TEST(d.out.find("--delay-kernels") != std::string::npos, d.out);
    auto const e = run("equivalence --flavour released --delay-ns 25000 --list");
    BOOST_TEST(e.status == 2, e.out);
  }
}
