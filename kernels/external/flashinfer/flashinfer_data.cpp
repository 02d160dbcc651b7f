#include "kernels/external/flashinfer/flashinfer_data.hpp"

namespace moefin::external::flashinfer {

namespace tg = batchedGemm::trtllm::gen;

moe::dev::finalize::Data finalize_data(FinalizeParams const& p, bool pdl,
                                       DeepseekScales const* deepseek) {
  moe::dev::finalize::Data d;
  d.mDtypeElt = tg::Dtype::Bfloat16;
  // Without weights the released kernels test the pointer; the type then only picks the
  // instantiation, as in the released runner (expert weights stored as bf16).
  d.mDtypeExpW =
      p.weight_type == finalize::WeightType::kFp32 ? tg::Dtype::Fp32 : tg::Dtype::Bfloat16;
  d.mUsePdl = pdl;
  d.mUseDeepSeekFp8 = deepseek != nullptr;
  // The released Data holds non-const pointers to inputs it never writes.
  d.inPtr = const_cast<void*>(p.gemm_out);
  d.inPtr2 = nullptr;
  d.outPtr = p.out;
  d.inDqSfsPtr = deepseek ? const_cast<float*>(deepseek->in_by_block) : nullptr;
  d.outDqSfsPtr = deepseek ? deepseek->out_by_block : nullptr;
  d.expertWeightsPtr =
      p.weight_type == finalize::WeightType::kNone ? nullptr : const_cast<void*>(p.expert_weights);
  d.expandedIdxToPermutedIdx = const_cast<std::int32_t*>(p.expanded_to_permuted);
  d.numTokens = static_cast<std::int32_t>(p.num_tokens);
  d.numExperts = 0;
  d.topK = static_cast<std::int32_t>(p.top_k);
  d.hiddenDim = static_cast<std::int32_t>(p.hidden);
  d.hiddenDimPadded = static_cast<std::int32_t>(p.hidden_padded);
  d.totalNumPaddedTokens = deepseek ? deepseek->total_padded_rows : nullptr;
  return d;
}

moe::dev::routing::routingCustom::Data routing_data(routing::RoutingParams const& p,
                                                    RoutingExtras const& x, bool pdl) {
  namespace rt = moe::dev::routing;
  rt::routingCustom::Data d;
  d.mUsePdl = pdl;
  d.mDtypeInput = tg::Dtype::Fp32;
  d.mDtypeOutput =
      p.weight_type == finalize::WeightType::kFp32 ? tg::Dtype::Fp32 : tg::Dtype::Bfloat16;
  bool const softmax_first = p.method == routing::Method::kSoftmaxTopK && !p.renormalize;
  d.mPreprocessType =
      softmax_first ? rt::RoutingPreprocessType::Softmax : rt::RoutingPreprocessType::None;
  d.mPostprocessType =
      softmax_first ? rt::RoutingPostprocessType::None : rt::RoutingPostprocessType::Softmax;
  d.mPtrScores = p.scores;
  d.mPtrTopKIds = nullptr;
  d.mPtrTopKPacked = nullptr;
  d.mPtrExpertCounts = nullptr;
  d.mPtrTopKWeights = p.expert_weights;
  d.mPtrExpandedIdxToPermutedIdx = p.expanded_to_permuted;
  d.mPtrPermutedIdxToExpandedIdx = p.permuted_to_expanded;
  d.mPtrPermutedIdxToTokenIdx = p.permuted_to_token;
  d.mPtrPermutedIdxSize = p.total_padded_rows;
  d.mPtrCtaIdxXyToBatchIdx = p.cta_to_expert;
  d.mPtrCtaIdxXyToMnLimit = x.tile_row_limit;
  d.mPtrNumNonExitingCtas = x.num_tiles;
  d.mNumTokens = static_cast<std::int32_t>(p.num_tokens);
  d.mNumExperts = static_cast<std::int32_t>(p.num_experts);
  d.mTopK = static_cast<std::int32_t>(p.top_k);
  d.mTileTokensDim = static_cast<std::int32_t>(p.tile);
  int log2 = 0;
  while ((std::int64_t{1} << log2) < p.tile)
    ++log2;
  d.mPaddingLog2 = (std::int64_t{1} << log2) == p.tile ? log2 : -1;
  d.mLocalExpertsStartIdx = static_cast<std::int32_t>(p.local_expert_begin);
  d.mLocalExpertsStrideLog2 = 0;
  d.mNumLocalExperts = static_cast<std::int32_t>(p.num_local_experts);
  return d;
}

moe::dev::permute::Data permute_data(permute::PermuteParams const& p,
                                     std::int32_t const* expanded_to_permuted, std::int64_t top_k,
                                     bool pdl) {
  moe::dev::permute::Data d;
  d.mDtypeElt = tg::Dtype::Bfloat16;
  d.mUsePdl = pdl;
  d.mUseDeepSeekFp8 = false;
  d.inPtr = const_cast<void*>(p.hidden_states);
  d.outPtr = p.permuted;
  d.inDqSfsPtr = nullptr;
  d.outDqSfsPtr = nullptr;
  d.expandedIdxToPermutedIdx = const_cast<std::int32_t*>(expanded_to_permuted);
  d.hiddenDim = static_cast<std::int32_t>(p.hidden);
  d.numTokens = static_cast<std::int32_t>(p.num_tokens);
  d.topK = static_cast<std::int32_t>(top_k);
  d.totalNumPaddedTokens = p.total_padded_rows;
  return d;
}

moe::dev::activation::Data activation_data(activation::ActivationParams const& p,
                                           std::int32_t const* expanded_to_permuted,
                                           std::int64_t num_tokens, std::int64_t top_k, bool pdl) {
  moe::dev::activation::Data d;
  d.mDtypeElt = tg::Dtype::Bfloat16;
  d.mUsePdl = pdl;
  d.mUseDeepSeekFp8 = false;
  d.inPtr = const_cast<void*>(p.in);
  d.outPtr = p.out;
  d.innerDim = static_cast<std::int32_t>(2 * p.inter);
  d.numTokens = static_cast<std::int32_t>(num_tokens);
  d.topK = static_cast<std::int32_t>(top_k);
  d.expandedIdxToPermutedIdx = const_cast<std::int32_t*>(expanded_to_permuted);
  d.totalNumPaddedTokens = p.total_padded_rows;
  return d;
}

} // namespace moefin::external::flashinfer
