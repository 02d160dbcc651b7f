#pragma once
// The finalize kernels (docs/design/finalize.md): __global__ functions and their device helpers.
// Launch geometry and every runtime -> compile-time decision live in finalize_dispatch.cu.
//
// Arithmetic contract shared with the Kokkos reference: each product w * x is rounded to fp32
// and added to the fp32 accumulator in ascending k (no fused multiply-add), so the variants that
// keep that order (scalar, vecload, small_batch without the split) are bitwise equal to
// reference::finalize; the split sums each group's ascending partial and then the groups in
// ascending order, the same order on every run.

#include "core/ops/finalize_params.hpp"
#include "core/ops/finalize_variants.hpp"
#include "core/ops/pdl_knobs.hpp"
#include "kernels/common/pdl.cuh"
#include "kernels/finalize/finalize_policy.hpp"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace moefin::finalize::kernels {

// ---------------------------------------------------------------------------------------------
// Knob sets. Every kernel takes its PDL knobs and probes as one argument of a knob-set type:
// `Knobs` (instrumented: every knob a runtime value, set per launch by the race, equivalence and
// timeline experiments) or `Lean<kTrigger, kMetaBeforeWait>` (the fast paths the dispatcher
// picks and the sweep times: placement and metadata side fixed at compile time, no delay, no
// stamps, no snapshot, so none of their code is compiled in). Both answer the same questions;
// the lean answers are constexpr.

/// Instrumented knobs (resolved by the dispatcher; the trigger is never kDefault here).
struct Knobs {
  std::int32_t trigger = static_cast<std::int32_t>(Trigger::kExit);
  std::int32_t meta_before_wait = 1;
  std::int64_t delay_ns = 0;
  std::int64_t* stamps = nullptr;   // [CTAs][4]: start, wait returned, trigger, end; or null
  std::int32_t* snapshot = nullptr; // [T*K] permuted indices the kernel used, or null

  __device__ bool fires_at(Trigger at) const { return trigger == static_cast<std::int32_t>(at); }
  __device__ bool meta_first() const { return meta_before_wait != 0; }
  __device__ std::int64_t delay() const { return delay_ns; }
  __device__ std::int64_t* stamp_out() const { return stamps; }
  __device__ std::int32_t* snap() const { return snapshot; }
};

/// The instrumented knobs of a launch planned by plan() (launch functions of registry entries).
inline Knobs knobs_of(LaunchPlan const& lp, Options const& o) {
  Knobs k;
  k.trigger = static_cast<std::int32_t>(lp.trigger);
  k.meta_before_wait = lp.meta_before_wait ? 1 : 0;
  k.delay_ns = o.pdl.delay_ns;
  k.stamps = o.pdl.stamps;
  k.snapshot = o.pre_wait_snapshot;
  return k;
}

/// Lean knobs: an empty argument.
template <Trigger kTrigger, bool kMetaBeforeWait> struct Lean {
  static_assert(kTrigger != Trigger::kDefault, "the dispatcher resolves the default placement");
  __device__ static constexpr bool fires_at(Trigger at) { return at == kTrigger; }
  __device__ static constexpr bool meta_first() { return kMetaBeforeWait; }
  __device__ static constexpr std::int64_t delay() { return 0; }
  __device__ static constexpr std::int64_t* stamp_out() { return nullptr; }
  __device__ static constexpr std::int32_t* snap() { return nullptr; }
};

/// The weight type as a kernel template parameter: FinalizeParams' three, or kRuntime for the
/// instrumented kernels, which read FinalizeParams::weight_type at run time (one uniform branch
/// per weight read), so that each of them is one instantiation instead of three.
enum class Weights : std::int32_t { kNone, kBf16, kFp32, kRuntime };
inline constexpr Weights kRuntimeWeights = Weights::kRuntime;

constexpr Weights weights_of(WeightType w) {
  return w == WeightType::kBf16   ? Weights::kBf16
         : w == WeightType::kFp32 ? Weights::kFp32
                                  : Weights::kNone;
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// Per-CTA %globaltimer stamps, written by thread (0, 0) as the events happen (holding them in
/// registers across the kernel made ptxas spill). Events that never happen stay -1. With lean
/// knobs the pointer is a constant null and every stamp compiles away.
class CtaStamps {
public:
  template <class K> __device__ explicit CtaStamps(K const& k) {
    if (k.stamp_out() && threadIdx.x == 0 && threadIdx.y == 0) {
      out_ = k.stamp_out() + 4 * (static_cast<std::int64_t>(blockIdx.y) * gridDim.x + blockIdx.x);
      out_[0] = static_cast<std::int64_t>(global_timer_ns());
      out_[1] = -1;
      out_[2] = -1;
      out_[3] = -1;
    }
  }
  __device__ void waited() { stamp(1); }
  __device__ void triggered() { stamp(2); }
  __device__ void finish() { stamp(3); }

private:
  __device__ void stamp(int i) {
    if (out_)
      out_[i] = static_cast<std::int64_t>(global_timer_ns());
  }
  std::int64_t* out_ = nullptr;
};

/// Triggers the dependent launch when the kernel's resolved placement is `at`. Instrumented: the
/// knob is a kernel parameter, so the branch is uniform over the grid; lean: resolved at compile
/// time.
template <class K>
__device__ __forceinline__ void trigger_if(K const& k, Trigger at, CtaStamps& st) {
  if (k.fires_at(at)) {
    pdl_trigger();
    st.triggered();
  }
}

/// Waits on the primary grid, then triggers if the placement is "after the wait".
template <class K> __device__ __forceinline__ void wait_primary(K const& k, CtaStamps& st) {
  pdl_wait();
  st.waited();
  trigger_if(k, Trigger::kAfterWait, st);
}

/// "After the kernel's last global write": every thread of the CTA has written first.
template <class K> __device__ __forceinline__ void trigger_after_writes(K const& k, CtaStamps& st) {
  if (k.fires_at(Trigger::kAfterWrites)) {
    __syncthreads();
    pdl_trigger();
    st.triggered();
  }
}

/// Delay injection: spin before the first global write.
template <class K> __device__ __forceinline__ void delay_before_write(K const& k) {
  if (k.delay() > 0)
    spin_ns(k.delay());
}

/// A permuted row that may be read: -1 (expert not local) and anything past the GEMM output
/// fail the same unsigned compare, so a corrupt index is skipped instead of read.
__device__ __forceinline__ bool row_ok(std::int32_t row, std::int64_t num_rows) {
  return static_cast<std::uint32_t>(row) < static_cast<std::uint64_t>(num_rows);
}

template <Weights W>
__device__ __forceinline__ float load_weight(FinalizeParams const& p, std::int64_t e) {
  if constexpr (W == kRuntimeWeights) {
    switch (p.weight_type) {
    case WeightType::kBf16:
      return load_weight<Weights::kBf16>(p, e);
    case WeightType::kFp32:
      return load_weight<Weights::kFp32>(p, e);
    default:
      return 1.0f;
    }
  } else if constexpr (W == Weights::kBf16) {
    return __bfloat162float(static_cast<__nv_bfloat16 const*>(p.expert_weights)[e]);
  } else if constexpr (W == Weights::kFp32) {
    return static_cast<float const*>(p.expert_weights)[e];
  } else {
    return 1.0f;
  }
}

__device__ __forceinline__ float fma_rounded(float acc, float w, float x) {
  return __fadd_rn(acc, __fmul_rn(w, x)); // two roundings, as the reference
}

__device__ __forceinline__ float bf16_lo(std::uint32_t v) {
  return __uint_as_float(v << 16);
}
__device__ __forceinline__ float bf16_hi(std::uint32_t v) {
  return __uint_as_float(v & 0xffff0000u);
}

/// acc[0..7] += w * the 8 bf16 of v (element 2i in the low half of word i).
__device__ __forceinline__ void accumulate8(float (&acc)[8], float w, uint4 v) {
  std::uint32_t const words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc[2 * i] = fma_rounded(acc[2 * i], w, bf16_lo(words[i]));
    acc[2 * i + 1] = fma_rounded(acc[2 * i + 1], w, bf16_hi(words[i]));
  }
}

__device__ __forceinline__ std::uint32_t pack_bf16x2(float lo, float hi) {
  return static_cast<std::uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
         (static_cast<std::uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
}

__device__ __forceinline__ void store8(__nv_bfloat16* out, float const (&acc)[8]) {
  uint4 v;
  v.x = pack_bf16x2(acc[0], acc[1]);
  v.y = pack_bf16x2(acc[2], acc[3]);
  v.z = pack_bf16x2(acc[4], acc[5]);
  v.w = pack_bf16x2(acc[6], acc[7]);
  *reinterpret_cast<uint4*>(out) = v;
}

__device__ __forceinline__ uint4 load8(__nv_bfloat16 const* in) {
  return *reinterpret_cast<uint4 const*>(in);
}

/// Stages token t's permuted indices and weights (as fp32) in shared memory, strided over
/// `nthreads` threads. The caller synchronizes.
template <Weights W>
__device__ __forceinline__ void stage_metadata(FinalizeParams const& p, std::int64_t t, int tid,
                                               int nthreads, std::int32_t* s_perm, float* s_w) {
  for (int k = tid; k < p.top_k; k += nthreads) {
    std::int64_t const e = t * p.top_k + k;
    s_perm[k] = p.expanded_to_permuted[e];
    s_w[k] = load_weight<W>(p, e);
  }
}

/// Stages the token's metadata before or after the grid-dependency wait, as the knob says, and
/// makes it visible to the whole CTA.
template <Weights W, class K>
__device__ __forceinline__ void stage_around_wait(FinalizeParams const& p, K const& k,
                                                  CtaStamps& st, std::int64_t t,
                                                  std::int32_t* s_perm, float* s_w) {
  if (k.meta_first())
    stage_metadata<W>(p, t, threadIdx.x, blockDim.x, s_perm, s_w);
  wait_primary(k, st);
  if (!k.meta_first())
    stage_metadata<W>(p, t, threadIdx.x, blockDim.x, s_perm, s_w);
  __syncthreads();
}

/// acc += sum over k of w[k] * row[perm[k]][col..col+7], kU independent 128-bit loads in flight,
/// ascending k. kGuard: K need not be a multiple of kU.
template <int kU, bool kGuard>
__device__ __forceinline__ void
accumulate_chunk(float (&acc)[8], __nv_bfloat16 const* in, std::int64_t hp, std::int64_t num_rows,
                 std::int64_t col, std::int32_t const* s_perm, float const* s_w, int top_k) {
  for (int k0 = 0; k0 < top_k; k0 += kU) {
    std::int32_t perm[kU];
    float w[kU];
    uint4 v[kU];
#pragma unroll
    for (int j = 0; j < kU; ++j) {
      bool const in_range = !kGuard || k0 + j < top_k;
      perm[j] = in_range ? s_perm[k0 + j] : -1;
      w[j] = in_range ? s_w[k0 + j] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kU; ++j) {
      v[j] = make_uint4(0, 0, 0, 0);
      if (row_ok(perm[j], num_rows))
        v[j] = load8(in + static_cast<std::int64_t>(perm[j]) * hp + col);
    }
#pragma unroll
    for (int j = 0; j < kU; ++j)
      if (row_ok(perm[j], num_rows))
        accumulate8(acc, w[j], v[j]);
  }
}

// ---------------------------------------------------------------------------------------------
// scalar: the previous small-batch kernel. Grid ceil(H/256) x min(8192, T), 256 threads, one
// output element per thread; waits at entry; per k it loads the index, then the weight, then
// one element, serially.

template <Weights W, class K>
__global__ void __launch_bounds__(Policy::kScalarThreads)
    finalize_scalar(FinalizeParams const p, K const k) {
  CtaStamps st(k);
  trigger_if(k, Trigger::kEntry, st);
  wait_primary(k, st);
  auto const* in = static_cast<__nv_bfloat16 const*>(p.gemm_out);
  auto* out = static_cast<__nv_bfloat16*>(p.out);
  std::int64_t const h = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool first_write = true;
  for (std::int64_t t = blockIdx.y; t < p.num_tokens; t += gridDim.y) {
    if (h < p.hidden) {
      float acc = 0.0f;
      for (int kk = 0; kk < p.top_k; ++kk) {
        std::int64_t const e = t * p.top_k + kk;
        std::int32_t const row = p.expanded_to_permuted[e];
        if (!row_ok(row, p.num_rows))
          continue;
        float const w = load_weight<W>(p, e);
        acc = fma_rounded(acc, w, __bfloat162float(in[row * p.hidden_padded + h]));
      }
      if (first_write) {
        delay_before_write(k);
        first_write = false;
      }
      out[t * p.hidden + h] = __float2bfloat16_rn(acc);
    }
    if (k.snap() && blockIdx.x == 0 && threadIdx.x == 0)
      for (int kk = 0; kk < p.top_k; ++kk)
        k.snap()[t * p.top_k + kk] = p.expanded_to_permuted[t * p.top_k + kk];
  }
  trigger_after_writes(k, st);
  st.finish();
}

// ---------------------------------------------------------------------------------------------
// vecload: the large-batch kernel. One CTA of 256 threads per token; the token's indices and
// weights are staged in shared memory before the wait; 128-bit loads, kU experts in flight.

template <Weights W, int kU, class K>
__global__ void __launch_bounds__(Policy::kVecloadThreads)
    finalize_vecload(FinalizeParams const p, K const k) {
  __shared__ std::int32_t s_perm[Policy::kMaxTopK];
  __shared__ float s_w[Policy::kMaxTopK];
  CtaStamps st(k);
  trigger_if(k, Trigger::kEntry, st);
  std::int64_t const t = blockIdx.x;
  stage_around_wait<W>(p, k, st, t, s_perm, s_w);

  auto const* in = static_cast<__nv_bfloat16 const*>(p.gemm_out);
  auto* out = static_cast<__nv_bfloat16*>(p.out) + t * p.hidden;
  std::int64_t const chunks = p.hidden / Policy::kVecElems;
  bool first_write = true;
  for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    accumulate_chunk<kU, false>(acc, in, p.hidden_padded, p.num_rows, c * Policy::kVecElems, s_perm,
                                s_w, static_cast<int>(p.top_k));
    if (first_write) {
      delay_before_write(k);
      first_write = false;
    }
    store8(out + c * Policy::kVecElems, acc);
  }
  if (k.snap())
    for (int kk = threadIdx.x; kk < p.top_k; kk += blockDim.x)
      k.snap()[t * p.top_k + kk] = s_perm[kk];
  trigger_after_writes(k, st);
  st.finish();
}

// ---------------------------------------------------------------------------------------------
// small_batch: the seed's kernel. Grid (hidden slices, T); blockDim.x = 128-bit chunks of the
// slice, blockDim.y = top-K groups. kSplit: group y owns experts [y*L, min(K, (y+1)*L)) with
// L = ceil(K / blockDim.y) <= 4, keeps their indices and weights in registers (read before the
// wait unless told otherwise), issues its <= 4 loads at once, and the groups' fp32 partials are
// summed through shared memory by group 0 in ascending group order. !kSplit (ablation): one
// group walks the whole top-K four experts at a time from metadata staged in shared memory.

template <Weights W, bool kSplit, class K>
__global__ void __launch_bounds__(Policy::kMaxThreads)
    finalize_small_batch(FinalizeParams const p, K const k) {
  CtaStamps st(k);
  trigger_if(k, Trigger::kEntry, st);
  std::int64_t const t = blockIdx.y;
  std::int64_t const chunk = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool const live = chunk < p.hidden / Policy::kVecElems;
  std::int64_t const col = chunk * Policy::kVecElems;
  int const top_k = static_cast<int>(p.top_k);
  auto const* in = static_cast<__nv_bfloat16 const*>(p.gemm_out);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};

  if constexpr (kSplit) {
    constexpr int kL = Policy::kMaxLoads;
    int const per_group = (top_k + static_cast<int>(blockDim.y) - 1) / static_cast<int>(blockDim.y);
    int const k_begin = static_cast<int>(threadIdx.y) * per_group;
    std::int32_t perm[kL];
    float w[kL];
    auto read_metadata = [&] {
#pragma unroll
      for (int j = 0; j < kL; ++j) {
        int const kk = k_begin + j;
        bool const mine = j < per_group && kk < top_k;
        perm[j] = mine ? p.expanded_to_permuted[t * top_k + kk] : -1;
        w[j] = mine ? load_weight<W>(p, t * top_k + kk) : 0.0f;
      }
    };
    if (k.meta_first())
      read_metadata();
    wait_primary(k, st);
    if (!k.meta_first())
      read_metadata();
    if (live) {
      uint4 v[kL];
#pragma unroll
      for (int j = 0; j < kL; ++j) {
        v[j] = make_uint4(0, 0, 0, 0);
        if (row_ok(perm[j], p.num_rows))
          v[j] = load8(in + static_cast<std::int64_t>(perm[j]) * p.hidden_padded + col);
      }
#pragma unroll
      for (int j = 0; j < kL; ++j)
        if (row_ok(perm[j], p.num_rows))
          accumulate8(acc, w[j], v[j]);
    }
    if (blockDim.y > 1) {
      // Two float4 planes per group: consecutive threads touch consecutive 16 bytes.
      __shared__ float4 s_part[Policy::kMaxGroups - 1][2][Policy::kMaxSliceChunks];
      if (threadIdx.y > 0) {
        s_part[threadIdx.y - 1][0][threadIdx.x] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        s_part[threadIdx.y - 1][1][threadIdx.x] = make_float4(acc[4], acc[5], acc[6], acc[7]);
      }
      __syncthreads();
      if (threadIdx.y == 0)
        for (int g = 0; g + 1 < static_cast<int>(blockDim.y); ++g) {
          float4 const a = s_part[g][0][threadIdx.x];
          float4 const b = s_part[g][1][threadIdx.x];
          acc[0] = __fadd_rn(acc[0], a.x);
          acc[1] = __fadd_rn(acc[1], a.y);
          acc[2] = __fadd_rn(acc[2], a.z);
          acc[3] = __fadd_rn(acc[3], a.w);
          acc[4] = __fadd_rn(acc[4], b.x);
          acc[5] = __fadd_rn(acc[5], b.y);
          acc[6] = __fadd_rn(acc[6], b.z);
          acc[7] = __fadd_rn(acc[7], b.w);
        }
    }
    if (k.snap() && blockIdx.x == 0 && threadIdx.x == 0)
#pragma unroll
      for (int j = 0; j < kL; ++j)
        if (j < per_group && k_begin + j < top_k)
          k.snap()[t * top_k + k_begin + j] = perm[j];
  } else {
    __shared__ std::int32_t s_perm[Policy::kMaxTopK];
    __shared__ float s_w[Policy::kMaxTopK];
    stage_around_wait<W>(p, k, st, t, s_perm, s_w);
    if (live)
      accumulate_chunk<Policy::kMaxLoads, true>(acc, in, p.hidden_padded, p.num_rows, col, s_perm,
                                                s_w, top_k);
    if (k.snap() && blockIdx.x == 0)
      for (int kk = threadIdx.x; kk < top_k; kk += blockDim.x)
        k.snap()[t * top_k + kk] = s_perm[kk];
  }

  if (threadIdx.y == 0 && live) {
    delay_before_write(k);
    store8(static_cast<__nv_bfloat16*>(p.out) + t * p.hidden + col, acc);
  }
  trigger_after_writes(k, st);
  st.finish();
}

// ---------------------------------------------------------------------------------------------
// deepseek_fp8: the block-scale variant. Grid (ceil(H/128), min(T, 65535)), one column per
// thread: acc = sum_k (w * in_scale[row, block]) * x, then per (token, 128-column block)
// scale = amax / 448 (1 when the block is all zero) and out = E4M3(acc / scale), saturating.

template <Weights W, class K>
__global__ void __launch_bounds__(Policy::kScaleBlock)
    finalize_deepseek(FinalizeParams const p, K const k) {
  constexpr int kWarps = Policy::kScaleBlock / 32;
  __shared__ float s_amax[kWarps];
  CtaStamps st(k);
  trigger_if(k, Trigger::kEntry, st);
  wait_primary(k, st);
  auto const* in = static_cast<__nv_bfloat16 const*>(p.gemm_out);
  auto* out = static_cast<__nv_fp8_storage_t*>(p.out);
  std::int64_t const block = blockIdx.x;
  std::int64_t const h = block * Policy::kScaleBlock + threadIdx.x;
  std::int64_t const in_blocks = (p.hidden_padded + Policy::kScaleBlock - 1) / Policy::kScaleBlock;
  std::int64_t const out_blocks = (p.hidden + Policy::kScaleBlock - 1) / Policy::kScaleBlock;
  bool first_write = true;
  for (std::int64_t t = blockIdx.y; t < p.num_tokens; t += gridDim.y) {
    float acc = 0.0f;
    if (h < p.hidden)
      for (int kk = 0; kk < p.top_k; ++kk) {
        std::int64_t const e = t * p.top_k + kk;
        std::int32_t const row = p.expanded_to_permuted[e];
        if (!row_ok(row, p.num_rows))
          continue;
        float const ws = __fmul_rn(load_weight<W>(p, e), p.in_scales[row * in_blocks + block]);
        acc = fma_rounded(acc, ws, __bfloat162float(in[row * p.hidden_padded + h]));
      }
    // fmaxf drops NaN operands; a NaN accumulator still reaches the output through the cast.
    float amax = fabsf(acc);
#pragma unroll
    for (int off = 16; off > 0; off /= 2)
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    if (threadIdx.x % 32 == 0)
      s_amax[threadIdx.x / 32] = amax;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kWarps; ++i)
      amax = fmaxf(amax, s_amax[i]);
    float const scale = amax > 0.0f ? __fdiv_rn(amax, Policy::kFp8Max) : 1.0f;
    if (first_write) {
      delay_before_write(k);
      first_write = false;
    }
    if (h < p.hidden)
      out[t * p.hidden + h] =
          __nv_cvt_float_to_fp8(__fdiv_rn(acc, scale), __NV_SATFINITE, __NV_E4M3);
    if (threadIdx.x == 0)
      p.out_scales[t * out_blocks + block] = scale;
    if (k.snap() && blockIdx.x == 0 && threadIdx.x == 0)
      for (int kk = 0; kk < p.top_k; ++kk)
        k.snap()[t * p.top_k + kk] = p.expanded_to_permuted[t * p.top_k + kk];
    __syncthreads(); // s_amax is rewritten by the next token
  }
  trigger_after_writes(k, st);
  st.finish();
}

} // namespace moefin::finalize::kernels
