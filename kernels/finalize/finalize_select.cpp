// Host half of the finalize dispatcher: the selection rule, the shape checks and the launch
// geometry of moefin's variants. No CUDA here, so that the rule and the shape checks are
// unit-tested on machines without a GPU; the entries that use these geometry functions are
// registered beside their launch code (finalize_dispatch.cu).

#include "kernels/finalize/finalize.hpp"
#include "kernels/finalize/finalize_policy.hpp"

#include "core/ops/errors.hpp"

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

std::string shape_text(FinalizeParams const& p) {
  return "hidden=" + std::to_string(p.hidden) +
         ", hidden_padded=" + std::to_string(p.hidden_padded) +
         ", tokens=" + std::to_string(p.num_tokens) + ", top_k=" + std::to_string(p.top_k);
}

[[noreturn]] void unsupported(FinalizeVariant const& v, std::string const& why,
                              FinalizeParams const& p) {
  throw InputError("finalize: variant " + v.name + " " + why + " (" + shape_text(p) + ")");
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

/// The limits an entry declares (FinalizeVariant::needs_128bit_rows, max_top_k).
void check_limits(FinalizeVariant const& v, FinalizeParams const& p) {
  if (v.needs_128bit_rows) {
    if (p.hidden % Policy::kVecElems != 0 || p.hidden_padded % Policy::kVecElems != 0)
      unsupported(v, "needs hidden and hidden_padded multiples of 8 (128-bit loads); use scalar",
                  p);
    if (!aligned16(p.gemm_out) || !aligned16(p.out))
      unsupported(v, "needs gemm_out and out 16-byte aligned (128-bit loads)", p);
  }
  if (v.max_top_k > 0 && p.top_k > v.max_top_k)
    unsupported(v, "supports top_k <= " + std::to_string(v.max_top_k), p);
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

LaunchPlan small_batch_launch(FinalizeParams const& p, Options const& o, FinalizeVariant const& v,
                              bool split_topk) {
  if (p.num_tokens > Policy::kMaxGridY)
    unsupported(v, "supports at most " + std::to_string(Policy::kMaxGridY) + " tokens", p);
  int const x = slice_chunks_for(p, o);
  int const groups = split_topk ? static_cast<int>(ceil_div(p.top_k, Policy::kMaxLoads)) : 1;
  LaunchPlan lp;
  lp.grid_x = static_cast<int>(ceil_div(p.hidden / Policy::kVecElems, x));
  lp.grid_y = static_cast<int>(p.num_tokens);
  lp.block_x = x;
  lp.block_y = groups;
  lp.loads_per_thread =
      static_cast<int>(std::min<std::int64_t>(ceil_div(p.top_k, groups), Policy::kMaxLoads));
  return lp;
}

/// The dispatchable moefin entry of a role (the rule picks among exactly those).
FinalizeVariant const& rule_entry(Role r) {
  for (auto const* v : variants())
    if (v->source == Source::kMoefin && v->dispatchable && v->role == r)
      return *v;
  throw std::logic_error(std::string("finalize: no dispatchable variant of role ") + role_name(r) +
                         " is registered");
}

} // namespace

LaunchPlan scalar_geometry(FinalizeParams const& p, Options const&, FinalizeVariant const&) {
  LaunchPlan lp;
  lp.grid_x = static_cast<int>(ceil_div(p.hidden, Policy::kScalarThreads));
  lp.grid_y = static_cast<int>(std::min<std::int64_t>(p.num_tokens, Policy::kScalarMaxGridY));
  lp.block_x = Policy::kScalarThreads;
  lp.block_y = 1;
  lp.loads_per_thread = 1;
  return lp;
}

LaunchPlan vecload_geometry(FinalizeParams const& p, Options const&, FinalizeVariant const&) {
  LaunchPlan lp;
  lp.grid_x = static_cast<int>(p.num_tokens);
  lp.grid_y = 1;
  lp.block_x = Policy::kVecloadThreads;
  lp.block_y = 1;
  lp.loads_per_thread = vecload_unroll(p.top_k);
  return lp;
}

LaunchPlan small_batch_geometry(FinalizeParams const& p, Options const& o,
                                FinalizeVariant const& v) {
  return small_batch_launch(p, o, v, /*split_topk=*/true);
}

LaunchPlan small_batch_nosplit_geometry(FinalizeParams const& p, Options const& o,
                                        FinalizeVariant const& v) {
  return small_batch_launch(p, o, v, /*split_topk=*/false);
}

LaunchPlan deepseek_geometry(FinalizeParams const& p, Options const&, FinalizeVariant const& v) {
  // in_scales is read only for rows that exist: with every expert dropped there are none.
  if ((p.in_scales == nullptr && p.num_rows > 0) || p.out_scales == nullptr)
    unsupported(v, "needs in_scales and out_scales (one is null)", p);
  LaunchPlan lp;
  lp.grid_x = static_cast<int>(ceil_div(p.hidden, Policy::kScaleBlock));
  lp.grid_y = static_cast<int>(std::min<std::int64_t>(p.num_tokens, Policy::kDeepseekMaxGridY));
  lp.block_x = Policy::kScaleBlock;
  lp.block_y = 1;
  lp.loads_per_thread = 1;
  return lp;
}

FinalizeVariant const& select(ShapeQuery const& q, Options const& o) {
  if (o.variant != nullptr)
    return *o.variant;
  if (o.deepseek_fp8)
    return rule_entry(Role::kFp8);
  // 128-bit paths need aligned rows and stage at most kMaxTopK experts; the scalar kernel
  // handles every shape (its token loop covers any T).
  bool const rows_128bit = q.hidden % Policy::kVecElems == 0 &&
                           q.hidden_padded % Policy::kVecElems == 0 && q.rows_aligned;
  if (!rows_128bit || q.top_k > Policy::kMaxTopK)
    return rule_entry(Role::kPrevious);
  std::int64_t const row_ctas = ceil_div(q.hidden, Policy::kRuleColumns);
  if (o.allow_small_batch && row_ctas * q.tokens < o.cta_budget && q.top_k > Policy::kMaxLoads)
    return rule_entry(Role::kSmallBatch);
  if (row_ctas * std::min<std::int64_t>(Policy::kScalarMaxGridY, q.tokens) < o.cta_budget)
    return rule_entry(Role::kPrevious);
  return rule_entry(Role::kLargeBatch);
}

FinalizeVariant const& select(FinalizeParams const& p, Options const& o) {
  ShapeQuery q;
  q.hidden = p.hidden;
  q.hidden_padded = p.hidden_padded;
  q.tokens = p.num_tokens;
  q.top_k = p.top_k;
  q.rows_aligned = aligned16(p.gemm_out) && aligned16(p.out);
  return select(q, o);
}

LaunchPlan plan(FinalizeParams const& p, Options const& o) {
  check_common(p, o);
  FinalizeVariant const& v = select(p, o);
  check_limits(v, p);
  LaunchPlan lp = v.geometry(p, o, v);
  lp.variant = &v;
  lp.trigger = v.trigger_for(o.pdl.trigger);
  lp.meta_before_wait = v.reads_meta_before_wait(o.metadata_before_wait);
  return lp;
}

} // namespace moefin::finalize
