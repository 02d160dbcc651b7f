// Host half of the finalize dispatcher: the selection rule and the launch geometry. No CUDA
// here, so that the rule and the shape checks are unit-tested on machines without a GPU.

#include "kernels/finalize/finalize.hpp"
#include "kernels/finalize/finalize_policy.hpp"

#include "core/errors.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

namespace moefin::finalize {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

bool aligned16(void const* ptr) {
  return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
}

/// The row of gemm_out and of out can be read and written with 128-bit accesses.
bool rows_are_128bit(FinalizeParams const& p) {
  return p.hidden % Policy::kVecElems == 0 && p.hidden_padded % Policy::kVecElems == 0 &&
         aligned16(p.gemm_out) && aligned16(p.out);
}

std::string shape_text(FinalizeParams const& p) {
  return "hidden=" + std::to_string(p.hidden) +
         ", hidden_padded=" + std::to_string(p.hidden_padded) +
         ", tokens=" + std::to_string(p.num_tokens) + ", top_k=" + std::to_string(p.top_k);
}

[[noreturn]] void unsupported(Variant v, std::string const& why, FinalizeParams const& p) {
  throw InputError(std::string("finalize: variant ") + variant_name(v) + " " + why + " (" +
                   shape_text(p) + ")");
}

void check_common(FinalizeParams const& p, Options const& o) {
  auto range = [](char const* field, std::int64_t v, std::int64_t lo, std::int64_t hi) {
    if (v < lo || v > hi)
      throw InputError(std::string("finalize: ") + field + " " + std::to_string(v) +
                       " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  };
  range("num_tokens", p.num_tokens, 1, INT_MAX);
  range("hidden", p.hidden, 1, INT_MAX);
  range("hidden_padded", p.hidden_padded, p.hidden, INT_MAX);
  range("top_k", p.top_k, 1, INT_MAX / std::max<std::int64_t>(p.num_tokens, 1));
  range("num_rows", p.num_rows, 0, INT_MAX);
  range("cta_budget", o.cta_budget, 1, INT_MAX);
  range("pdl.delay_ns", o.pdl.delay_ns, 0, std::int64_t(10) * 1000 * 1000 * 1000);
  if (p.gemm_out == nullptr || p.expanded_to_permuted == nullptr || p.out == nullptr)
    throw InputError("finalize: gemm_out, expanded_to_permuted and out must be device pointers "
                     "(one is null)");
  switch (p.weight_type) {
  case WeightType::kNone:
    break;
  case WeightType::kBf16:
  case WeightType::kFp32:
    if (p.expert_weights == nullptr)
      throw InputError("finalize: weight_type bf16/fp32 needs expert_weights (null); use "
                       "WeightType::kNone for unweighted sums");
    break;
  default:
    throw InputError("finalize: weight_type " + std::to_string(static_cast<int>(p.weight_type)) +
                     " is not none/bf16/fp32");
  }
  int const trig = static_cast<int>(o.pdl.trigger);
  if (trig < static_cast<int>(Trigger::kDefault) || trig > static_cast<int>(Trigger::kAfterWrites))
    throw InputError("finalize: pdl.trigger " + std::to_string(trig) + " is not a placement");
  if (o.slice_chunks != 0 && o.slice_chunks != 8 && o.slice_chunks != 16 && o.slice_chunks != 32)
    throw InputError("finalize: slice_chunks " + std::to_string(o.slice_chunks) +
                     " not one of {0 (policy), 8, 16, 32}");
}

void check_vectorized(Variant v, FinalizeParams const& p) {
  if (p.hidden % Policy::kVecElems != 0 || p.hidden_padded % Policy::kVecElems != 0)
    unsupported(v, "needs hidden and hidden_padded multiples of 8 (128-bit loads); use scalar", p);
  if (!aligned16(p.gemm_out) || !aligned16(p.out))
    unsupported(v, "needs gemm_out and out 16-byte aligned (128-bit loads)", p);
  if (p.top_k > Policy::kMaxTopK)
    unsupported(v, "supports top_k <= " + std::to_string(Policy::kMaxTopK), p);
}

/// Largest slice (in 128-bit chunks) that still gives the launch kTargetCtas CTAs.
int slice_chunks_for(FinalizeParams const& p, Options const& o) {
  if (o.slice_chunks != 0)
    return o.slice_chunks;
  std::int64_t const chunks = p.hidden / Policy::kVecElems;
  int x = Policy::kMaxSliceChunks;
  while (x > Policy::kMinSliceChunks && ceil_div(chunks, x) * p.num_tokens < Policy::kTargetCtas)
    x /= 2;
  return x;
}

int vecload_unroll(std::int64_t k) {
  return k % 4 == 0 ? 4 : k % 2 == 0 ? 2 : 1;
}

} // namespace

char const* variant_name(Variant v) {
  switch (v) {
  case Variant::kAuto:
    return "auto";
  case Variant::kScalar:
    return "scalar";
  case Variant::kVecload:
    return "vecload";
  case Variant::kSmallBatch:
    return "small_batch";
  case Variant::kDeepseekFp8:
    return "deepseek_fp8";
  }
  return "?";
}

Variant select(FinalizeParams const& p, Options const& o) {
  if (o.variant != Variant::kAuto)
    return o.variant;
  if (o.deepseek_fp8)
    return Variant::kDeepseekFp8;
  // 128-bit paths need aligned rows and stage at most kMaxTopK experts; the scalar kernel
  // handles every shape (its token loop covers any T).
  if (!rows_are_128bit(p) || p.top_k > Policy::kMaxTopK)
    return Variant::kScalar;
  std::int64_t const row_ctas = ceil_div(p.hidden, Policy::kRuleColumns);
  if (o.allow_small_batch && row_ctas * p.num_tokens < o.cta_budget && p.top_k > Policy::kMaxLoads)
    return Variant::kSmallBatch;
  if (row_ctas * std::min<std::int64_t>(Policy::kScalarMaxGridY, p.num_tokens) < o.cta_budget)
    return Variant::kScalar;
  return Variant::kVecload;
}

LaunchPlan plan(FinalizeParams const& p, Options const& o) {
  check_common(p, o);
  LaunchPlan lp;
  lp.variant = select(p, o);
  bool const entry_default = lp.variant == Variant::kSmallBatch;
  lp.trigger = o.pdl.trigger != Trigger::kDefault ? o.pdl.trigger
               : entry_default                    ? Trigger::kEntry
                                                  : Trigger::kExit;
  switch (lp.variant) {
  case Variant::kScalar:
    lp.grid_x = static_cast<int>(ceil_div(p.hidden, Policy::kScalarThreads));
    lp.grid_y = static_cast<int>(std::min<std::int64_t>(p.num_tokens, Policy::kScalarMaxGridY));
    lp.block_x = Policy::kScalarThreads;
    lp.block_y = 1;
    lp.loads_per_thread = 1;
    break;
  case Variant::kVecload:
    check_vectorized(lp.variant, p);
    lp.grid_x = static_cast<int>(p.num_tokens);
    lp.grid_y = 1;
    lp.block_x = Policy::kVecloadThreads;
    lp.block_y = 1;
    lp.loads_per_thread = vecload_unroll(p.top_k);
    break;
  case Variant::kSmallBatch: {
    check_vectorized(lp.variant, p);
    if (p.num_tokens > Policy::kMaxGridY)
      unsupported(lp.variant, "supports at most " + std::to_string(Policy::kMaxGridY) + " tokens",
                  p);
    int const x = slice_chunks_for(p, o);
    int const groups = o.split_topk ? static_cast<int>(ceil_div(p.top_k, Policy::kMaxLoads)) : 1;
    lp.grid_x = static_cast<int>(ceil_div(p.hidden / Policy::kVecElems, x));
    lp.grid_y = static_cast<int>(p.num_tokens);
    lp.block_x = x;
    lp.block_y = groups;
    lp.loads_per_thread =
        static_cast<int>(std::min<std::int64_t>(ceil_div(p.top_k, groups), Policy::kMaxLoads));
    break;
  }
  case Variant::kDeepseekFp8:
    // in_scales is read only for rows that exist: with every expert dropped there are none.
    if ((p.in_scales == nullptr && p.num_rows > 0) || p.out_scales == nullptr)
      unsupported(lp.variant, "needs in_scales and out_scales (one is null)", p);
    lp.grid_x = static_cast<int>(ceil_div(p.hidden, Policy::kScaleBlock));
    lp.grid_y = static_cast<int>(std::min<std::int64_t>(p.num_tokens, Policy::kDeepseekMaxGridY));
    lp.block_x = Policy::kScaleBlock;
    lp.block_y = 1;
    lp.loads_per_thread = 1;
    break;
  case Variant::kAuto:
    throw InputError("finalize: no variant selected");
  default:
    throw InputError("finalize: variant " + std::to_string(static_cast<int>(lp.variant)) +
                     " is not a finalize variant");
  }
  return lp;
}

} // namespace moefin::finalize
