#include "experiments/chain/reference_chain.hpp"

#include "core/ops/errors.hpp"
#include "reference/activation.hpp"
#include "reference/decode_gemm.hpp"
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
  // The used experts' matrices as stored (bf16 bits or packed e2m1, fp4 scales, global scales).
  bool const fp4 = w.fp4();
  bool const decode = !plan.tiled_gemms();
  if (plan.weights != (fp4 ? "fp4" : "bf16"))
    throw std::logic_error("reference chain: the plan's GEMMs read " + plan.weights +
                           " weights, the weights are " + w.format());
  std::vector<std::uint8_t> w1, w2, s1, s2;
  std::vector<float> g1s, g2s;
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
  // The tiled flavour's GEMMs against reference::grouped_gemm, the decode flavours' against
  // reference::decode_gemm, which dequantizes fp4 as the kernel does (exactly; the sum in double).
  auto run_gemm = [&](gemm::GroupedGemmParams const& g, int which) {
    if (!decode) {
      reference::grouped_gemm(g);
      return;
    }
    gemm::DecodeGemmParams d;
    d.gemm = g;
    d.format = fp4 ? gemm::WeightFormat::kFp4 : gemm::WeightFormat::kBf16;
    if (fp4) {
      d.scales = which == 1 ? s1.data() : s2.data();
      d.global_scale = which == 1 ? g1s.data() : g2s.data();
    }
    reference::decode_gemm(d);
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
      w1.clear();
      w2.clear();
      s1.clear();
      s2.clear();
      g1s.assign(sz(used_experts), 0.0f);
      g2s.assign(sz(used_experts), 0.0f);
      std::vector<std::int32_t> expert_of(sz(used_experts));
      for (auto const& [x, d] : dense)
        expert_of[sz(d)] = x;
      for (std::int64_t d = 0; d < used_experts; ++d) { // copy d is dense expert d
        auto const a = w.download(1, expert_of[sz(d)]);
        auto const b = w.download(2, expert_of[sz(d)]);
        w1.insert(w1.end(), a.values.begin(), a.values.end());
        w2.insert(w2.end(), b.values.begin(), b.values.end());
        s1.insert(s1.end(), a.scales.begin(), a.scales.end());
        s2.insert(s2.end(), b.scales.begin(), b.scales.end());
        g1s[sz(d)] = a.global;
        g2s[sz(d)] = b.global;
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
      run_gemm(gemm_of(permuted.data(), w1.data(), g1.data(), n1, H), 1);
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
      run_gemm(gemm_of(act.data(), w2.data(), g2.data(), H, I), 2);
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
