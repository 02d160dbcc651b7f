#define BOOST_TEST_MODULE layer_plan
#include <boost/test/unit_test.hpp>

// The layer plan is the one description of what the chain's kernels do around their waits: the
// launch descriptors the CUDA enqueue executes (kernels/chain/chain_launches.hpp, through
// finalize's own dispatcher for finalize) and the chain the verifier checks
// (core/chain/verifier_chain.hpp) must both say what it says, for every race-matrix cell and
// every finalize variant the chain can run.

#include "core/chain/presets.hpp"
#include "core/chain/verifier_chain.hpp"
#include "core/ops/layer_plan.hpp"
#include "experiments/chain/race_cells.hpp"
#include "kernels/chain/chain_launches.hpp"
#include "kernels/finalize/finalize.hpp"

#include <string>
#include <vector>

using namespace moefin;
using namespace moefin::chain;

namespace {

/// What a launch descriptor makes the kernel do: its trigger, and (finalize, through its
/// dispatcher's plan) whether it reads the metadata before the wait.
struct Launched {
  Trigger trigger = Trigger::kDefault;
  bool pdl = true;
  std::int64_t delay_ns = 0;
  bool meta_before_wait = false;
};

Launched launched(LaunchDescriptor const& d) {
  Launched l{d.knobs.trigger, d.knobs.pdl, d.knobs.delay_ns, false};
  if (d.kernel == Kernel::kFinalize) {
    alignas(16) static std::uint16_t buffer[8];
    finalize::FinalizeParams p;
    p.num_tokens = 4;
    p.hidden = 1024;
    p.hidden_padded = 1024;
    p.top_k = 8;
    p.num_rows = 32;
    p.gemm_out = buffer;
    p.out = buffer;
    p.expanded_to_permuted = reinterpret_cast<std::int32_t const*>(buffer);
    p.expert_weights = buffer;
    finalize::LaunchPlan const lp = finalize::plan(p, d.finalize);
    l.trigger = lp.trigger;
    l.meta_before_wait = lp.meta_before_wait;
  }
  return l;
}

/// The trigger a verifier path places, and the buffers it reads before its wait.
struct Verified {
  Trigger trigger = Trigger::kExit;
  std::vector<std::string> pre_wait;
};

Verified verified(pdl::Chain const& c, std::size_t kernel) {
  pdl::Path const& p = c.kernels.at(kernel).paths.at(0);
  Verified v;
  int const wait = pdl::first_of(p, pdl::OpKind::kWait);
  int const trigger = pdl::first_of(p, pdl::OpKind::kTrigger);
  int const last = static_cast<int>(p.size()) - 1;
  v.trigger = trigger < 0           ? Trigger::kExit
              : trigger < wait      ? Trigger::kEntry
              : trigger == wait + 1 ? Trigger::kAfterWait
              : trigger == last     ? Trigger::kAfterWrites
                                    : Trigger::kDefault;
  for (int i = 0; i < (wait < 0 ? last + 1 : wait); ++i)
    if (p[static_cast<std::size_t>(i)].kind == pdl::OpKind::kRead)
      v.pre_wait.push_back(
          c.buffers.at(static_cast<std::size_t>(p[static_cast<std::size_t>(i)].buffer)));
  return v;
}

std::vector<std::string> names(std::vector<Buffer> const& bs) {
  std::vector<std::string> out;
  for (Buffer b : bs)
    out.push_back(buffer_name(b));
  return out;
}

/// Every difference between the plan, its launches and its verifier chain, one line each.
std::vector<std::string> disagreements(LayerPlan const& plan,
                                       std::vector<LaunchDescriptor> const& launches,
                                       pdl::Chain const& chain) {
  std::vector<std::string> out;
  // The kernels that launch (finalize does not when its variant runs inside GEMM2).
  std::vector<KernelPlan> ks;
  for (KernelPlan const& k : plan.kernels)
    if (k.launched)
      ks.push_back(k);
  if (launches.size() != ks.size() || chain.kernels.size() != ks.size())
    return {"kernel counts differ"};
  for (std::size_t i = 0; i < ks.size(); ++i) {
    KernelPlan const& k = ks[i];
    std::string const who = k.name + " (" + k.impl + ")";
    Launched const l = launched(launches[i]);
    Verified const v = verified(chain, i);
    if (launches[i].kernel != k.kernel || chain.kernels[i].name != k.name)
      out.push_back(who + ": kernel order");
    if (l.trigger != k.trigger)
      out.push_back(who + ": launched trigger " + trigger_name(l.trigger) + ", plan " +
                    trigger_name(k.trigger));
    if (v.trigger != k.trigger)
      out.push_back(who + ": verified trigger " + trigger_name(v.trigger) + ", plan " +
                    trigger_name(k.trigger));
    if (l.pdl != k.pdl || chain.kernels[i].pdl != k.pdl)
      out.push_back(who + ": PDL attribute");
    if (l.delay_ns != k.delay_ns)
      out.push_back(who + ": delay");
    if (v.pre_wait != names(k.reads_before_wait))
      out.push_back(who + ": verified pre-wait reads differ from the plan's");
    bool const fused_gemm =
        plan.finalize->inside_gemm2 && (k.kernel == Kernel::kGemm1 || k.kernel == Kernel::kGemm2);
    if (launches[i].fused != fused_gemm)
      out.push_back(who + ": the launch and the plan disagree on the fused finalize");
    bool const launched_pre_wait = k.kernel == Kernel::kFinalize && l.meta_before_wait;
    if (launched_pre_wait != !k.reads_before_wait.empty())
      out.push_back(who + ": the launch reads " + (launched_pre_wait ? "" : "no ") +
                    "metadata before its wait, the plan says otherwise");
  }
  return out;
}

std::vector<finalize::FinalizeVariant const*> chain_variants() {
  std::vector<finalize::FinalizeVariant const*> out;
  // Released entries keep the released PDL behaviour: cells that move finalize's trigger or
  // metadata read refuse them (tests/test_flashinfer_adapter.cpp).
  for (auto const* v : finalize::variants())
    if (!v->fp8_output && v->source != finalize::Source::kReleased)
      out.push_back(v);
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(launches_and_verifier_chain_say_what_the_plan_says) {
  race::Axes axes;
  axes.presets = {kAllPresets.begin(), kAllPresets.end()};
  axes.full = true;
  axes.delays = {0, 25000};
  axes.delay_kernels = {Kernel::kRouting, Kernel::kGemm1};
  std::size_t checked = 0;
  for (auto const& cell : race::cells(axes))
    for (auto const* v : chain_variants()) {
      LayerPlan const plan = make_layer_plan(cell.cfg, *v);
      for (bool pdl : {true, false}) {
        RunFlags run;
        run.pdl = pdl;
        auto const launches = layer_launches(plan, run);
        if (!pdl) {
          for (auto const& d : launches)
            BOOST_TEST(!d.knobs.pdl, cell.key);
          continue;
        }
        auto const chain = verifier_chain(plan, "test", false);
        auto const diff = disagreements(plan, launches, chain);
        BOOST_TEST(diff.empty(),
                   cell.key << " " << v->name << ": " << (diff.empty() ? "" : diff[0]));
        ++checked;
      }
    }
  BOOST_TEST(checked > 1000u);
}

BOOST_AUTO_TEST_CASE(a_launch_that_strays_from_the_plan_is_caught) {
  ChainConfig const cfg = preset_config(Preset::kSeedAfter);
  LayerPlan const plan = make_layer_plan(cfg, finalize::variant("small_batch", "test"));
  auto const chain = verifier_chain(plan, "test", false);
  auto launches = layer_launches(plan, RunFlags{});
  BOOST_TEST(disagreements(plan, launches, chain).empty());
  auto moved = launches;
  moved[static_cast<int>(Kernel::kGemm1)].knobs.trigger = Trigger::kEntry; // seed-after: exit
  BOOST_TEST(disagreements(plan, moved, chain).size() == 1u);
  auto late_meta = launches;
  late_meta[static_cast<int>(Kernel::kFinalize)].finalize.metadata_before_wait = false;
  BOOST_TEST(disagreements(plan, late_meta, chain).size() == 1u);
  auto other = launches;
  other[static_cast<int>(Kernel::kFinalize)].finalize.variant =
      &finalize::variant("small_batch_meta_after_wait", "test"); // reads after its wait
  BOOST_TEST(disagreements(plan, other, chain).size() == 1u);
}

BOOST_AUTO_TEST_CASE(wide_gemms_launch_only_the_fp4_decode_gemms_wide) {
  // RunFlags::wide_gemms marks GEMM1 and GEMM2 of the decode-fp4 flavour, no other launch, and
  // nothing of a bf16 flavour; the verifier's view of the chain does not change.
  ChainConfig const cfg = preset_config(Preset::kSeedAfter);
  finalize::FinalizeVariant const& fin = finalize::variant("small_batch", "test");
  for (char const* format : {"bf16-tiled", "bf16", "fp4"}) {
    LayerPlan const plan = make_layer_plan(cfg, fin, *flavour_for_format(format));
    RunFlags wide;
    wide.wide_gemms = true;
    auto const launches = layer_launches(plan, wide);
    bool const fp4 = std::string(format) == "fp4";
    int marked = 0;
    for (auto const& d : launches) {
      bool const gemm = d.kernel == Kernel::kGemm1 || d.kernel == Kernel::kGemm2;
      BOOST_TEST(d.wide == (fp4 && gemm), format << " " << d.impl);
      marked += d.wide ? 1 : 0;
    }
    BOOST_TEST(marked == (fp4 ? 2 : 0), format);
    for (auto const& d : layer_launches(plan, RunFlags{}))
      BOOST_TEST(!d.wide, format << " " << d.impl);
    BOOST_TEST(disagreements(plan, launches, verifier_chain(plan, "test", false)).empty());
  }
}

BOOST_AUTO_TEST_CASE(the_plan_names_every_implementation_and_the_weight_format) {
  LayerPlan const plan =
      make_layer_plan(preset_config(Preset::kSafe), finalize::variant("vecload", "test"));
  BOOST_TEST(plan.flavour == "moefin");
  BOOST_TEST(plan.weights == "bf16");
  std::vector<std::string> impls;
  for (auto const& k : plan.kernels)
    impls.push_back(k.impl);
  BOOST_TEST((impls == std::vector<std::string>{"moefin.routing", "moefin.permute",
                                                "moefin.grouped_gemm.bf16", "moefin.activation",
                                                "moefin.grouped_gemm.bf16", "vecload",
                                                "moefin.checksum"}));
  // A flavour replaces implementations kernel by kernel; finalize stays the registry entry's.
  ChainFlavour f = moefin_flavour();
  f.name = "test";
  f.kernels[2].name = "test.gemm1";
  f.kernels[2].reads_before_wait = {Buffer::kW1}; // a GEMM prefetching its weights
  f.kernels[2].reads_after_wait.pop_back();
  LayerPlan const other =
      make_layer_plan(preset_config(Preset::kSafe), finalize::variant("vecload", "test"), f);
  BOOST_TEST(other.at(Kernel::kGemm1).impl == "test.gemm1");
  auto const v = verified(verifier_chain(other, "test", false), 2);
  BOOST_TEST((v.pre_wait == std::vector<std::string>{"w1"}));
  BOOST_TEST((pdl::verify(verifier_chain(other, "test", false), {false}).verdict() ==
              pdl::Verdict::kOrdered)); // the weights are written before the batch
}

BOOST_AUTO_TEST_CASE(each_weights_format_names_its_flavour_and_gemm_launcher) {
  ChainConfig const cfg = preset_config(Preset::kSeedAfter);
  auto const& fin = finalize::variant("small_batch", "test");
  struct Expect {
    char const* format;
    char const* flavour;
    char const* weights;
    char const* gemm;
  };
  for (Expect const& e : {Expect{"bf16-tiled", "moefin", "bf16", kTiledGemmBf16},
                          Expect{"bf16", "decode-bf16", "bf16", kDecodeGemmBf16},
                          Expect{"fp4", "decode-fp4", "fp4", kDecodeGemmFp4}}) {
    ChainFlavour const* f = flavour_for_format(e.format);
    BOOST_TEST_REQUIRE(f != nullptr, e.format);
    LayerPlan const plan = make_layer_plan(cfg, fin, *f);
    BOOST_TEST(plan.flavour == e.flavour);
    BOOST_TEST(plan.weights == e.weights);
    for (Kernel k : {Kernel::kGemm1, Kernel::kGemm2}) {
      KernelPlan const& g = plan.at(k);
      BOOST_TEST(g.impl == e.gemm);
      // The decode GEMM in the chain: the tiled GEMM's contract (no weights_before_wait).
      BOOST_TEST((g.trigger == Trigger::kExit));
      BOOST_TEST(g.reads_before_wait.empty());
      BOOST_TEST((g.reads_after_wait ==
                  moefin_flavour().kernels[static_cast<std::size_t>(k)].reads_after_wait));
    }
    // The launches carry the implementation the plan names (chain.cu picks the launcher by it).
    auto const launches = layer_launches(plan, RunFlags{});
    BOOST_TEST_REQUIRE(launches.size() == plan.kernels.size());
    for (std::size_t i = 0; i < launches.size(); ++i)
      BOOST_TEST(launches[i].impl == plan.kernels[i].impl);
    // The decode flavours route with the decode routing, which reads the scores only (the
    // block kernel also reads back the expert ids it wrote).
    KernelPlan const& r = plan.at(Kernel::kRouting);
    bool const decode = e.flavour != "moefin";
    BOOST_TEST(r.impl == (decode ? kFastRouting : "moefin.routing"));
    BOOST_TEST((r.trigger == moefin_flavour().kernels[0].default_trigger));
    // Else the verifier sees the tiled flavour's chain: the race verdicts do not move.
    ChainFlavour tiled = moefin_flavour();
    if (decode)
      tiled.kernels[0].reads_after_wait = {Buffer::kScores};
    BOOST_TEST(pdl::to_json(verifier_chain(plan, "t", true)) ==
               pdl::to_json(verifier_chain(make_layer_plan(cfg, fin, tiled), "t", true)));
  }
  BOOST_TEST(flavour_for_format("nvfp4") == nullptr);
  BOOST_TEST((weights_format_names() == std::vector<std::string>{"bf16-tiled", "bf16", "fp4"}));
}
