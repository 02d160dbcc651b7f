// The released FlashInfer finalize kernels on a GPU, through moefin's adapter, against the Kokkos
// reference on poisoned outputs, with PDL on and off: each kernel on the edges of the shapes it
// serves (their arithmetic order differs from the reference's, so within the bf16 tolerance; the
// largest error per kernel is printed), bitwise equal with and without PDL, the released
// dispatcher running the kernel its rule names, the DeepSeek kernel's scales, and graph capture.
// The released routing, permute and activation kernels against moefin's references, on the
// layout facts kernels/external/flashinfer/flashinfer_chain.hpp states.
// Skipped (exit 77) without the released kernels in the build or without a GPU.

#include "kernels/external/flashinfer/flashinfer.hpp"

#define MOEFIN_GPU_TEST_SKIP_REASON()                                                              \
  (moefin::external::flashinfer::available() ? std::string()                                       \
                                             : moefin::external::flashinfer::unavailable_reason())
#include "tests/gpu_main.hpp"

#include "core/bf16.hpp"
#include "core/chain/shape.hpp"
#include "core/ops/errors.hpp"
#include "core/rng.hpp"
#include "experiments/finalize/device_case.hpp"
#include "experiments/finalize/verify.hpp"
#include "kernels/external/flashinfer/flashinfer_chain.hpp"
#include "kernels/finalize/finalize.hpp"
#include "reference/activation.hpp"
#include "reference/finalize.hpp"
#include "reference/kokkos_env.hpp"
#include "reference/permute.hpp"
#include "reference/routing.hpp"
#include "tests/finalize_case.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace moefin;
using finalize::WeightType;
namespace fi = moefin::external::flashinfer;

namespace {

struct KokkosFixture {
  reference::KokkosSession session;
};
BOOST_TEST_GLOBAL_FIXTURE(KokkosFixture);

using Case = test::FinalizeCase;
using test::describe;

fin::HostCase host_case(Case const& c) {
  return test::host_case(c, 2027);
}

/// moefin's edge shapes, and two that the released rule sends to vecload or reads skewed.
std::vector<Case> edge_cases() {
  auto cases = test::finalize_edge_cases();
  cases.push_back({{4096, 300, 8, WeightType::kFp32}});
  cases.push_back({{7168, 3, 16, WeightType::kBf16}, 128, "zipf/ep2"});
  return cases;
}

std::vector<fi::Kernel> all_kernels() {
  std::vector<fi::Kernel> ks;
  for (int i = 0; i < fi::kNumKernels; ++i)
    ks.push_back(static_cast<fi::Kernel>(i));
  return ks;
}

/// Whether the released kernel cannot run the case (what plan() must refuse).
bool unsupported(fi::Kernel k, Case const& c) {
  std::int64_t const h = c.shape.hidden, hp = h + c.pad, kk = c.shape.top_k;
  bool const aligned = h % 8 == 0 && hp % 8 == 0;
  switch (k) {
  case fi::Kernel::kVecload:
  case fi::Kernel::kSmallBatch:
    return !aligned || kk > 64;
  case fi::Kernel::kDeepseekFp8:
    return h % 128 != 0 || c.shape.weights == WeightType::kNone;
  default:
    return false;
  }
}

/// Poisons out (0xff: NaN), runs the released entry and returns the bf16 output bits [T, H].
std::vector<std::uint16_t> run_released(fin::DeviceCase& d, fi::Kernel k, bool pdl,
                                        cudaStream_t s) {
  d.out.fill(0xff, s);
  fi::run(d.params, fi::Options{k, pdl}, s);
  return d.out.download<std::uint16_t>(s);
}

struct DeepseekOut {
  std::vector<std::uint16_t> out; // bf16 [T, H]: sum / scale
  std::vector<float> scales;      // [T, ceil(H/128)], moefin's layout
};

DeepseekOut run_deepseek(fin::DeviceCase& d, fi::DeepseekLayout const& layout, bool pdl,
                         cudaStream_t s) {
  d.out.fill(0xff, s);
  d.out_scales.fill(0xff, s);
  layout.poison_out_scales(s);
  fi::run(d.params, fi::Options{fi::Kernel::kDeepseekFp8, pdl}, s, &layout);
  layout.store_scales(d.params, s);
  return {d.out.download<std::uint16_t>(s), d.out_scales.download<float>(s)};
}

struct DeepseekVerdict {
  std::int64_t unwritten = 0, nan_outside_empty = 0, empty_blocks = 0, empty_not_nan = 0;
  double rel_err = 0, scale_rel_err = 0;
  std::string detail;
};

/// What the released DeepSeek kernel must approximate: the block-dequantized sum (double).
struct DeepseekExpected {
  std::int64_t tokens = 0, hidden = 0;
  std::vector<double> exact;
  double peak = 0;
};

DeepseekExpected deepseek_expected(fin::HostCase const& host) {
  DeepseekExpected e;
  e.tokens = host.shape.tokens;
  e.hidden = host.shape.hidden;
  e.exact = reference::finalize_deepseek_fp8_exact(host.params(nullptr));
  for (double x : e.exact)
    e.peak = std::max(e.peak, std::fabs(x));
  return e;
}

/// out * scale against the exact sum (relative to its peak); scale against amax / 448 of the
/// exact block. A (token, block) whose exact sum is zero everywhere (every expert dropped) is
/// where the released kernel divides 0 by a zero scale: it must come out NaN there.
DeepseekVerdict verify_deepseek(DeepseekOut const& g, DeepseekExpected const& e) {
  DeepseekVerdict v;
  std::int64_t const blocks = (e.hidden + 127) / 128;
  for (std::int64_t t = 0; t < e.tokens; ++t) {
    for (std::int64_t b = 0; b < blocks; ++b) {
      float const s = g.scales[static_cast<std::size_t>(t * blocks + b)];
      std::uint32_t sbits;
      std::memcpy(&sbits, &s, 4);
      double amax = 0;
      std::int64_t const h1 = std::min(e.hidden, (b + 1) * 128);
      for (std::int64_t h = b * 128; h < h1; ++h)
        amax = std::max(amax, std::fabs(e.exact[static_cast<std::size_t>(t * e.hidden + h)]));
      if (sbits == 0xffffffffu) {
        ++v.unwritten;
        continue;
      }
      if (amax == 0) {
        ++v.empty_blocks;
        for (std::int64_t h = b * 128; h < h1; ++h)
          v.empty_not_nan +=
              !std::isnan(bf16_to_float(g.out[static_cast<std::size_t>(t * e.hidden + h)]));
        continue;
      }
      v.scale_rel_err = std::max(v.scale_rel_err, std::fabs(s - amax / 448.0) / (amax / 448.0));
      for (std::int64_t h = b * 128; h < h1; ++h) {
        std::uint16_t const bits = g.out[static_cast<std::size_t>(t * e.hidden + h)];
        if (bits == 0xffff) {
          ++v.unwritten;
          continue;
        }
        float const q = bf16_to_float(bits);
        if (std::isnan(q)) {
          ++v.nan_outside_empty;
          continue;
        }
        double const err = std::fabs(static_cast<double>(q) * s -
                                     e.exact[static_cast<std::size_t>(t * e.hidden + h)]);
        double const rel = e.peak > 0 ? err / e.peak : err;
        if (rel > v.rel_err) {
          v.rel_err = rel;
          v.detail = "worst at token " + std::to_string(t) + " column " + std::to_string(h);
        }
      }
    }
  }
  return v;
}

std::map<std::string, double>& max_errors() {
  static std::map<std::string, double> m;
  return m;
}

void record(fi::Kernel k, double rel) {
  double& m = max_errors()[fi::kernel_name(k)];
  m = std::max(m, rel);
}

} // namespace

BOOST_AUTO_TEST_CASE(each_released_kernel_matches_the_reference_with_pdl_on_and_off) {
  dev::Stream stream;
  for (auto const& c : edge_cases()) {
    auto const host = host_case(c);
    auto const expected = fin::expected_of(host, false);
    fin::DeviceCase d(host);
    for (fi::Kernel k : all_kernels()) {
      BOOST_TEST_CONTEXT(fi::kernel_name(k) << " on " << describe(c)) {
        bool threw = false;
        try {
          fi::plan(d.params, k);
        } catch (InputError const&) {
          threw = true;
        }
        BOOST_TEST(threw == unsupported(k, c));
        if (threw) {
          BOOST_CHECK_THROW(fi::run(d.params, fi::Options{k, true}, stream.get()), InputError);
          continue;
        }
        if (k == fi::Kernel::kDeepseekFp8) {
          fi::DeepseekLayout const layout(d.params, stream.get());
          auto const on = run_deepseek(d, layout, true, stream.get());
          auto const off = run_deepseek(d, layout, false, stream.get());
          BOOST_TEST((on.out == off.out));
          BOOST_TEST((on.scales == off.scales));
          auto const v = verify_deepseek(on, deepseek_expected(host));
          BOOST_TEST(v.unwritten == 0);
          BOOST_TEST(v.nan_outside_empty == 0);
          BOOST_TEST(v.empty_not_nan == 0, "blocks with every expert dropped must be NaN");
          BOOST_TEST(v.rel_err <= fin::kBf16Tolerance, v.rel_err << " " << v.detail);
          BOOST_TEST(v.scale_rel_err <= 1e-3, "scale vs amax / 448: " << v.scale_rel_err);
          if (c.all_dropped)
            BOOST_TEST(v.empty_blocks == c.shape.tokens * ((c.shape.hidden + 127) / 128));
          record(k, v.rel_err);
          continue;
        }
        auto const on = run_released(d, k, true, stream.get());
        auto const off = run_released(d, k, false, stream.get());
        BOOST_TEST((on == off), "PDL on and off differ");
        auto const v = fin::verify_bf16(on, expected);
        BOOST_TEST(v.pass, v.detail);
        if (c.all_dropped)
          BOOST_TEST(v.max_abs_err == 0.0, "every expert dropped must give zeros: " << v.detail);
        record(k, v.rel_err);
      }
    }
  }
  for (auto const& [name, err] : max_errors()) {
    std::printf("max error %s: %.3e of the output's peak (tolerance %.1e)\n", name.c_str(), err,
                fin::kBf16Tolerance);
    BOOST_TEST_MESSAGE("max error " << name << ": " << err);
  }
}

BOOST_AUTO_TEST_CASE(released_dispatcher_runs_the_kernel_its_rule_names) {
  dev::Stream stream;
  for (Case const& c : {Case{{4096, 1, 8, WeightType::kBf16}},         // small batch
                        Case{{4096, 2, 4, WeightType::kFp32}},         // K <= 4: scalar
                        Case{{7168, 43, 8, WeightType::kBf16}},        // vecload
                        Case{{1002, 2000, 6, WeightType::kFp32}},      // unaligned: scalar
                        Case{{2048, 5, 22, WeightType::kNone}, 16}}) { // small batch, Hp > H
    auto const host = host_case(c);
    fin::DeviceCase d(host);
    auto const lp = fi::plan(d.params, fi::Kernel::kDispatch);
    BOOST_TEST_CONTEXT(describe(c) << " -> " << fi::kernel_name(lp.kernel)) {
      for (bool pdl : {true, false}) {
        auto const via_run = run_released(d, fi::Kernel::kDispatch, pdl, stream.get());
        auto const direct = run_released(d, lp.kernel, pdl, stream.get());
        BOOST_TEST((via_run == direct), "pdl " << pdl);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(registry_entries_launch_the_released_kernels) {
  // fi_* through finalize::run (what check and sweep finalize call) write the same bits as the
  // adapter's own call, PDL on and off, on every edge case the kernel supports.
  dev::Stream stream;
  for (fi::Kernel k : {fi::Kernel::kScalar, fi::Kernel::kVecload, fi::Kernel::kSmallBatch,
                       fi::Kernel::kDispatch}) {
    auto const& v = finalize::variant(fi::kernel_name(k), "test");
    for (Case const& c : edge_cases()) {
      if (unsupported(k, c))
        continue;
      auto const host = host_case(c);
      fin::DeviceCase d(host);
      BOOST_TEST_CONTEXT(v.name << " " << describe(c)) {
        for (bool pdl : {true, false}) {
          finalize::Options o;
          o.variant = &v;
          o.pdl.pdl = pdl;
          auto const via_registry = fin::run_bf16(d, o, stream.get());
          auto const direct = run_released(d, k, pdl, stream.get());
          BOOST_TEST((via_registry == direct), "pdl " << pdl);
          BOOST_TEST(std::count(via_registry.begin(), via_registry.end(), std::uint16_t(0xffff)) ==
                     0);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(released_deepseek_kernel_leaves_nan_where_a_token_has_no_local_expert) {
  // moefin's deepseek_fp8 stores zeros with scale 1 there; the released kernel divides 0 by
  // amax / 448 = 0.
  dev::Stream stream;
  Case const c{{1024, 4, 8, WeightType::kBf16}, 0, "uniform", true};
  auto const host = host_case(c);
  fin::DeviceCase d(host);
  fi::DeepseekLayout const layout(d.params, stream.get());
  auto const g = run_deepseek(d, layout, true, stream.get());
  std::int64_t nan = 0;
  for (auto b : g.out)
    nan += std::isnan(bf16_to_float(b)) && b != 0xffff;
  BOOST_TEST(nan == c.shape.tokens * c.shape.hidden);
  for (float s : g.scales)
    BOOST_TEST(s == 0.0f);
}

BOOST_AUTO_TEST_CASE(released_launches_can_be_captured_in_a_cuda_graph) {
  dev::Stream stream;
  Case const c{{5120, 4, 16, WeightType::kBf16}};
  auto const host = host_case(c);
  fin::DeviceCase d(host);
  for (fi::Kernel k : {fi::Kernel::kScalar, fi::Kernel::kVecload, fi::Kernel::kSmallBatch,
                       fi::Kernel::kDispatch}) {
    BOOST_TEST_CONTEXT(fi::kernel_name(k)) {
      auto const direct = run_released(d, k, true, stream.get());
      d.out.fill(0xff, stream.get());
      stream.sync();
      dev::Graph g(stream.get(), [&] {
        for (int i = 0; i < 3; ++i)
          fi::run(d.params, fi::Options{k, true}, stream.get());
      });
      g.launch(stream.get());
      BOOST_TEST((d.out.download<std::uint16_t>(stream.get()) == direct));
    }
  }
}

namespace {

constexpr std::int32_t kIntPoison = 0x7f7f7f7f; // fill byte 0x7f: not -1, not a row

std::int64_t padded_capacity(std::int64_t tk, std::int64_t local, std::int64_t tile) {
  std::int64_t const bound = tk + std::min(tk, local) * (tile - 1);
  return (bound + tile - 1) / tile * tile;
}

struct RoutingCase {
  std::int64_t tokens, experts, top_k, tile, begin, local;
  routing::Method method = routing::Method::kSoftmaxTopK;
  bool renormalize = true;
  WeightType weights = WeightType::kBf16;
  fi::RoutingKernel kernel = fi::RoutingKernel::kBlock;
};

/// moefin's reference routing of seeded scores: host arrays and params pointing at them.
struct ReferenceRouting {
  routing::RoutingParams p;
  std::vector<float> scores;
  std::vector<std::int32_t> ids, e2p, p2t, p2e, counts, offsets, cta, total;
  std::vector<std::uint16_t> w16;
  std::vector<float> w32;
  explicit ReferenceRouting(RoutingCase const& c, std::uint64_t seed)
      : scores(chain::router_scores(seed, c.tokens, c.experts)) {
    p.num_tokens = c.tokens;
    p.num_experts = c.experts;
    p.top_k = c.top_k;
    p.local_expert_begin = c.begin;
    p.num_local_experts = c.local;
    p.tile = c.tile;
    p.max_padded_rows = padded_capacity(c.tokens * c.top_k, c.local, c.tile);
    p.method = c.method;
    p.renormalize = c.renormalize;
    p.weight_type = c.weights;
    auto const tk = static_cast<std::size_t>(c.tokens * c.top_k);
    auto const rows = static_cast<std::size_t>(p.max_padded_rows);
    ids.resize(tk), e2p.resize(tk), p2t.resize(rows), p2e.resize(rows);
    counts.resize(static_cast<std::size_t>(c.local)), offsets.resize(counts.size() + 1);
    cta.resize(rows / static_cast<std::size_t>(c.tile)), total.resize(1);
    w16.resize(tk), w32.resize(tk);
    p.scores = scores.data();
    p.expert_ids = ids.data();
    p.expert_weights = c.weights == WeightType::kFp32 ? static_cast<void*>(w32.data())
                                                      : static_cast<void*>(w16.data());
    p.expanded_to_permuted = e2p.data();
    p.permuted_to_token = p2t.data();
    p.permuted_to_expanded = p2e.data();
    p.expert_counts = counts.data();
    p.expert_offsets = offsets.data();
    p.cta_to_expert = cta.data();
    p.total_padded_rows = total.data();
    reference::routing(p);
  }
  double weight(std::size_t e) const {
    return p.weight_type == WeightType::kFp32 ? w32[e] : bf16_to_float(w16[e]);
  }
};

/// The released routing's outputs on the device, poisoned before each run.
struct ReleasedRouting {
  dev::Buffer scores, w, e2p, p2t, p2e, cta, total, limit, tiles;
  routing::RoutingParams p;
  fi::RoutingExtras x;
  explicit ReleasedRouting(ReferenceRouting const& ref) : p(ref.p) {
    scores.upload(ref.scores);
    std::size_t const tk = ref.e2p.size(), rows = ref.p2t.size();
    w = dev::Buffer(tk * (p.weight_type == WeightType::kFp32 ? 4 : 2));
    e2p = dev::Buffer(tk * 4), p2t = dev::Buffer(rows * 4), p2e = dev::Buffer(rows * 4);
    cta = dev::Buffer(ref.cta.size() * 4), limit = dev::Buffer(ref.cta.size() * 4);
    total = dev::Buffer(4), tiles = dev::Buffer(4);
    p.scores = scores.get<float const>();
    p.expert_ids = nullptr; // not written by the released kernels
    p.expert_counts = nullptr;
    p.expert_offsets = nullptr;
    p.expert_weights = w.get();
    p.expanded_to_permuted = e2p.get<std::int32_t>();
    p.permuted_to_token = p2t.get<std::int32_t>();
    p.permuted_to_expanded = p2e.get<std::int32_t>();
    p.cta_to_expert = cta.get<std::int32_t>();
    p.total_padded_rows = total.get<std::int32_t>();
    x.tile_row_limit = limit.get<std::int32_t>();
    x.num_tiles = tiles.get<std::int32_t>();
  }
  void run(fi::RoutingKernel k, bool pdl, cudaStream_t s) {
    for (dev::Buffer const* b : {&w, &e2p, &p2t, &p2e, &cta, &total, &limit, &tiles})
      b->fill(0x7f, s);
    fi::run_routing(p, x, k, pdl, s);
    MOEFIN_CUDA_CHECK(cudaStreamSynchronize(s));
  }
};

void check_released_routing(RoutingCase const& c, std::uint64_t seed) {
  dev::Stream stream;
  ReferenceRouting const ref(c, seed);
  ReleasedRouting rel(ref);
  BOOST_TEST((fi::routing_kernel(rel.p) == c.kernel));
  for (bool pdl : {true, false}) {
    BOOST_TEST_CONTEXT("T=" << c.tokens << " E=" << c.experts << " K=" << c.top_k << " tile="
                            << c.tile << " local=[" << c.begin << "," << c.begin + c.local << ") "
                            << fi::routing_kernel_name(c.kernel) << " pdl=" << pdl) {
      rel.run(c.kernel, pdl, stream.get());
      std::int32_t const total = rel.total.download<std::int32_t>()[0];
      BOOST_TEST(total == ref.total[0]);
      BOOST_TEST(rel.tiles.download<std::int32_t>()[0] == ref.total[0] / c.tile);
      BOOST_TEST(rel.e2p.download<std::int32_t>() == ref.e2p, boost::test_tools::per_element());
      auto const p2t = rel.p2t.download<std::int32_t>(), p2e = rel.p2e.download<std::int32_t>();
      auto const cta = rel.cta.download<std::int32_t>(), lim = rel.limit.download<std::int32_t>();
      std::int64_t p2t_bad = 0, p2e_bad = 0, padding_written = 0, past_end_written = 0;
      for (std::size_t r = 0; r < p2t.size(); ++r) {
        if (static_cast<std::int64_t>(r) < total) {
          p2t_bad += p2t[r] != ref.p2t[r];
          if (ref.p2t[r] >= 0)
            p2e_bad += p2e[r] != ref.p2e[r];
          else
            padding_written += p2e[r] != kIntPoison;
        } else {
          past_end_written += p2t[r] != kIntPoison || p2e[r] != kIntPoison;
        }
      }
      BOOST_TEST(p2t_bad == 0);
      BOOST_TEST(p2e_bad == 0);
      BOOST_TEST(padding_written == 0, "permuted_to_expanded is not written on padding rows");
      BOOST_TEST(past_end_written == 0);
      std::int64_t cta_bad = 0, limit_bad = 0, cta_past_end = 0;
      for (std::size_t t = 0; t < cta.size(); ++t) {
        std::int64_t const row0 = static_cast<std::int64_t>(t) * c.tile;
        if (row0 >= total) {
          cta_past_end += cta[t] != kIntPoison;
          continue;
        }
        cta_bad += cta[t] != ref.cta[t];
        auto const e = static_cast<std::size_t>(ref.cta[t]);
        std::int64_t const end = ref.offsets[e] + ref.counts[e];
        limit_bad += lim[t] != std::min(row0 + c.tile, end);
      }
      BOOST_TEST(cta_bad == 0);
      BOOST_TEST(limit_bad == 0, "tile row limit = min(tile end, group start + count)");
      BOOST_TEST(cta_past_end == 0, "tiles past the end are not written");
      // Weights: a softmax with a different exp and order: one bf16 step, or 1e-5 in fp32.
      double worst = 0;
      std::vector<double> got(ref.e2p.size());
      if (c.weights == WeightType::kFp32) {
        auto const g = rel.w.download<float>();
        std::copy(g.begin(), g.end(), got.begin());
      } else {
        auto const g = rel.w.download<std::uint16_t>();
        std::transform(g.begin(), g.end(), got.begin(),
                       [](std::uint16_t b) { return bf16_to_float(b); });
      }
      for (std::size_t e = 0; e < got.size(); ++e) {
        BOOST_REQUIRE(std::isfinite(got[e]));
        double const want = ref.weight(e);
        worst = std::max(worst, std::fabs(got[e] - want) / std::max(std::fabs(want), 1e-30));
      }
      BOOST_TEST(worst <= (c.weights == WeightType::kFp32 ? 1e-5 : 1.0 / 128), worst);
      std::printf("released routing T=%lld E=%lld K=%lld %s: weights within %.2e (relative)\n",
                  static_cast<long long>(c.tokens), static_cast<long long>(c.experts),
                  static_cast<long long>(c.top_k), fi::routing_kernel_name(c.kernel), worst);
    }
  }
}

std::vector<std::uint16_t> random_rows(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint16_t> v(n);
  Rng rng(seed);
  for (auto& b : v)
    b = float_to_bf16(static_cast<float>(rng.uniform(-2.0, 2.0)));
  return v;
}

} // namespace

BOOST_AUTO_TEST_CASE(released_routing_writes_moefins_layout) {
  using M = routing::Method;
  using RK = fi::RoutingKernel;
  check_released_routing({1, 256, 8, 16, 0, 256}, 31);
  check_released_routing({4, 512, 22, 128, 0, 512}, 32);
  check_released_routing({3, 896, 16, 64, 224, 224, M::kSoftmaxTopK, true, WeightType::kFp32}, 33);
  check_released_routing({4, 256, 8, 8, 0, 256, M::kSoftmaxTopK, false, WeightType::kFp32}, 34);
  check_released_routing({2, 256, 8, 16, 0, 256, M::kTopKSoftmax, true, WeightType::kBf16}, 35);
  check_released_routing(
      {8, 256, 8, 16, 64, 128, M::kSoftmaxTopK, true, WeightType::kBf16, RK::kDynBlock}, 36);
  check_released_routing(
      {16, 512, 22, 32, 0, 512, M::kSoftmaxTopK, true, WeightType::kBf16, RK::kDynBlock}, 37);
}

BOOST_AUTO_TEST_CASE(released_permute_gathers_rows_and_leaves_padding) {
  dev::Stream stream;
  RoutingCase const c{5, 64, 6, 16, 0, 64}; // every expert local: the released permute needs it
  ReferenceRouting const ref(c, 41);
  std::int64_t const H = 768;
  auto const hidden = random_rows(static_cast<std::size_t>(c.tokens * H), 42);
  std::vector<std::uint16_t> want(static_cast<std::size_t>(ref.p.max_padded_rows * H), 0xffff);
  permute::PermuteParams hp;
  hp.hidden_states = hidden.data();
  hp.permuted_to_token = ref.p2t.data();
  hp.total_padded_rows = ref.total.data();
  hp.permuted = want.data();
  hp.num_tokens = c.tokens;
  hp.hidden = H;
  hp.max_rows = ref.p.max_padded_rows;
  reference::permute(hp);
  dev::Buffer d_hidden, d_e2p, d_total, out(want.size() * 2);
  d_hidden.upload(hidden), d_e2p.upload(ref.e2p), d_total.upload(ref.total);
  permute::PermuteParams p = hp;
  p.hidden_states = d_hidden.get();
  p.permuted_to_token = nullptr; // the released kernel scatters through expanded_to_permuted
  p.total_padded_rows = d_total.get<std::int32_t const>();
  p.permuted = out.get();
  for (bool pdl : {true, false}) {
    out.fill(0xff, stream.get());
    fi::run_permute(p, d_e2p.get<std::int32_t const>(), c.top_k, pdl, stream.get());
    auto const got = out.download<std::uint16_t>(stream.get());
    std::int64_t bad = 0, padding_written = 0;
    for (std::int64_t r = 0; r < ref.p.max_padded_rows; ++r)
      for (std::int64_t h = 0; h < H; ++h) {
        auto const i = static_cast<std::size_t>(r * H + h);
        if (r < ref.total[0] && ref.p2t[static_cast<std::size_t>(r)] >= 0)
          bad += got[i] != want[i];
        else
          padding_written += got[i] != 0xffff;
      }
    BOOST_TEST(bad == 0, "pdl " << pdl);
    BOOST_TEST(padding_written == 0, "padding rows are left as they were, pdl " << pdl);
  }
}

BOOST_AUTO_TEST_CASE(released_activation_takes_the_gate_from_the_second_half) {
  dev::Stream stream;
  RoutingCase const c{4, 64, 6, 16, 8, 48}; // dropped experts are skipped (-1)
  ReferenceRouting const ref(c, 51);
  std::int64_t const I = 192, rows = ref.p.max_padded_rows;
  auto const in = random_rows(static_cast<std::size_t>(rows * 2 * I), 52);
  // moefin's activation of the input with its halves swapped: gate = in[:, I:], up = in[:, :I].
  std::vector<std::uint16_t> swapped(in.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < I; ++j) {
      swapped[static_cast<std::size_t>(r * 2 * I + j)] =
          in[static_cast<std::size_t>(r * 2 * I + I + j)];
      swapped[static_cast<std::size_t>(r * 2 * I + I + j)] =
          in[static_cast<std::size_t>(r * 2 * I + j)];
    }
  auto reference_of = [&](std::vector<std::uint16_t> const& x) {
    std::vector<std::uint16_t> out(static_cast<std::size_t>(rows * I), 0xffff);
    activation::ActivationParams hp;
    hp.in = x.data();
    hp.out = out.data();
    hp.total_padded_rows = ref.total.data();
    hp.max_rows = rows;
    hp.inter = I;
    hp.type = activation::Type::kSwiGlu;
    reference::activation(hp);
    return out;
  };
  auto const want = reference_of(swapped), moefin_order = reference_of(in);
  dev::Buffer d_in, d_e2p, d_total, out(static_cast<std::size_t>(rows * I) * 2);
  d_in.upload(in), d_e2p.upload(ref.e2p), d_total.upload(ref.total);
  activation::ActivationParams p;
  p.in = d_in.get();
  p.out = out.get();
  p.total_padded_rows = d_total.get<std::int32_t const>();
  p.max_rows = rows;
  p.inter = I;
  for (bool pdl : {true, false}) {
    out.fill(0xff, stream.get());
    fi::run_activation(p, d_e2p.get<std::int32_t const>(), c.tokens, c.top_k, pdl, stream.get());
    auto const got = out.download<std::uint16_t>(stream.get());
    std::int64_t off_by_more = 0, padding_written = 0, same_as_moefin_order = 0, valid = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      bool const live = r < ref.total[0] && ref.p2t[static_cast<std::size_t>(r)] >= 0;
      for (std::int64_t j = 0; j < I; ++j) {
        auto const i = static_cast<std::size_t>(r * I + j);
        if (!live) {
          padding_written += got[i] != 0xffff;
          continue;
        }
        ++valid;
        // silu with the fast exp: at most one bf16 step from the reference.
        double const a = bf16_to_float(got[i]), b = bf16_to_float(want[i]);
        off_by_more += std::fabs(a - b) > std::fabs(b) / 128 + 1e-30;
        same_as_moefin_order += got[i] == moefin_order[i];
      }
    }
    BOOST_TEST(valid > 0);
    BOOST_TEST(off_by_more == 0, "pdl " << pdl);
    BOOST_TEST(padding_written == 0, "padding rows are left as they were");
    BOOST_TEST(same_as_moefin_order < valid / 10, "moefin's [gate | up] order would match");
  }
}
