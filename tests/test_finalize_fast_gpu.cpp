#include "tests/gpu_main.hpp"

// The fast finalize paths on a GPU: lean instantiations bitwise equal to the instrumented ones,
// small_batch_v2 (every measured geometry and every ablation) against the Kokkos reference and
// deterministic, its knobs leaving the bits alone, and small_batch_v2 inside the layer chain:
// the same bits with PDL on and off and on every replay, no stale pre-wait read.

#include "core/chain/presets.hpp"
#include "core/chain/shape.hpp"
#include "core/rng.hpp"
#include "experiments/chain/run.hpp"
#include "experiments/finalize/device_case.hpp"
#include "experiments/finalize/verify.hpp"
#include "kernels/chain/chain.hpp"
#include "kernels/finalize/finalize.hpp"
#include "kernels/finalize/small_batch_v2.hpp"
#include "reference/kokkos_env.hpp"

using namespace moefin;
using finalize::Options;
using finalize::WeightType;

namespace {

struct KokkosFixture {
  reference::KokkosSession session;
};
BOOST_TEST_GLOBAL_FIXTURE(KokkosFixture);

struct Case {
  fin::Shape shape;
  std::string routing = "uniform";
};

std::string describe(Case const& c) {
  return fin::shape_key(c.shape) + ",routing=" + c.routing;
}

fin::HostCase host_case(Case const& c) {
  fin::RowPool pool(c.shape.hidden, c.shape.hidden, 77);
  return fin::make_case(c.shape, c.shape.hidden, fin::parse_routing_case("routing", c.routing),
                        fin::case_seed(2027, describe(c)), pool, /*with_scales=*/true);
}

std::vector<Case> v2_cases() {
  return {
      {{1024, 1, 1, WeightType::kBf16}},
      {{4096, 1, 6, WeightType::kFp32}, "uniform/ep2"},
      {{7168, 2, 8, WeightType::kBf16}},
      {{2880, 3, 10, WeightType::kNone}, "uniform/ep4"},
      {{5120, 4, 22, WeightType::kBf16}, "zipf/ep2"},
      {{6144, 8, 32, WeightType::kFp32}},
      {{2048, 5, 33, WeightType::kBf16}, "uniform/ep2"}, // two metadata registers per lane
      {{3584, 2, 64, WeightType::kFp32}, "uniform/ep2"},
      {{1024, 300, 16, WeightType::kBf16}}, // beyond the policy table: the rule
  };
}

} // namespace

BOOST_AUTO_TEST_CASE(lean_and_instrumented_instantiations_give_the_same_bits) {
  dev::Stream stream;
  for (Case const& c :
       {Case{{4096, 3, 8, WeightType::kBf16}, "uniform/ep2"},
        Case{{2048, 9, 22, WeightType::kFp32}}, Case{{1024, 5, 6, WeightType::kNone}}}) {
    auto const host = host_case(c);
    fin::DeviceCase d(host);
    for (auto const* v : finalize::variants(finalize::kListCheck)) {
      if (v->source != finalize::Source::kMoefin) // released kernels have no lean instantiations
        continue;
      std::string const& name = v->name;
      BOOST_TEST_CONTEXT(name << " on " << describe(c)) {
        Options lean = fin::variant_options(name);
        BOOST_TEST(finalize::plan(d.params, lean).lean, "the knob-free launch is not lean");
        Options instr = lean;
        instr.force_instrumented = true;
        BOOST_TEST(!finalize::plan(d.params, instr).lean);
        if (lean.variant->fp8_output) {
          auto const a = fin::run_fp8(d, lean, stream.get());
          auto const b = fin::run_fp8(d, instr, stream.get());
          BOOST_TEST((a.q == b.q));
          BOOST_TEST((a.scales == b.scales));
        } else {
          BOOST_TEST(
              (fin::run_bf16(d, lean, stream.get()) == fin::run_bf16(d, instr, stream.get())));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(small_batch_v2_every_geometry_matches_the_reference_and_repeats_its_bits) {
  dev::Stream stream;
  for (auto const& c : v2_cases()) {
    auto const host = host_case(c);
    auto const expected = fin::expected_of(host, false);
    fin::DeviceCase d(host);
    std::vector<std::string> names = {"small_batch_v2",
                                      "small_batch_v2_late_trigger",
                                      "small_batch_v2_no_shuffle",
                                      "small_batch_v2_no_broadcast",
                                      "small_batch_v2_anchor",
                                      "small_batch_v2_fi_layout",
                                      "small_batch_v2_fi_geometry"};
    for (auto const& g : finalize::v2::candidates(c.shape.top_k)) {
      names.push_back(finalize::v2::candidate_name(g.chunks, g.loads));
      names.push_back(finalize::v2::candidate_name(g.chunks, g.loads, Trigger::kEntry, true));
    }
    for (auto const& name : names) {
      BOOST_TEST_CONTEXT(name << " on " << describe(c)) {
        Options const o = fin::variant_options(name);
        auto const first = fin::run_bf16(d, o, stream.get());
        auto const v = fin::verify_bf16(first, expected);
        BOOST_TEST(v.pass, v.detail);
        for (int rep = 0; rep < 3; ++rep)
          BOOST_TEST((fin::run_bf16(d, o, stream.get()) == first), "run " << rep);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(small_batch_v2_knobs_leave_the_bits_and_record_what_they_promise) {
  dev::Stream stream;
  Case const c{{4096, 6, 16, WeightType::kBf16}, "uniform/ep2"};
  auto const host = host_case(c);
  fin::DeviceCase d(host);
  Options const base = fin::variant_options("small_batch_v2");
  auto const want = fin::run_bf16(d, base, stream.get());
  auto const lp = finalize::plan(d.params, base);
  dev::Buffer stamps(static_cast<std::size_t>(lp.ctas()) * 4 * sizeof(std::int64_t));
  dev::Buffer snap(host.layout.expanded_to_permuted.size() * sizeof(std::int32_t));
  for (Trigger t : {Trigger::kExit, Trigger::kEntry, Trigger::kAfterWait, Trigger::kAfterWrites})
    for (bool meta_before : {true, false}) {
      BOOST_TEST_CONTEXT("trigger " << trigger_name(t) << " meta_before " << meta_before) {
        Options o = base;
        o.pdl.trigger = t;
        o.pdl.delay_ns = 1500;
        o.pdl.stamps = stamps.get<std::int64_t>();
        o.metadata_before_wait = meta_before;
        o.pre_wait_snapshot = snap.get<std::int32_t>();
        stamps.fill(0, stream.get());
        snap.fill(0x7f, stream.get());
        BOOST_TEST(!finalize::plan(d.params, o).lean);
        BOOST_TEST((fin::run_bf16(d, o, stream.get()) == want));
        BOOST_TEST((snap.download<std::int32_t>(stream.get()) == host.layout.expanded_to_permuted));
        auto const s = stamps.download<std::int64_t>(stream.get());
        std::int64_t bad = 0;
        for (std::int64_t i = 0; i < lp.ctas(); ++i) {
          auto const* x = s.data() + 4 * i;
          bad += !(x[0] > 0 && x[1] >= x[0] && x[3] >= x[1] &&
                   (t == Trigger::kExit ? x[2] == -1 : x[2] >= x[0] && x[2] <= x[3]) &&
                   x[3] - x[0] >= 1500);
        }
        BOOST_TEST(bad == 0, bad << " of " << lp.ctas() << " CTAs with inconsistent stamps");
      }
    }
}

BOOST_AUTO_TEST_CASE(small_batch_v2_in_the_chain_is_pdl_on_off_bitwise_and_reads_nothing_stale) {
  using namespace moefin::chain;
  for (std::string name : {"H512/I256/E32/top-6", "H256/I128/E40/top-8/relu2"}) {
    LayerShape const s = parse_shape(name);
    LayerWeights const w(s, 11);
    for (std::int64_t T : {1, 4, 17}) {
      RunnerOptions ro;
      ro.tokens = T;
      ro.iterations = 32;
      ChainRunner r(w, ro);
      std::vector<std::uint64_t> seeds;
      for (int i = 0; i < ro.iterations; ++i)
        seeds.push_back(routing_seed(2027, s, T, i));
      r.set_routings(seeds);
      BOOST_TEST_CONTEXT(name << " T=" << T) {
        ChainConfig previous = preset_config(Preset::kSeedAfter);
        apply_overrides(previous, "finalize.variant=previous");
        ChainConfig v2 = preset_config(Preset::kSeedAfter);
        apply_overrides(v2, "finalize.variant=small_batch_v2");
        BOOST_TEST(r.finalize_variant(v2).name == "small_batch_v2");
        auto const x = r.run_batch(v2, true), x_off = r.run_batch(v2, false);
        auto const b = r.run_batch(previous, true);
        int differ = 0;
        for (int it = 0; it < ro.iterations; ++it)
          differ += x.slot(it, Buffer::kGemm2Out) != b.slot(it, Buffer::kGemm2Out);
        BOOST_TEST(differ == 0, differ << " iterations whose GEMM2 output differs");
        BOOST_TEST((x.slots == x_off.slots));                 // every buffer, PDL on vs off
        BOOST_TEST((r.run_batch(v2, true).slots == x.slots)); // replays repeat the bits
        BOOST_TEST(x.stale == std::vector<std::int32_t>(x.stale.size(), 0), "stale pre-wait reads");
      }
    }
  }
}
