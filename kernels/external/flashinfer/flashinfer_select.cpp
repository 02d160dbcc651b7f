// Host half of the adapter: the geometry each released finalize kernel gets from the released host
// code (moe::dev::finalize::run in trtllm_fused_moe_dev_kernel.cu; docs/design/released.md) and the
// shapes the released kernels cannot run. Written from the released source's launch arithmetic, not
// copied; no CUDA and no FlashInfer headers, so it builds and is tested everywhere.

#include "kernels/external/flashinfer/flashinfer.hpp"
#include "kernels/external/flashinfer/flashinfer_chain.hpp"

#include "core/ops/errors.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

namespace moefin::external::flashinfer {

namespace {

// Released constants: 256 threads per CTA (finalizeKernel, VecLoad, SmallBatch), 128 for the
// DeepSeek kernel; grid.y capped at 8192 tokens; top-K <= 64 for the 128-bit kernels; at most
// 4 independent loads per thread and 16 top-K groups in the small-batch kernel.
constexpr int kThreads = 256;
constexpr int kDeepseekThreads = 128;
constexpr int kMaxGridTokens = 8192;
constexpr std::int64_t kMaxTopK = 64;
constexpr int kSmallBatchMaxLoads = 4;
constexpr std::int64_t kVecElems = 8; // bf16 elements per 128-bit vector
constexpr std::int64_t kScaleBlock = 128;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

std::string shape_text(FinalizeParams const& p) {
  return "hidden=" + std::to_string(p.hidden) +
         ", hidden_padded=" + std::to_string(p.hidden_padded) +
         ", tokens=" + std::to_string(p.num_tokens) + ", top_k=" + std::to_string(p.top_k);
}

[[noreturn]] void unsupported(Kernel k, std::string const& why, FinalizeParams const& p) {
  throw InputError(std::string("flashinfer: ") + kernel_name(k) + " (" + kernel_symbol(k) + ") " +
                   why + " (" + shape_text(p) + ")");
}

void check_common(FinalizeParams const& p, Kernel k) {
  auto range = [&](char const* field, std::int64_t v, std::int64_t lo, std::int64_t hi) {
    if (v < lo || v > hi)
      unsupported(k,
                  std::string(field) + " " + std::to_string(v) + " out of range [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "] (int32 fields)",
                  p);
  };
  range("num_tokens", p.num_tokens, 1, INT_MAX);
  range("hidden", p.hidden, 1, INT_MAX);
  range("hidden_padded", p.hidden_padded, p.hidden, INT_MAX);
  range("top_k", p.top_k, 1, INT_MAX / p.num_tokens);
  range("num_rows", p.num_rows, 0, INT_MAX);
  // The released kernels index gemm_out and out with 32-bit products (permutedIdx * stride).
  if (p.num_rows * p.hidden_padded > INT_MAX || p.num_tokens * p.hidden > INT_MAX)
    unsupported(k, "needs num_rows * hidden_padded and tokens * hidden below 2^31", p);
  if (p.gemm_out == nullptr || p.expanded_to_permuted == nullptr || p.out == nullptr)
    unsupported(k, "needs gemm_out, expanded_to_permuted and out (one is null)", p);
  switch (p.weight_type) {
  case finalize::WeightType::kNone:
    break;
  case finalize::WeightType::kBf16:
  case finalize::WeightType::kFp32:
    if (p.expert_weights == nullptr)
      unsupported(k, "weight_type bf16/fp32 needs expert_weights (null)", p);
    break;
  default:
    unsupported(k, "weight_type " + std::to_string(static_cast<int>(p.weight_type)), p);
  }
}

bool vector_aligned(FinalizeParams const& p) {
  return p.hidden % kVecElems == 0 && p.hidden_padded % kVecElems == 0;
}

void check_vectorized(FinalizeParams const& p, Kernel k) {
  // The released kernels only assert this (compiled out with NDEBUG) and would drop the tail
  // columns or misalign the 128-bit accesses.
  if (!vector_aligned(p))
    unsupported(k, "needs hidden and hidden_padded multiples of 8 (128-bit vectors)", p);
  if (reinterpret_cast<std::uintptr_t>(p.gemm_out) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(p.out) % 16 != 0)
    unsupported(k, "needs gemm_out and out 16-byte aligned", p);
  if (p.top_k > kMaxTopK)
    unsupported(k, "supports top_k <= 64", p);
}

int released_unroll(std::int64_t k) {
  return k % 4 == 0 ? 4 : k % 2 == 0 ? 2 : 1;
}

int scalar_grid_y(FinalizeParams const& p) {
  return static_cast<int>(std::min<std::int64_t>(kMaxGridTokens, p.num_tokens));
}

LaunchPlan plan_scalar(FinalizeParams const& p) {
  LaunchPlan lp;
  lp.kernel = Kernel::kScalar;
  lp.grid_x = static_cast<int>(ceil_div(p.hidden, kThreads));
  lp.grid_y = scalar_grid_y(p);
  lp.block_x = kThreads;
  lp.block_y = 1;
  return lp;
}

LaunchPlan plan_vecload(FinalizeParams const& p) {
  check_vectorized(p, Kernel::kVecload);
  // The packed index/weight loads (int4 / 4 weights) need the token's row of K to stay aligned.
  if (p.expert_weights != nullptr && reinterpret_cast<std::uintptr_t>(p.expert_weights) % 16 != 0)
    unsupported(Kernel::kVecload, "needs expert_weights 16-byte aligned (packed loads)", p);
  if (reinterpret_cast<std::uintptr_t>(p.expanded_to_permuted) % 16 != 0)
    unsupported(Kernel::kVecload, "needs expanded_to_permuted 16-byte aligned (packed loads)", p);
  LaunchPlan lp;
  lp.kernel = Kernel::kVecload;
  lp.grid_x = static_cast<int>(p.num_tokens);
  lp.grid_y = 1;
  lp.block_x = kThreads;
  lp.block_y = 1;
  return lp;
}

LaunchPlan plan_small_batch(FinalizeParams const& p) {
  check_vectorized(p, Kernel::kSmallBatch);
  // kSplit: the fewest (power of two) top-K groups that keep each thread at <= 4 loads;
  // experts are interleaved over the groups (k = y, y + kSplit, ...).
  int split = 1;
  while (split * kSmallBatchMaxLoads < p.top_k)
    split *= 2;
  int const vecs_per_block = kThreads / split;
  std::int64_t const vecs = p.hidden / kVecElems;
  std::int64_t const slices = ceil_div(vecs, vecs_per_block);
  if (slices > 65535)
    unsupported(Kernel::kSmallBatch, "needs at most 65535 hidden slices (grid.y)", p);
  LaunchPlan lp;
  lp.kernel = Kernel::kSmallBatch;
  lp.grid_x = static_cast<int>(p.num_tokens); // one token per blockIdx.x
  lp.grid_y = static_cast<int>(slices);
  lp.block_x = vecs_per_block;
  lp.block_y = split;
  lp.k_split = split;
  return lp;
}

LaunchPlan plan_deepseek(FinalizeParams const& p) {
  // One CTA of 128 threads per 128-column block reduces the block's amax with a block-wide
  // reduction that every thread must reach: a partial last block would leave threads out.
  if (p.hidden % kScaleBlock != 0)
    unsupported(Kernel::kDeepseekFp8, "needs hidden a multiple of 128 (one CTA per scale block)",
                p);
  if (p.weight_type == finalize::WeightType::kNone)
    unsupported(Kernel::kDeepseekFp8, "reads the expert weights unconditionally (weights none)", p);
  if (p.in_scales == nullptr || p.out_scales == nullptr)
    unsupported(Kernel::kDeepseekFp8, "needs in_scales and out_scales", p);
  LaunchPlan lp;
  lp.kernel = Kernel::kDeepseekFp8;
  lp.grid_x = static_cast<int>(p.hidden / kScaleBlock);
  lp.grid_y = scalar_grid_y(p);
  lp.block_x = kDeepseekThreads;
  lp.block_y = 1;
  return lp;
}

/// moe::dev::finalize::run without DeepSeek: small batch when the scalar grid is below the
/// budget, the rows are 128-bit aligned and 4 < K <= 64; else scalar when the grid is below the
/// budget or the rows are unaligned; else the vectorized kernel (which needs K <= 64).
Kernel released_choice(FinalizeParams const& p) {
  std::int64_t const ctas = ceil_div(p.hidden, kThreads) * scalar_grid_y(p);
  bool const aligned = vector_aligned(p);
  if (ctas < kReleasedCtaBudget && aligned && p.top_k > kSmallBatchMaxLoads && p.top_k <= kMaxTopK)
    return Kernel::kSmallBatch;
  if (ctas < kReleasedCtaBudget || !aligned)
    return Kernel::kScalar;
  return Kernel::kVecload;
}

// Released routing limits: the static block kernel serves up to 4 tokens, the dynamic one up to
// 16 tokens and 512 experts (BlockKernelMaxNumTokens, DynBlockKernelMaxNumTokens,
// DynBlockKernelMaxNumExperts); at most 32 experts per token (MaxSupportedTopExperts) and 2048
// experts (MaxSupportedExperts).
constexpr std::int64_t kBlockMaxTokens = 4;
constexpr std::int64_t kDynBlockMaxTokens = 16;
constexpr std::int64_t kDynBlockMaxExperts = 512;
constexpr std::int64_t kRoutingMaxTopK = 32;
constexpr std::int64_t kRoutingMaxExperts = 2048;

[[noreturn]] void routing_unsupported(std::string const& why, routing::RoutingParams const& p) {
  throw InputError(
      "flashinfer: released routing " + why + " (tokens=" + std::to_string(p.num_tokens) +
      ", experts=" + std::to_string(p.num_experts) + ", top_k=" + std::to_string(p.top_k) + ")");
}

} // namespace

char const* routing_kernel_name(RoutingKernel k) {
  switch (k) {
  case RoutingKernel::kBlock:
    return "fi_routing_block";
  case RoutingKernel::kDynBlock:
    return "fi_routing_dyn_block";
  }
  return "?";
}

RoutingKernel routing_kernel(routing::RoutingParams const& p) {
  if (p.num_tokens < 1 || p.num_experts < 1 || p.num_experts > kRoutingMaxExperts)
    routing_unsupported("needs 1 <= tokens and 1 <= experts <= 2048", p);
  if (p.top_k < 1 || p.top_k > std::min(kRoutingMaxTopK, p.num_experts))
    routing_unsupported("needs 1 <= top_k <= min(32, experts)", p);
  if (p.weight_type != finalize::WeightType::kBf16 && p.weight_type != finalize::WeightType::kFp32)
    routing_unsupported("writes bf16 or fp32 weights (weights none)", p);
  if (p.tile < 1 || p.tile > INT_MAX || p.local_expert_begin < 0 || p.num_local_experts < 0 ||
      p.local_expert_begin + p.num_local_experts > p.num_experts)
    routing_unsupported("needs tile >= 1 and a local expert range inside [0, experts)", p);
  if (!p.scores || !p.expert_weights || !p.expanded_to_permuted || !p.permuted_to_token ||
      !p.permuted_to_expanded || !p.cta_to_expert || !p.total_padded_rows)
    routing_unsupported("needs scores, expert_weights, expanded_to_permuted, permuted_to_token, "
                        "permuted_to_expanded, cta_to_expert and total_padded_rows (one is null)",
                        p);
  if (p.num_tokens <= kBlockMaxTokens)
    return RoutingKernel::kBlock;
  if (p.num_tokens <= kDynBlockMaxTokens && p.num_experts <= kDynBlockMaxExperts)
    return RoutingKernel::kDynBlock;
  routing_unsupported("block kernels serve up to 4 tokens, or 16 tokens with at most 512 "
                      "experts (the released cluster kernels beyond are not built)",
                      p);
}

char const* kernel_name(Kernel k) {
  switch (k) {
  case Kernel::kScalar:
    return "fi_scalar";
  case Kernel::kVecload:
    return "fi_vecload";
  case Kernel::kSmallBatch:
    return "fi_small_batch";
  case Kernel::kDeepseekFp8:
    return "fi_deepseek_fp8";
  case Kernel::kDispatch:
    return "fi_dispatch";
  }
  return "?";
}

char const* kernel_symbol(Kernel k) {
  switch (k) {
  case Kernel::kScalar:
    return "finalizeKernel";
  case Kernel::kVecload:
    return "finalizeKernelVecLoad";
  case Kernel::kSmallBatch:
    return "finalizeKernelSmallBatch";
  case Kernel::kDeepseekFp8:
    return "finalizeDeepSeekKernel";
  case Kernel::kDispatch:
    return "moe::dev::finalize::run";
  }
  return "?";
}

bool parse_kernel(std::string const& name, Kernel* out) {
  for (int i = 0; i < kNumKernels; ++i) {
    auto const k = static_cast<Kernel>(i);
    if (name == kernel_name(k)) {
      *out = k;
      return true;
    }
  }
  return false;
}

LaunchPlan plan(FinalizeParams const& p, Kernel k) {
  check_common(p, k);
  LaunchPlan lp;
  switch (k) {
  case Kernel::kScalar:
    lp = plan_scalar(p);
    break;
  case Kernel::kVecload:
    lp = plan_vecload(p);
    break;
  case Kernel::kSmallBatch:
    lp = plan_small_batch(p);
    break;
  case Kernel::kDeepseekFp8:
    lp = plan_deepseek(p);
    break;
  case Kernel::kDispatch: {
    Kernel const chosen = released_choice(p);
    // The released run() checks top_k <= 64 only on the vectorized branch.
    if (chosen == Kernel::kVecload && p.top_k > kMaxTopK)
      unsupported(k, "picks finalizeKernelVecLoad here, which supports top_k <= 64", p);
    lp = plan(p, chosen);
    break;
  }
  default:
    throw InputError("flashinfer: kernel " + std::to_string(static_cast<int>(k)) +
                     " is not a released finalize entry");
  }
  lp.requested = k;
  lp.unroll = released_unroll(p.top_k);
  return lp;
}

} // namespace moefin::external::flashinfer
