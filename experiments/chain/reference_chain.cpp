#include "experiments/chain/reference_chain.hpp"

#include "core/ops/errors.hpp"
#include "reference/activation.hpp"
#include "reference/finalize.hpp"
#include "reference/gemm.hpp"
#include "reference/permute.hpp"
#include "reference/routing.hpp"

#include <algorithm>
#include <map>

namespace moefin::chain_run {

#ifdef MOEFIN_HAVE_CUDA

std::vector<std::uint16_t> reference_output(chain::LayerPlan const& plan,
                                            chain::LayerWeights const& w, std::int64_t tokens,
                                            std::uint64_t seed,
                                            std::vector<std::uint16_t> const& hidden) {
  chain::LayerShape const& s = w.shape();
  std::int64_t const T = tokens, K = s.top_k, E = s.experts, H = s.hidden, I = s.inter;
  std::int64_t const TK = T * K, n1 = s.gemm1_n();
  auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };
  std::vector<float> const scores = chain::router_scores(seed, T, E);
  std::vector<std::int32_t> ids(sz(TK)), e2p(sz(TK)), p2t(sz(TK)), p2e(sz(TK)), counts(sz(E)),
      offsets(sz(E + 1)), cta(sz(TK)), total(1);
  std::vector<std::uint16_t> weights(sz(TK)), permuted(sz(TK * H)), g1(sz(TK * n1)),
      act(sz(TK * I)), g2(sz(TK * H)), out(sz(T * H));
  // Only the experts the routing uses, renumbered densely (filled after routing).
  std::vector<std::int32_t> cta_dense(sz(TK), -1);
  std::vector<std::uint16_t> w1, w2;
  std::int64_t used_experts = 0;
  auto gemm_of = [&](void const* a, void const* b, void* c, std::int64_t n, std::int64_t k) {
    gemm::GroupedGemmParams g;
    g.a = a;
    g.b = b;
    g.c = c;
    g.cta_to_expert = cta_dense.data();
    g.total_padded_rows = total.data();
    g.max_rows = TK;
    g.n = n;
    g.k = k;
    g.ldc = n;
    g.tile_m = 1;
    g.num_local_experts = std::max<std::int64_t>(used_experts, 1);
    return g;
  };
  // reference::finalize over GEMM2's output: after finalize's turn in the plan, or inside GEMM2's.
  auto finalize_reference = [&]() {
    if (plan.finalize->fp8_output)
      throw InputError("the reference chain: finalize variant " + plan.finalize->name +
                       " writes E4M3; the chain's output is bf16");
    finalize::FinalizeParams fp;
    fp.gemm_out = g2.data();
    fp.expert_weights = weights.data();
    fp.expanded_to_permuted = e2p.data();
    fp.out = out.data();
    fp.num_tokens = T;
    fp.hidden = H;
    fp.hidden_padded = H;
    fp.top_k = K;
    fp.num_rows = TK;
    fp.weight_type = finalize::WeightType::kBf16;
    reference::finalize(fp);
  };
  // The plan's kernels in its order (the checksum has no reference: it only measures).
  for (chain::KernelPlan const& k : plan.kernels) {
    switch (k.kernel) {
    case chain::Kernel::kRouting: {
      routing::RoutingParams rp;
      rp.scores = scores.data();
      rp.expert_ids = ids.data();
      rp.expert_weights = weights.data();
      rp.expanded_to_permuted = e2p.data();
      rp.permuted_to_token = p2t.data();
      rp.permuted_to_expanded = p2e.data();
      rp.expert_counts = counts.data();
      rp.expert_offsets = offsets.data();
      rp.cta_to_expert = cta.data();
      rp.total_padded_rows = total.data();
      rp.num_tokens = T;
      rp.num_experts = E;
      rp.top_k = K;
      rp.local_expert_begin = 0;
      rp.num_local_experts = E;
      rp.tile = 1;
      rp.max_padded_rows = TK;
      rp.method = routing::Method::kSoftmaxTopK;
      rp.renormalize = true;
      rp.weight_type = finalize::WeightType::kBf16;
      reference::routing(rp);
      std::map<std::int32_t, std::int32_t> dense;
      for (std::int64_t r = 0; r < total[0]; ++r)
        if (cta[sz(r)] >= 0)
          dense.emplace(cta[sz(r)], static_cast<std::int32_t>(dense.size()));
      for (std::int64_t r = 0; r < total[0]; ++r)
        cta_dense[sz(r)] = cta[sz(r)] >= 0 ? dense.at(cta[sz(r)]) : -1;
      used_experts = static_cast<std::int64_t>(dense.size());
      w1.assign(sz(used_experts * n1 * H), 0);
      w2.assign(sz(used_experts * H * I), 0);
      for (auto const& [x, d] : dense) {
        auto const a = w.download_w1(x);
        auto const b = w.download_w2(x);
        std::copy(a.begin(), a.end(), w1.begin() + d * n1 * H);
        std::copy(b.begin(), b.end(), w2.begin() + d * H * I);
      }
      break;
    }
    case chain::Kernel::kPermute: {
      permute::PermuteParams pp;
      pp.hidden_states = hidden.data();
      pp.permuted_to_token = p2t.data();
      pp.total_padded_rows = total.data();
      pp.permuted = permuted.data();
      pp.num_tokens = T;
      pp.hidden = H;
      pp.max_rows = TK;
      reference::permute(pp);
      break;
    }
    case chain::Kernel::kGemm1:
      reference::grouped_gemm(gemm_of(permuted.data(), w1.data(), g1.data(), n1, H));
      break;
    case chain::Kernel::kActivation: {
      activation::ActivationParams ap;
      ap.in = g1.data();
      ap.out = act.data();
      ap.total_padded_rows = total.data();
      ap.max_rows = TK;
      ap.inter = I;
      ap.type = s.act;
      reference::activation(ap);
      break;
    }
    case chain::Kernel::kGemm2:
      reference::grouped_gemm(gemm_of(act.data(), w2.data(), g2.data(), H, I));
      if (!plan.at(chain::Kernel::kFinalize).launched) // the reduction is GEMM2's epilogue
        finalize_reference();
      break;
    case chain::Kernel::kFinalize:
      if (k.launched)
        finalize_reference();
      break;
    case chain::Kernel::kChecksum:
      break;
    }
  }
  return out;
}

#else

std::vector<std::uint16_t> reference_output(chain::LayerPlan const&, chain::LayerWeights const&,
                                            std::int64_t, std::uint64_t,
                                            std::vector<std::uint16_t> const&) {
  throw DeviceError("the reference chain needs a CUDA build (weights live on the device)");
}

#endif

} // namespace moefin::chain_run
