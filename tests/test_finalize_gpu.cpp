#include "tests/gpu_main.hpp"

// Every finalize variant on a GPU against the Kokkos reference, on the edges of the shapes it
// serves, and the properties the PDL experiments rely on: outputs bitwise equal with PDL on and
// off and under every trigger placement and injected delay, a deterministic combine, complete
// stamps and snapshots, and launches that can be captured in a CUDA graph.

#include "experiments/finalize/device_case.hpp"
#include "experiments/finalize/verify.hpp"
#include "kernels/finalize/finalize.hpp"
#include "reference/kokkos_env.hpp"
#include "tests/finalize_case.hpp"

#include <algorithm>
#include <memory>

using namespace moefin;
using finalize::Options;
using finalize::WeightType;

namespace {

struct KokkosFixture {
  reference::KokkosSession session;
};
BOOST_TEST_GLOBAL_FIXTURE(KokkosFixture);

using Case = test::FinalizeCase;
using test::describe;

fin::HostCase host_case(Case const& c) {
  return test::host_case(c, 2026);
}

bool vectorized(Options const& o) {
  return o.variant->needs_128bit_rows;
}

/// Sums in ascending k with rounded products: bitwise equal to reference::finalize.
bool ascending_order(std::string const& name) {
  return name == "scalar" || name == "vecload" || name == "small_batch_nosplit";
}

std::vector<Case> edge_cases() {
  return test::finalize_edge_cases();
}

} // namespace

BOOST_AUTO_TEST_CASE(every_variant_matches_the_reference_on_edge_shapes) {
  dev::Stream stream;
  for (auto const& c : edge_cases()) {
    auto const host = host_case(c);
    auto const expected = fin::expected_of(host, true);
    fin::DeviceCase d(host);
    bool const aligned = c.shape.hidden % 8 == 0 && (c.shape.hidden + c.pad) % 8 == 0;
    for (auto const& name : fin::check_variant_names()) {
      BOOST_TEST_CONTEXT(name << " on " << describe(c)) {
        Options const o = fin::variant_options(name);
        if (vectorized(o) && !aligned) {
          BOOST_CHECK_THROW(finalize::run(d.params, o, stream.get()), InputError);
          continue;
        }
        fin::Verdict v;
        if (o.variant->fp8_output) {
          auto const out = fin::run_fp8(d, o, stream.get());
          v = fin::verify_fp8(out.q, out.scales, expected);
        } else {
          v = fin::verify_bf16(fin::run_bf16(d, o, stream.get()), expected);
          if (ascending_order(name))
            BOOST_TEST(v.ulp_max == 0, "not bitwise equal to reference::finalize: " << v.detail);
        }
        BOOST_TEST(v.pass, v.detail);
        if (c.all_dropped)
          BOOST_TEST(v.max_abs_err == 0.0, "every expert dropped must give zeros: " << v.detail);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(auto_dispatch_falls_back_to_scalar_on_unaligned_rows) {
  dev::Stream stream;
  Case const c{{1002, 300, 8, WeightType::kBf16}};
  auto const host = host_case(c);
  fin::DeviceCase d(host);
  BOOST_TEST(finalize::select(d.params, Options{}).name == "scalar");
  auto const v =
      fin::verify_bf16(fin::run_bf16(d, Options{}, stream.get()), fin::expected_of(host, false));
  BOOST_TEST(v.pass, v.detail);
  BOOST_TEST(v.ulp_max == 0, v.detail);
}

BOOST_AUTO_TEST_CASE(bitwise_equal_with_and_without_pdl) {
  dev::Stream stream;
  for (Case const& c : {Case{{3584, 13, 16, WeightType::kBf16}, 0, "uniform/ep2"},
                        Case{{1024, 1, 6, WeightType::kFp32}}}) {
    auto const host = host_case(c);
    fin::DeviceCase d(host);
    for (auto const& name : fin::check_variant_names()) {
      BOOST_TEST_CONTEXT(name << " on " << describe(c)) {
        Options on = fin::variant_options(name);
        Options off = on;
        off.pdl.pdl = false;
        if (on.variant->fp8_output) {
          auto const a = fin::run_fp8(d, on, stream.get());
          auto const b = fin::run_fp8(d, off, stream.get());
          BOOST_TEST((a.q == b.q));
          BOOST_TEST((a.scales == b.scales));
        } else {
          BOOST_TEST((fin::run_bf16(d, on, stream.get()) == fin::run_bf16(d, off, stream.get())));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(small_batch_combine_is_deterministic_and_independent_of_the_slice) {
  dev::Stream stream;
  Case const c{{7168, 3, 32, WeightType::kFp32}, 0, "uniform/ep2"};
  auto const host = host_case(c);
  fin::DeviceCase d(host);
  Options o = fin::variant_options("small_batch");
  auto const first = fin::run_bf16(d, o, stream.get());
  for (int rep = 0; rep < 5; ++rep)
    BOOST_TEST((fin::run_bf16(d, o, stream.get()) == first), "run " << rep);
  // The slice width changes which CTA owns a column, never the order of a column's sums.
  for (int chunks : {8, 16, 32}) {
    o.slice_chunks = chunks;
    BOOST_TEST((fin::run_bf16(d, o, stream.get()) == first), "slice_chunks " << chunks);
  }
  auto const v = fin::verify_bf16(first, fin::expected_of(host, false));
  BOOST_TEST(v.pass, v.detail);
}

BOOST_AUTO_TEST_CASE(trigger_placements_and_delay_do_not_change_results_and_are_stamped) {
  dev::Stream stream;
  Case const c{{2048, 9, 8, WeightType::kBf16}, 0, "uniform/ep2"};
  auto const host = host_case(c);
  fin::DeviceCase d(host);
  for (auto const& name : fin::check_variant_names()) {
    Options const base = fin::variant_options(name);
    // Released kernels run as their package built them: no delay, stamps or snapshot (their
    // plan refuses those knobs; tests/test_flashinfer_gpu.cpp checks them instead).
    if (base.variant->source == finalize::Source::kReleased)
      continue;
    bool const fp8 = base.variant->fp8_output;
    auto const want_bf16 =
        fp8 ? std::vector<std::uint16_t>{} : fin::run_bf16(d, base, stream.get());
    auto const want_fp8 = fp8 ? fin::run_fp8(d, base, stream.get()) : fin::Fp8Output{};
    auto const lp = finalize::plan(d.params, base);
    dev::Buffer stamps(static_cast<std::size_t>(lp.ctas()) * 4 * sizeof(std::int64_t));
    for (Trigger t :
         {Trigger::kExit, Trigger::kEntry, Trigger::kAfterWait, Trigger::kAfterWrites}) {
      BOOST_TEST_CONTEXT(name << " trigger " << trigger_name(t)) {
        Options o = base;
        o.pdl.trigger = t;
        o.pdl.delay_ns = 2000;
        o.pdl.stamps = stamps.get<std::int64_t>();
        stamps.fill(0, stream.get());
        if (fp8) {
          auto const got = fin::run_fp8(d, o, stream.get());
          BOOST_TEST((got.q == want_fp8.q));
          BOOST_TEST((got.scales == want_fp8.scales));
        } else {
          BOOST_TEST((fin::run_bf16(d, o, stream.get()) == want_bf16));
        }
        auto const s = stamps.download<std::int64_t>(stream.get());
        std::int64_t bad = 0;
        for (std::int64_t i = 0; i < lp.ctas(); ++i) {
          auto const* x = s.data() + 4 * i;
          bool const ok = x[0] > 0 && x[1] >= x[0] && x[3] >= x[1] &&
                          (t == Trigger::kExit ? x[2] == -1 : x[2] >= x[0] && x[2] <= x[3]) &&
                          x[3] - x[0] >= 2000; // the injected delay is inside every CTA
          bad += !ok;
        }
        BOOST_TEST(bad == 0, bad << " of " << lp.ctas() << " CTAs with inconsistent stamps");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(pre_wait_snapshot_holds_the_indices_the_kernel_used) {
  dev::Stream stream;
  Case const c{{4096, 11, 10, WeightType::kFp32}, 0, "uniform/ep2"};
  auto const host = host_case(c);
  fin::DeviceCase d(host);
  dev::Buffer snap(host.layout.expanded_to_permuted.size() * sizeof(std::int32_t));
  for (auto const& name : fin::check_variant_names()) {
    if (fin::variant_options(name).variant->source == finalize::Source::kReleased)
      continue; // no pre-wait snapshot in released code (see above)
    BOOST_TEST_CONTEXT(name) {
      Options o = fin::variant_options(name);
      o.pre_wait_snapshot = snap.get<std::int32_t>();
      snap.fill(0x7f, stream.get());
      if (o.variant->fp8_output)
        fin::run_fp8(d, o, stream.get());
      else
        fin::run_bf16(d, o, stream.get());
      BOOST_TEST((snap.download<std::int32_t>(stream.get()) == host.layout.expanded_to_permuted));
    }
  }
}

BOOST_AUTO_TEST_CASE(finalize_launches_can_be_captured_in_a_cuda_graph) {
  dev::Stream stream;
  Case const c{{5120, 4, 16, WeightType::kBf16}};
  auto const host = host_case(c);
  fin::DeviceCase d(host);
  for (auto const& name : fin::sweep_variant_names()) {
    BOOST_TEST_CONTEXT(name) {
      Options const o = fin::variant_options(name);
      auto const direct = fin::run_bf16(d, o, stream.get());
      d.out.fill(0xff, stream.get());
      stream.sync();
      dev::Graph g(stream.get(), [&] {
        for (int i = 0; i < 3; ++i)
          finalize::run(d.params, o, stream.get());
      });
      g.launch(stream.get());
      BOOST_TEST((d.out.download<std::uint16_t>(stream.get()) == direct));
    }
  }
}
