// The finalize inside GEMM2 on the GPU (gpu label): through the layer chain, its output is
// bitwise the separate scalar finalize's over the same GEMM2 output and within the tolerance of
// the Kokkos reference chain, with PDL on and off, for K = 1, 8, 22 and 32 (the chain's largest
// top-K); the arrival counters start every batch poisoned and every layer cleared by its GEMM1
// (each ends at its token's expert count). Alone, with dropped experts (EP): bitwise reference::finalize over the GEMM's
// own output, tokens without a local expert zero.
#include "tests/gpu_main.hpp"

#include "core/chain/presets.hpp"
#include "core/layout.hpp"
#include "core/rng.hpp"
#include "core/routing.hpp"
#include "experiments/chain/reference_chain.hpp"
#include "experiments/chain/run.hpp"
#include "kernels/chain/chain.hpp"
#include "kernels/gemm/gemm.hpp"
#include "reference/finalize.hpp"
#include "reference/kokkos_env.hpp"
#include "tests/chain_device.hpp"

#include <cstring>
#include <string>
#include <vector>

using namespace moefin;
using namespace moefin::chain;

namespace {

struct Kokkos {
  reference::KokkosSession session;
};
BOOST_TEST_GLOBAL_FIXTURE(Kokkos);

ChainConfig with_finalize(Preset p, char const* variant) {
  ChainConfig c = preset_config(p);
  apply_overrides(c, std::string("finalize.variant=") + variant);
  return c;
}

std::vector<std::uint16_t> as_bf16(std::vector<std::uint8_t> const& bytes, std::size_t n) {
  std::vector<std::uint16_t> v(n);
  std::memcpy(v.data(), bytes.data(), n * 2);
  return v;
}

/// Index of the first element where a and b differ in bits, or -1.
std::int64_t first_diff(std::vector<std::uint16_t> const& a, std::vector<std::uint16_t> const& b) {
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] != b[i])
      return static_cast<std::int64_t>(i);
  return a.size() == b.size() ? -1 : static_cast<std::int64_t>(std::min(a.size(), b.size()));
}

} // namespace

BOOST_AUTO_TEST_CASE(fused_chain_output_is_the_separate_scalar_finalize_bit_for_bit) {
  for (char const* text : {"H1024/I256/E32/top-1", "H1024/I256/E32/top-8", "H2048/I256/E64/top-22",
                           "H512/I128/E128/top-32"}) {
    LayerShape const s = parse_shape(text);
    LayerWeights const w(s, 11);
    for (std::int64_t T : {1, 3, 16}) {
      std::string const where = std::string(text) + " T=" + std::to_string(T);
      RunnerOptions o;
      o.tokens = T;
      o.iterations = 8; // the last layer counts on counters the layers before it left
      ChainRunner r(w, o);
      std::vector<std::uint64_t> seeds(8);
      for (int i = 0; i < 8; ++i)
        seeds[static_cast<std::size_t>(i)] = routing_seed(2026, s, T, i);
      r.set_routings(seeds);
      std::size_t const n = static_cast<std::size_t>(T * s.hidden);
      for (Preset p : {Preset::kSeedAfter, Preset::kAllEarly}) {
        ChainConfig const fused = with_finalize(p, "fused");
        BOOST_TEST_REQUIRE(!r.plan(fused).at(Kernel::kFinalize).launched);
        auto const off = r.run_batch(fused, false);
        auto const out_off = as_bf16(r.download(Buffer::kOut), n);
        auto const on = r.run_batch(fused, true);
        auto const out_on = as_bf16(r.download(Buffer::kOut), n);
        auto const g2_fused = r.download(Buffer::kGemm2Out);
        auto const counters = r.fused_counters();
        chain_run::Series x;
        chain_run::add_batch(x, on, off, seeds);
        BOOST_TEST(x.mismatches == 0, where << " " << preset_name(p) << ": PDL on and off differ "
                                            << "first in buffer " << x.first_buffer);
        BOOST_TEST(first_diff(out_on, out_off) == -1, where);
        // Every local expert counted once per slice of every token (all experts are local).
        for (std::size_t i = 0; i < counters.size(); ++i)
          if (counters[i] != s.top_k) {
            BOOST_ERROR(where << ": counter " << i << " = " << counters[i] << ", expected "
                              << s.top_k);
            break;
          }
        // The separate scalar finalize of the same routings (same GEMM2 output, bitwise).
        r.run_batch(with_finalize(p, "scalar"), true);
        auto const out_scalar = as_bf16(r.download(Buffer::kOut), n);
        BOOST_TEST((r.download(Buffer::kGemm2Out) == g2_fused), where << ": GEMM2 output");
        std::int64_t const d = first_diff(out_on, out_scalar);
        BOOST_TEST(d == -1, where << " " << preset_name(p) << ": out[" << d << "] fused 0x"
                                  << std::hex << (d >= 0 ? out_on[d] : 0) << " scalar 0x"
                                  << (d >= 0 ? out_scalar[d] : 0));
        if (p == Preset::kSeedAfter) {
          auto const ref =
              chain_run::reference_output(r.plan(fused), w, T, seeds.back(), r.hidden_states());
          double const err = chain_run::max_rel_err(out_on.data(), ref.data(), n);
          BOOST_TEST(err <= 1e-2, where << ": error vs the Kokkos reference chain " << err);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(fused_gemm2_with_dropped_experts_is_reference_finalize_bit_for_bit) {
  std::int64_t const T = 16, E = 32, K = 8, H = 512, I = 128, tile = 16;
  for (double drop : {0.5, 0.9}) {
    RoutingSpec spec = routing_spec(T, E, K, Distribution::kUniform, 5);
    spec.drop_fraction = drop;
    Routing const routing = generate_routing(spec);
    RoutingLayout const lay = build_layout(routing, spec, tile);
    std::int64_t const local = lay.num_local_experts;
    // The bound of core/layout.hpp in whole tiles: the GEMM takes max_rows in multiples of tile_m.
    std::int64_t const rows = (max_padded_rows(T, K, local, tile) + tile - 1) / tile * tile;
    std::int64_t unrouted = 0;
    for (std::int64_t t = 0; t < T; ++t) {
      bool any = false;
      for (std::int64_t k = 0; k < K; ++k)
        any = any || lay.expanded_to_permuted[static_cast<std::size_t>(t * K + k)] >= 0;
      unrouted += any ? 0 : 1;
    }
    std::vector<std::int32_t> p2t(static_cast<std::size_t>(rows), -1),
        cta(static_cast<std::size_t>(rows / tile), -1);
    std::copy(lay.permuted_to_token.begin(), lay.permuted_to_token.end(), p2t.begin());
    std::copy(lay.cta_to_expert.begin(), lay.cta_to_expert.end(), cta.begin());
    std::vector<std::int32_t> const total = {static_cast<std::int32_t>(lay.total_padded_rows)};
    test::DeviceBuffer e2p_d(lay.expanded_to_permuted), p2t_d(p2t), cta_d(cta), total_d(total),
        weights_d(routing.weights_bf16);
    test::DeviceBuffer a_d(static_cast<std::size_t>(rows * I) * 2),
        b_d(static_cast<std::size_t>(local * H * I) * 2);
    gemm::fill_random_bf16(a_d.get(), rows * I, 21, 0.05f, 1.0f, 1.0f, nullptr);
    gemm::fill_random_bf16(b_d.get(), local * H * I, 22, 0.05f, 1.0f, 0.1f, nullptr);
    test::DeviceBuffer c_plain(static_cast<std::size_t>(rows * H) * 2);
    gemm::GroupedGemmParams g;
    g.a = a_d.get();
    g.b = b_d.get();
    g.cta_to_expert = cta_d.as<std::int32_t>();
    g.total_padded_rows = total_d.as<std::int32_t>();
    g.row_token = p2t_d.as<std::int32_t>();
    g.max_rows = rows;
    g.n = H;
    g.k = I;
    g.ldc = H;
    g.tile_m = tile;
    g.num_local_experts = local;
    g.c = c_plain.get();
    gemm::run(g, PdlKnobs{false}, nullptr);
    auto const c_ref = c_plain.download<std::uint16_t>();
    for (bool pdl : {false, true}) {
      std::string const where = "drop " + std::to_string(drop) + (pdl ? " PDL on" : " PDL off");
      test::DeviceBuffer c_d(static_cast<std::size_t>(rows * H) * 2),
          out_d(static_cast<std::size_t>(T * H) * 2),
          counters_d(static_cast<std::size_t>(finalize::fused::counter_count(T, H)) * 4);
      g.c = c_d.get();
      finalize::fused::FusedParams f;
      f.fin.gemm_out = c_d.get();
      f.fin.expert_weights = weights_d.get();
      f.fin.expanded_to_permuted = e2p_d.as<std::int32_t>();
      f.fin.out = out_d.get();
      f.fin.num_tokens = T;
      f.fin.hidden = H;
      f.fin.hidden_padded = H;
      f.fin.top_k = K;
      f.fin.num_rows = rows;
      f.fin.weight_type = finalize::WeightType::kBf16;
      f.permuted_to_token = p2t_d.as<std::int32_t>();
      f.counters = counters_d.as<std::int32_t>(); // poisoned: the clear must reset them
      PdlKnobs knobs;
      knobs.pdl = pdl;
      gemm::run_clearing(g, knobs, f, nullptr); // the GEMM as "GEMM1", clearing the counters
      gemm::run_fused(g, knobs, f, nullptr);
      MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
      auto const c = c_d.download<std::uint16_t>();
      auto const out = out_d.download<std::uint16_t>();
      BOOST_TEST(first_diff(c, c_ref) == -1, where << ": GEMM2 output");
      std::vector<std::uint16_t> ref(static_cast<std::size_t>(T * H), 0xffff);
      finalize::FinalizeParams h = f.fin;
      h.gemm_out = c.data();
      h.expert_weights = routing.weights_bf16.data();
      h.expanded_to_permuted = lay.expanded_to_permuted.data();
      h.out = ref.data();
      reference::finalize(h);
      std::int64_t const d = first_diff(out, ref);
      BOOST_TEST(d == -1, where << ": out[" << d << "] fused 0x" << std::hex
                                << (d >= 0 ? out[d] : 0) << " reference 0x"
                                << (d >= 0 ? ref[d] : 0));
      BOOST_TEST_MESSAGE(where << ": " << local << " local experts, " << unrouted
                               << " tokens without one");
    }
    if (drop == 0.9)
      BOOST_TEST(unrouted > 0); // the zero path ran
  }
}
