#define BOOST_TEST_MODULE fused_finalize
#include <boost/test/unit_test.hpp>

// The finalize inside GEMM2 on the host: its layer plan (no finalize launch; GEMM2 takes
// finalize's reads and writes, GEMM1 clears the arrival counters), the launches and the verifier
// chain that follow from it, the verifier's verdicts on every race-matrix cell, and the commands
// that take it. The GPU side is tests/test_fused_gpu.cpp.

#include "core/chain/presets.hpp"
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
using moefin::test::contains;
using moefin::test::run;

namespace {

finalize::FinalizeVariant const& fused() {
  return finalize::variant("fused", "test");
}

bool has(std::vector<Buffer> const& v, Buffer b) {
  return std::find(v.begin(), v.end(), b) != v.end();
}

} // namespace

BOOST_AUTO_TEST_CASE(the_plan_moves_finalize_into_gemm2) {
  BOOST_TEST(fused().inside_gemm2);
  BOOST_TEST(fused().in_list(finalize::kListChain));
  BOOST_TEST(!fused().in_list(finalize::kListCheck)); // no launch of its own to check alone
  LayerPlan const p = make_layer_plan(preset_config(Preset::kSeedAfter), fused());
  KernelPlan const& f = p.at(Kernel::kFinalize);
  KernelPlan const& g1 = p.at(Kernel::kGemm1);
  KernelPlan const& g2 = p.at(Kernel::kGemm2);
  BOOST_TEST(!f.launched);
  BOOST_TEST(f.reads_before_wait.empty());
  BOOST_TEST(f.reads_after_wait.empty());
  BOOST_TEST(f.writes.empty());
  BOOST_TEST(!p.meta_allowed); // no finalize, no snapshot
  BOOST_TEST((p.metadata_reader() == Kernel::kGemm2));
  BOOST_TEST(g2.reads_before_wait.empty());
  for (Buffer b : {Buffer::kExpandedToPermuted, Buffer::kExpertWeights, Buffer::kFusedCounters,
                   Buffer::kPermutedToToken, Buffer::kActOut})
    BOOST_TEST(has(g2.reads_after_wait, b), buffer_name(b));
  for (Buffer b : {Buffer::kGemm2Out, Buffer::kOut, Buffer::kFusedCounters})
    BOOST_TEST(has(g2.writes, b), buffer_name(b));
  BOOST_TEST(has(g1.writes, Buffer::kFusedCounters));
  BOOST_TEST(g2.impl == "moefin.grouped_gemm.bf16+fused");
  BOOST_TEST(g1.impl == "moefin.grouped_gemm.bf16+clear_counters");
  // A separate finalize leaves the GEMMs as they are.
  LayerPlan const s =
      make_layer_plan(preset_config(Preset::kSeedAfter), finalize::variant("small_batch", "test"));
  BOOST_TEST(s.at(Kernel::kFinalize).launched);
  BOOST_TEST(!has(s.at(Kernel::kGemm2).writes, Buffer::kOut));
  BOOST_TEST(!has(s.at(Kernel::kGemm1).writes, Buffer::kFusedCounters));
  BOOST_TEST((s.metadata_reader() == Kernel::kFinalize));
}

BOOST_AUTO_TEST_CASE(launches_and_the_verifier_chain_have_no_finalize) {
  LayerPlan const p = make_layer_plan(preset_config(Preset::kSeedAfter), fused());
  for (bool checked : {true, false}) {
    RunFlags run;
    run.checked = checked;
    auto const l = layer_launches(p, run);
    BOOST_TEST_REQUIRE(l.size() == (checked ? 6u : 5u));
    for (auto const& d : l) {
      BOOST_TEST((d.kernel != Kernel::kFinalize));
      BOOST_TEST(d.fused == (d.kernel == Kernel::kGemm1 || d.kernel == Kernel::kGemm2));
      BOOST_TEST(!d.snapshot);
    }
  }
  auto const c = verifier_chain(p, "test", false);
  BOOST_TEST(c.kernels.size() == 6u);
  for (auto const& k : c.kernels)
    BOOST_TEST(k.name != "finalize");
  BOOST_TEST(c.buffer_index("fused_counters") >= 0);
}

BOOST_AUTO_TEST_CASE(every_race_matrix_cell_is_ordered_with_the_reduction_in_gemm2) {
  // GEMM2 reads routing's metadata after its wait: no placement of the kernels in between, no
  // metadata placement and no delay makes it race, where the separate small_batch does in the
  // benchmark cells.
  race::Axes axes;
  axes.presets = {kAllPresets.begin(), kAllPresets.end()};
  axes.full = true;
  axes.delays = {0, 25000};
  axes.finalize = FinalizeChoice::of(fused());
  std::size_t cells = 0, separate_races = 0;
  for (auto const& cell : race::cells(axes))
    for (bool graph : {true, false}) {
      CellVerdict const v = verify_cell(cell.cfg, fused(), graph);
      BOOST_TEST((v.chain == pdl::Verdict::kOrdered), cell.key << " graph " << graph);
      BOOST_TEST((v.metadata == pdl::Verdict::kOrdered), cell.key);
      BOOST_TEST(v.pairs > 0u);
      ++cells;
      if (cell.benchmark)
        separate_races +=
            verify_cell(cell.cfg, finalize::variant("small_batch", "test"), graph).metadata ==
            pdl::Verdict::kRace;
    }
  BOOST_TEST(cells > 500u);
  BOOST_TEST(separate_races > 0u);
}

BOOST_AUTO_TEST_CASE(the_verifier_catches_a_fused_gemm_that_does_not_wait) {
  ChainConfig const cfg = preset_config(Preset::kAllEarly);
  LayerPlan p = make_layer_plan(cfg, fused());
  BOOST_TEST(
      (pdl::verify(verifier_chain(p, "test", true), {false}).verdict() == pdl::Verdict::kOrdered));
  // GEMM2 reducing without its wait: its metadata reads race with routing, its counting with
  // GEMM1's clear.
  LayerPlan no_wait = p;
  no_wait.kernels.at(static_cast<std::size_t>(Kernel::kGemm2)).waits = false;
  pdl::Chain const c = verifier_chain(no_wait, "test", false);
  auto const r = pdl::verify(c, {false});
  BOOST_TEST((r.verdict() == pdl::Verdict::kRace));
  for (char const* b : {"fused_counters", "expanded_to_permuted"}) {
    bool raced = false;
    for (auto const& pair : r.pairs)
      raced = raced || (pair.key.buffer == c.buffer_index(b) && !pair.ordered);
    BOOST_TEST(raced, b);
  }
}

BOOST_AUTO_TEST_CASE(the_fused_variant_has_no_launch_of_its_own) {
  alignas(16) static std::uint16_t buffer[8];
  finalize::FinalizeParams p;
  p.num_tokens = 1;
  p.hidden = 1024;
  p.hidden_padded = 1024;
  p.top_k = 8;
  p.num_rows = 16;
  p.gemm_out = buffer;
  p.out = buffer;
  p.expanded_to_permuted = reinterpret_cast<std::int32_t const*>(buffer);
  p.expert_weights = buffer;
  finalize::Options o;
  o.variant = &fused();
  try {
    finalize::plan(p, o);
    BOOST_ERROR("planning the fused variant alone did not throw");
  } catch (InputError const& e) {
    BOOST_TEST(contains(e.what(), "inside GEMM2"), e.what());
  }
}

BOOST_AUTO_TEST_CASE(the_commands_take_the_fused_finalize) {
  auto const d = run("race --describe --shapes top-8 --tokens 1 --presets all-early --set "
                     "finalize.variant=fused");
  BOOST_TEST(d.status == 0, d.out);
  BOOST_TEST(contains(d.out, "(benchmark): finalize fused, verifier ordered"), d.out);
  BOOST_TEST(!contains(d.out, "verifier race"), d.out);
  auto const l = run("sweep layer --list --shapes top-8 --tokens 1,16 --finalize new,fused");
  BOOST_TEST(l.status == 0, l.out);
  for (char const* row :
       {"T=16,finalize=fused,placement=seed-after", "T=1,finalize=new,placement=seed-before",
        "T=1,finalize=previous,placement=seed-after"})
    BOOST_TEST(contains(l.out, row), l.out);
  BOOST_TEST(!contains(l.out, "finalize=small_batch_v2"), l.out);
  auto const all = run("sweep layer --list --shapes top-8 --tokens 1");
  BOOST_TEST(contains(all.out, "finalize=fused,placement=seed-after"), all.out);
  auto const e = run("equivalence --list --shapes top-8 --tokens 1 --presets seed-after --set "
                     "finalize.variant=fused");
  BOOST_TEST(e.status == 0, e.out);
  BOOST_TEST(contains(e.out, "set=finalize.variant=fused"), e.out);
  auto const bad = run("sweep layer --list --finalize fastest");
  BOOST_TEST(bad.status == 2, bad.out);
  BOOST_TEST(contains(bad.out, "--finalize"), bad.out);
  BOOST_TEST(contains(bad.out, "fused"), bad.out); // the names it takes
}

BOOST_AUTO_TEST_CASE(the_fused_plan_keeps_the_tiled_gemms) {
  LayerPlan const p = make_layer_plan(preset_config(Preset::kSeedAfter), fused());
  BOOST_TEST(p.tiled_gemms()); // chain.cu and the reference chain run the tiled GEMM's kernels
  BOOST_TEST(p.flavour == "moefin");
  BOOST_TEST(!p.snapshot);
  BOOST_TEST(!p.repoison);
  for (auto const& d : layer_launches(p, RunFlags{}))
    BOOST_TEST(!d.released);
  for (char const* format : {"bf16", "fp4"}) {
    LayerPlan const d = make_layer_plan(preset_config(Preset::kSeedAfter),
                                        finalize::variant("small_batch", "test"),
                                        *flavour_for_format(format));
    BOOST_TEST(!d.tiled_gemms(), format);
  }
}

BOOST_AUTO_TEST_CASE(the_fused_finalize_refuses_what_it_cannot_run_with) {
  // The split-K decode GEMMs as GEMM1/GEMM2: each names --weights-format and its value.
  for (char const* format : {"bf16", "fp4"}) {
    try {
      make_layer_plan(preset_config(Preset::kSeedAfter), fused(), *flavour_for_format(format));
      BOOST_ERROR("the fused plan took --weights-format " << format);
    } catch (InputError const& e) {
      std::string const w = e.what();
      BOOST_TEST(contains(w, std::string("--weights-format ") + format + " "), w);
      BOOST_TEST(contains(w, "finalize fused"), w);
      BOOST_TEST(w.find('\n') == std::string::npos, w);
    }
    // A separate finalize keeps running on them.
    BOOST_CHECK_NO_THROW(make_layer_plan(preset_config(Preset::kSeedAfter),
                                         finalize::variant("small_batch", "test"),
                                         *flavour_for_format(format)));
  }
  // The released flavour around the tiled GEMMs.
  ChainConfig released = preset_config(Preset::kSeedAfter);
  set_flavour(released, "released");
  try {
    make_layer_plan(released, fused());
    BOOST_ERROR("the fused plan took --flavour released");
  } catch (InputError const& e) {
    BOOST_TEST(contains(e.what(), "--flavour released"), e.what());
    BOOST_TEST(contains(e.what(), "finalize fused"), e.what());
  }
  BOOST_TEST(inside_gemm2_refusal("released", finalize::variant("small_batch", "test"),
                                  moefin_flavour())
                 .empty());
  BOOST_TEST(inside_gemm2_refusal("moefin", fused(), moefin_flavour()).empty());
}

BOOST_AUTO_TEST_CASE(the_commands_refuse_the_fused_finalize_on_decode_gemms) {
  auto const r = run("race --describe --shapes top-8 --tokens 1 --presets seed-after "
                     "--weights-format fp4 --set finalize.variant=fused");
  BOOST_TEST(r.status == 2, r.out);
  BOOST_TEST(contains(r.out, "--weights-format fp4"), r.out);
  auto const s =
      run("sweep layer --list --shapes top-8 --tokens 1 --weights-format bf16 --finalize fused");
  BOOST_TEST(s.status == 2, s.out);
  BOOST_TEST(contains(s.out, "--weights-format bf16 "), s.out);
  // "all" leaves fused out when one of the formats cannot take it, keeps it otherwise.
  auto const a = run("sweep layer --list --shapes top-8 --tokens 1 --weights-format bf16-tiled,fp4");
  BOOST_TEST_REQUIRE(a.status == 0, a.out);
  BOOST_TEST(!contains(a.out, "finalize=fused"), a.out);
  BOOST_TEST(contains(a.out, "finalize=previous,placement=seed-after,weights_format=fp4"), a.out);
  auto const t = run("sweep layer --list --shapes top-8 --tokens 1 --weights-format bf16-tiled");
  BOOST_TEST_REQUIRE(t.status == 0, t.out);
  BOOST_TEST(contains(t.out, "finalize=fused,placement=seed-after"), t.out);
}
