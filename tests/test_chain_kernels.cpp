// Each CUDA kernel of the layer chain against its Kokkos reference on small shapes (gpu label).
#include "tests/gpu_main.hpp"

#include "core/bf16.hpp"
#include "core/chain/presets.hpp"
#include "core/chain/shape.hpp"
#include "core/chain/verifier_chain.hpp"
#include "core/routing.hpp"
#include "kernels/activation/activation.hpp"
#include "kernels/gemm/gemm.hpp"
#include "kernels/permute/permute.hpp"
#include "kernels/routing/routing.hpp"
#include "reference/activation.hpp"
#include "reference/gemm.hpp"
#include "reference/kokkos_env.hpp"
#include "reference/permute.hpp"
#include "reference/routing.hpp"
#include "tests/chain_device.hpp"

#include <cmath>

using namespace moefin;
using test::DeviceBuffer;

namespace {

struct Kokkos {
  reference::KokkosSession session;
};
BOOST_TEST_GLOBAL_FIXTURE(Kokkos);

std::int64_t capacity(std::int64_t tk, std::int64_t local, std::int64_t tile) {
  std::int64_t const bound = tk + std::min(tk, local) * (tile - 1);
  return (bound + tile - 1) / tile * tile;
}

/// Host arrays of one routing's outputs, and params pointing at them.
struct HostRouting {
  std::vector<std::int32_t> ids, e2p, p2t, p2e, counts, offsets, cta, total;
  std::vector<std::uint16_t> weights;
  routing::RoutingParams p;
  HostRouting(routing::RoutingParams shape, float const* scores)
      : ids(shape.num_tokens * shape.top_k), e2p(ids.size()), p2t(shape.max_padded_rows),
        p2e(p2t.size()), counts(shape.num_local_experts), offsets(counts.size() + 1),
        cta(shape.max_padded_rows / shape.tile), total(1), weights(ids.size()), p(shape) {
    p.scores = scores;
    p.expert_ids = ids.data();
    p.expert_weights = weights.data();
    p.expanded_to_permuted = e2p.data();
    p.permuted_to_token = p2t.data();
    p.permuted_to_expanded = p2e.data();
    p.expert_counts = counts.data();
    p.expert_offsets = offsets.data();
    p.cta_to_expert = cta.data();
    p.total_padded_rows = total.data();
  }
};

routing::RoutingParams routing_shape(std::int64_t T, std::int64_t E, std::int64_t K,
                                     std::int64_t tile, std::int64_t begin, std::int64_t local) {
  routing::RoutingParams p;
  p.num_tokens = T;
  p.num_experts = E;
  p.top_k = K;
  p.local_expert_begin = begin;
  p.num_local_experts = local;
  p.tile = tile;
  p.max_padded_rows = capacity(T * K, local, tile);
  return p;
}

/// Runs the CUDA routing and the reference on the same scores and compares every output.
void check_routing_on(routing::RoutingParams const& shape, std::vector<float> const& scores,
                      bool multi) {
  std::int64_t const T = shape.num_tokens, K = shape.top_k, tile = shape.tile;
  std::int64_t const local = shape.num_local_experts;
  BOOST_TEST_CONTEXT("T=" << T << " E=" << shape.num_experts << " K=" << K << " tile=" << tile
                          << " local=[" << shape.local_expert_begin << ","
                          << shape.local_expert_begin + local << ") multi=" << multi) {
    HostRouting ref(shape, scores.data());
    reference::routing(ref.p);

    std::size_t const tk = static_cast<std::size_t>(T * K);
    std::size_t const rows = static_cast<std::size_t>(shape.max_padded_rows);
    DeviceBuffer d_scores(scores), ids(tk * 4), w(tk * 2), e2p(tk * 4), p2t(rows * 4),
        p2e(rows * 4), counts(local * 4), offsets((local + 1) * 4), cta(rows / tile * 4), total(4);
    routing::RoutingParams p = shape;
    p.scores = d_scores.as<float>();
    p.expert_ids = ids.as<std::int32_t>();
    p.expert_weights = w.get();
    p.expanded_to_permuted = e2p.as<std::int32_t>();
    p.permuted_to_token = p2t.as<std::int32_t>();
    p.permuted_to_expanded = p2e.as<std::int32_t>();
    p.expert_counts = counts.as<std::int32_t>();
    p.expert_offsets = offsets.as<std::int32_t>();
    p.cta_to_expert = cta.as<std::int32_t>();
    p.total_padded_rows = total.as<std::int32_t>();
    DeviceBuffer ws(routing::workspace_bytes(p));
    MOEFIN_CUDA_CHECK(cudaMemset(ws.get(), 0, routing::workspace_bytes(p)));
    routing::Workspace const wsp{multi ? ws.get() : nullptr, routing::workspace_bytes(p)};
    BOOST_TEST(routing::uses_multi_cta(p, wsp) == (multi && T > routing::Policy::kBlockMaxTokens));
    PdlKnobs knobs;
    knobs.pdl = false;
    routing::run(p, knobs, wsp, nullptr);
    MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());

    BOOST_TEST(ids.download<std::int32_t>() == ref.ids, boost::test_tools::per_element());
    BOOST_TEST(e2p.download<std::int32_t>() == ref.e2p, boost::test_tools::per_element());
    BOOST_TEST(counts.download<std::int32_t>() == ref.counts, boost::test_tools::per_element());
    BOOST_TEST(offsets.download<std::int32_t>() == ref.offsets, boost::test_tools::per_element());
    std::int32_t const tot = total.download<std::int32_t>()[0];
    BOOST_TEST(tot == ref.total[0]);
    auto const g_p2t = p2t.download<std::int32_t>(), g_p2e = p2e.download<std::int32_t>();
    auto const g_cta = cta.download<std::int32_t>();
    for (std::size_t r = 0; r < rows; ++r) {
      if (static_cast<std::int64_t>(r) < tot) {
        BOOST_TEST(g_p2t[r] == ref.p2t[r], "row " << r);
        BOOST_TEST(g_p2e[r] == ref.p2e[r], "row " << r);
      } else {
        BOOST_TEST(g_p2t[r] == -1, "row " << r << " past the total");
        BOOST_TEST(g_p2e[r] == -1, "row " << r << " past the total");
      }
    }
    for (std::size_t c = 0; c < g_cta.size(); ++c)
      BOOST_TEST(g_cta[c] == (static_cast<std::int64_t>(c) * tile < tot ? ref.cta[c] : -1),
                 "tile " << c);
    // Weights: expf may differ in the last bit, and bf16 rounds it: at most one bf16 step.
    auto const g_w = w.download<std::uint16_t>();
    double worst = 0;
    for (std::size_t e = 0; e < tk; ++e) {
      double const a = bf16_to_float(g_w[e]), b = bf16_to_float(ref.weights[e]);
      BOOST_REQUIRE(std::isfinite(a));
      worst = std::max(worst, std::fabs(a - b) / std::max(std::fabs(b), 1e-30));
    }
    BOOST_TEST(worst <= 1.0 / 128);
    if (multi) // the kernel leaves its scratch zero for the next launch
      for (auto v : ws.download<std::uint32_t>())
        BOOST_REQUIRE(v == 0u);
  }
}

void check_routing(std::int64_t T, std::int64_t E, std::int64_t K, std::int64_t tile,
                   std::int64_t begin, std::int64_t local, bool multi, std::uint64_t seed) {
  check_routing_on(routing_shape(T, E, K, tile, begin, local), chain::router_scores(seed, T, E),
                   multi);
}

/// A routing layout (reference routing of seeded scores) uploaded for permute/GEMM/activation.
struct Layout {
  routing::RoutingParams shape;
  std::vector<float> scores;
  std::unique_ptr<HostRouting> host;
  Layout(std::int64_t T, std::int64_t E, std::int64_t K, std::int64_t tile, std::uint64_t seed)
      : shape(routing_shape(T, E, K, tile, 0, E)), scores(chain::router_scores(seed, T, E)) {
    host = std::make_unique<HostRouting>(shape, scores.data());
    reference::routing(host->p);
  }
  std::int64_t rows() const { return shape.max_padded_rows; }
};

} // namespace

BOOST_AUTO_TEST_CASE(routing_block_kernel_matches_the_reference) {
  check_routing(1, 8, 1, 16, 0, 8, false, 1);
  check_routing(5, 64, 6, 16, 0, 64, false, 2);
  check_routing(16, 512, 22, 16, 0, 512, false, 3);
  check_routing(3, 256, 8, 1, 0, 256, false, 4);
  check_routing(128, 896, 16, 16, 0, 896, false, 5);
}

BOOST_AUTO_TEST_CASE(routing_multi_cta_path_matches_the_reference) {
  check_routing(17, 256, 8, 16, 0, 256, true, 6);
  check_routing(64, 512, 22, 16, 0, 512, true, 7);
  check_routing(128, 896, 16, 16, 0, 896, true, 8);
  check_routing(128, 1024, 32, 128, 0, 1024, true, 9);
}

BOOST_AUTO_TEST_CASE(routing_drops_non_local_experts) {
  check_routing(9, 64, 6, 16, 16, 24, false, 10);
  check_routing(40, 64, 6, 16, 40, 24, true, 11);
}

BOOST_AUTO_TEST_CASE(routing_ties_go_to_the_lower_expert) {
  // Every score equal: the reference picks experts 0..K-1, and so must the kernels.
  std::vector<float> const scores(40 * 64, 0.5f);
  auto const shape = routing_shape(40, 64, 6, 16, 0, 64);
  HostRouting ref(shape, scores.data());
  reference::routing(ref.p);
  for (int e = 0; e < 40 * 6; ++e)
    BOOST_TEST(ref.ids[static_cast<std::size_t>(e)] == e % 6);
  check_routing_on(shape, scores, false);
  check_routing_on(shape, scores, true);
}

BOOST_AUTO_TEST_CASE(permute_gathers_rows_and_zeroes_padding_bitwise) {
  Layout const L(6, 16, 4, 16, 12);
  std::int64_t const H = 256;
  auto const hidden = random_bf16(static_cast<std::size_t>(6 * H), 13);
  std::vector<std::uint16_t> ref(static_cast<std::size_t>(L.rows() * H), kBf16Poison);
  permute::PermuteParams hp;
  hp.hidden_states = hidden.data();
  hp.permuted_to_token = L.host->p2t.data();
  hp.total_padded_rows = L.host->total.data();
  hp.permuted = ref.data();
  hp.num_tokens = 6;
  hp.hidden = H;
  hp.max_rows = L.rows();
  reference::permute(hp);
  DeviceBuffer d_hidden(hidden), d_p2t(L.host->p2t), d_total(L.host->total), out(ref.size() * 2);
  permute::PermuteParams p = hp;
  p.hidden_states = d_hidden.get();
  p.permuted_to_token = d_p2t.as<std::int32_t>();
  p.total_padded_rows = d_total.as<std::int32_t>();
  p.permuted = out.get();
  for (Trigger t : {Trigger::kDefault, Trigger::kAfterWait, Trigger::kAfterWrites}) {
    out.poison();
    PdlKnobs knobs;
    knobs.pdl = false;
    knobs.trigger = t;
    knobs.delay_ns = 2000;
    permute::run(p, knobs, nullptr);
    auto const got = out.download<std::uint16_t>();
    std::size_t const n = static_cast<std::size_t>(L.host->total[0] * H);
    BOOST_TEST(std::vector<std::uint16_t>(got.begin(), got.begin() + n) ==
                   std::vector<std::uint16_t>(ref.begin(), ref.begin() + n),
               boost::test_tools::per_element());
  }
}

namespace {

// skip_padding: rows that routing marks as padding (permuted_to_token < 0) are zero rows of a,
// unread; the test fills them with random values, so reading them would show.
void check_gemm(std::int64_t tile, std::int64_t n, std::int64_t k, std::uint64_t seed,
                bool skip_padding) {
  BOOST_TEST_CONTEXT("tile_m=" << tile << " n=" << n << " k=" << k
                               << " skip_padding=" << skip_padding) {
    Layout const L(6, 16, 4, tile, seed);
    std::int64_t const E = 16;
    auto const a = random_bf16(static_cast<std::size_t>(L.rows() * k), seed + 1);
    auto b = random_bf16(static_cast<std::size_t>(E * n * k), seed + 2, 0.05f, 1.0f);
    std::vector<std::uint16_t> ref(static_cast<std::size_t>(L.rows() * n), kBf16Poison);
    gemm::GroupedGemmParams hp;
    hp.a = a.data();
    hp.b = b.data();
    hp.c = ref.data();
    hp.cta_to_expert = L.host->cta.data();
    hp.total_padded_rows = L.host->total.data();
    hp.row_token = skip_padding ? L.host->p2t.data() : nullptr;
    hp.max_rows = L.rows();
    hp.n = n;
    hp.k = k;
    hp.ldc = n;
    hp.tile_m = tile;
    hp.num_local_experts = E;
    reference::grouped_gemm(hp);
    DeviceBuffer d_a(a), d_b(b), d_cta(L.host->cta), d_total(L.host->total), d_p2t(L.host->p2t),
        c(ref.size() * 2);
    gemm::GroupedGemmParams p = hp;
    p.row_token = skip_padding ? d_p2t.as<std::int32_t>() : nullptr;
    p.a = d_a.get();
    p.b = d_b.get();
    p.c = c.get();
    p.cta_to_expert = d_cta.as<std::int32_t>();
    p.total_padded_rows = d_total.as<std::int32_t>();
    PdlKnobs knobs;
    knobs.pdl = false;
    gemm::run(p, knobs, nullptr);
    auto const got = c.download<std::uint16_t>();
    std::size_t const m = static_cast<std::size_t>(L.host->total[0] * n);
    double peak = 0, err = 0;
    std::size_t off_by_more = 0, padding = 0;
    for (std::size_t i = 0; i < m; ++i) {
      double const x = bf16_to_float(got[i]), y = bf16_to_float(ref[i]);
      BOOST_REQUIRE_MESSAGE(std::isfinite(x), "element " << i << " not written or not finite");
      if (L.host->p2t[i / static_cast<std::size_t>(n)] < 0) {
        ++padding;
        if (skip_padding)
          BOOST_REQUIRE_MESSAGE(got[i] == 0 && ref[i] == 0, "padding element " << i << " not +0");
      }
      peak = std::max(peak, std::fabs(y));
      err = std::max(err, std::fabs(x - y));
      off_by_more += std::fabs(x - y) > std::fabs(y) / 128 + 1e-3;
    }
    // fp32 sums in another order: at most a bf16 rounding step apart, relative to the peak.
    BOOST_TEST(err / peak <= 1.0 / 128);
    BOOST_TEST(off_by_more == 0u);
    BOOST_TEST(padding > 0u); // the layout has padding rows, so skip_padding was exercised
    // Same inputs, another trigger placement and a delay: bitwise the same output.
    c.poison();
    knobs.trigger = Trigger::kAfterWrites;
    knobs.delay_ns = 3000;
    gemm::run(p, knobs, nullptr);
    BOOST_TEST(c.download<std::uint16_t>() == got, boost::test_tools::per_element());
  }
}

void check_activation(activation::Type type) {
  Layout const L(5, 16, 4, 16, 21);
  std::int64_t const I = 192;
  std::int64_t const cols = type == activation::Type::kSwiGlu ? 2 * I : I;
  auto const in = random_bf16(static_cast<std::size_t>(L.rows() * cols), 22, 0.05f, 4.0f);
  std::vector<std::uint16_t> ref(static_cast<std::size_t>(L.rows() * I), kBf16Poison);
  activation::ActivationParams hp;
  hp.in = in.data();
  hp.out = ref.data();
  hp.total_padded_rows = L.host->total.data();
  hp.max_rows = L.rows();
  hp.inter = I;
  hp.type = type;
  reference::activation(hp);
  DeviceBuffer d_in(in), d_total(L.host->total), out(ref.size() * 2);
  activation::ActivationParams p = hp;
  p.in = d_in.get();
  p.out = out.get();
  p.total_padded_rows = d_total.as<std::int32_t>();
  PdlKnobs knobs;
  knobs.pdl = false;
  activation::run(p, knobs, nullptr);
  auto const got = out.download<std::uint16_t>();
  std::size_t const m = static_cast<std::size_t>(L.host->total[0] * I);
  int negative = 0;
  for (std::size_t i = 0; i < m; ++i) {
    double const x = bf16_to_float(got[i]), y = bf16_to_float(ref[i]);
    BOOST_REQUIRE_MESSAGE(std::isfinite(x), "element " << i << " not written or not finite");
    BOOST_TEST(std::fabs(x - y) <= std::fabs(y) / 128 + 1e-6, "element " << i);
    negative += x < 0;
  }
  if (type == activation::Type::kRelu2)
    BOOST_TEST(negative == 0);
  else
    BOOST_TEST(negative > 0); // silu(gate) * up takes both signs on these inputs
}

} // namespace

BOOST_AUTO_TEST_CASE(grouped_gemm_matches_the_reference_for_every_row_tile) {
  // k = 96 and 352 end in single k steps after the grouped ones; n = 192 is not a multiple of
  // 128 (warp items of 32 columns at tiles 16 and 32, of 16 above).
  for (bool skip : {false, true}) {
    check_gemm(16, 128, 96, 30, skip);
    check_gemm(16, 192, 352, 34, skip);
    check_gemm(32, 64, 256, 31, skip);
    check_gemm(64, 192, 64, 32, skip);
    check_gemm(128, 64, 32, 33, skip);
  }
}

BOOST_AUTO_TEST_CASE(grouped_gemm_rejects_unsupported_shapes) {
  gemm::GroupedGemmParams p;
  p.n = 100;
  p.k = 64;
  BOOST_CHECK_THROW(gemm::validate(p), InputError);
}

BOOST_AUTO_TEST_CASE(swiglu_matches_the_reference) {
  check_activation(activation::Type::kSwiGlu);
}

BOOST_AUTO_TEST_CASE(relu2_matches_the_reference) {
  check_activation(activation::Type::kRelu2);
}

BOOST_AUTO_TEST_CASE(device_weights_are_seeded_and_never_zero) {
  std::int64_t const n = 1 << 16;
  DeviceBuffer a(n * 2), b(n * 2), c(n * 2);
  gemm::fill_random_bf16(a.get(), n, 5, 0.05f, 1.0f, 0.01f, nullptr);
  gemm::fill_random_bf16(b.get(), n, 5, 0.05f, 1.0f, 0.01f, nullptr);
  gemm::fill_random_bf16(c.get(), n, 6, 0.05f, 1.0f, 0.01f, nullptr);
  auto const ha = a.download<std::uint16_t>();
  BOOST_TEST(ha == b.download<std::uint16_t>(), boost::test_tools::per_element());
  BOOST_TEST((ha != c.download<std::uint16_t>()));
  int neg = 0;
  for (auto v : ha) {
    float const f = bf16_to_float(v);
    BOOST_REQUIRE(std::fabs(f) >= 0.0004f);
    BOOST_REQUIRE(std::fabs(f) <= 0.0101f);
    neg += f < 0;
  }
  BOOST_TEST(neg > n / 3);
  BOOST_TEST(neg < 2 * n / 3);
}
