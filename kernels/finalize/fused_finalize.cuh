#pragma once
// The fused finalize epilogue of GEMM2 (contract and ordering: fused_finalize.hpp). Device code.
// Every function is called by all 32 lanes of a warp with warp-uniform arguments.

#include "kernels/finalize/finalize_kernels.cuh"
#include "kernels/finalize/finalize_policy.hpp"
#include "kernels/finalize/fused_finalize.hpp"

namespace moefin::finalize::fused {

inline constexpr unsigned kAllLanes = 0xffffffffu;

/// Token t's metadata spread over the warp: lane l holds experts l and l + 32; bit k of
/// `valid[k / 32]`: expanded_to_permuted names a row of gemm2_out.
struct TokenMeta {
  std::int32_t perm[2] = {-1, -1};
  float w[2] = {0.0f, 0.0f};
  unsigned valid[2] = {0, 0};
  __device__ int count() const { return __popc(valid[0]) + __popc(valid[1]); }
};

__device__ __forceinline__ TokenMeta token_meta(FinalizeParams const& p, std::int64_t t, int lane) {
  TokenMeta m;
  int const top_k = static_cast<int>(p.top_k);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int const k = lane + 32 * h;
    if (k < top_k) {
      m.perm[h] = p.expanded_to_permuted[t * top_k + k];
      m.w[h] = kernels::load_weight<kernels::kRuntimeWeights>(p, t * top_k + k);
    }
    m.valid[h] = __ballot_sync(kAllLanes, kernels::row_ok(m.perm[h], p.num_rows));
  }
  return m;
}

/// Valid experts of token t, counted by one lane (each lane counts its own row's token).
__device__ __forceinline__ int valid_experts(FinalizeParams const& p, std::int64_t t) {
  int const top_k = static_cast<int>(p.top_k);
  int n = 0;
  for (int k = 0; k < top_k; ++k)
    n += kernels::row_ok(p.expanded_to_permuted[t * top_k + k], p.num_rows) ? 1 : 0;
  return n;
}

/// out[t, col0 .. col0 + kSliceCols) from the token's rows, in ascending k with rounded products
/// and sums (reference::finalize's order). Lane l loads 32-bit word l % 8 of the slice (two
/// columns) of experts k = l / 8 + 4 i, all loads in flight at once; the sum then walks k in
/// order, taking each word from the lane that loaded it. The rows were stored by other SMs: the
/// loads go through L2 (ld.global.cg), never this SM's L1.
__device__ __forceinline__ void sum_slice(FinalizeParams const& p, TokenMeta const& m,
                                          std::int64_t t, std::int64_t col0, int lane) {
  constexpr int kPer = kMaxTopK / 4; // experts per lane
  int const top_k = static_cast<int>(p.top_k);
  int const word = lane & 7, phase = lane >> 3;
  auto const* rows = static_cast<__nv_bfloat16 const*>(p.gemm_out) + col0;
  std::uint32_t val[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    int const k = phase + 4 * i; // < 32 exactly when i < 8: the register half is static
    std::int32_t const row = __shfl_sync(kAllLanes, m.perm[i / 8], k & 31);
    val[i] = 0;
    if (k < top_k && kernels::row_ok(row, p.num_rows))
      val[i] = __ldcg(reinterpret_cast<unsigned int const*>(rows + row * p.hidden_padded) + word);
  }
  float lo = 0.0f, hi = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
#pragma unroll
    for (int ph = 0; ph < 4; ++ph) {
      int const k = 4 * i + ph;
      if (k >= top_k)
        break;
      std::uint32_t const x = __shfl_sync(kAllLanes, val[i], ph * 8 + word);
      float const w = __shfl_sync(kAllLanes, m.w[k / 32], k & 31);
      if ((m.valid[k / 32] >> (k & 31)) & 1u) { // warp-uniform
        lo = kernels::fma_rounded(lo, w, kernels::bf16_lo(x));
        hi = kernels::fma_rounded(hi, w, kernels::bf16_hi(x));
      }
    }
  if (phase == 0)
    reinterpret_cast<std::uint32_t*>(static_cast<__nv_bfloat16*>(p.out) + t * p.hidden +
                                     col0)[word] = kernels::pack_bf16x2(lo, hi);
}

/// After the warp stored rows [row0, row0 + kRows) x [col0, col0 + kSliceCols) of gemm2_out
/// (kRows <= 32, col0 a multiple of kSliceCols): counts each row of a token on the token's
/// counter of the slice and finishes the tokens whose rows are now all stored.
template <int kRows>
__device__ __forceinline__ void finish_rows(FusedParams const& f, std::int64_t row0,
                                            std::int64_t col0, int lane) {
  static_assert(kRows >= 1 && kRows <= 32, "one row per lane");
  FinalizeParams const& p = f.fin;
  // Release: each lane's stores of the item before the counter adds (the fence orders the
  // lane's own stores; the warp barrier extends it to the lanes that add).
  __threadfence();
  __syncwarp();
  std::int32_t token = -1;
  if (lane < kRows)
    token = f.permuted_to_token[row0 + lane];
  std::int64_t const slices = p.hidden / kSliceCols;
  bool last = false;
  if (token >= 0) {
    int const need = valid_experts(p, token);
    std::int64_t const slot = static_cast<std::int64_t>(token) * slices + col0 / kSliceCols;
    last = atomicAdd(f.counters + slot, 1) + 1 == need;
    if (last)
      __threadfence(); // acquire: the other warps' rows, released before their adds
  }
  unsigned finish = __ballot_sync(kAllLanes, last);
  while (finish) {
    int const r = __ffs(finish) - 1;
    finish &= finish - 1;
    std::int64_t const t = __shfl_sync(kAllLanes, token, r);
    __threadfence(); // every reading lane after lane r's acquire (the shuffle between them)
    sum_slice(p, token_meta(p, t, lane), t, col0, lane);
  }
}

/// Tokens with no local expert have no rows, so no counter finishes them: their output is
/// zeros. Every warp of the GEMM calls this once, with its index among `warps` warps.
__device__ __forceinline__ void zero_unrouted(FusedParams const& f, std::int64_t warp,
                                              std::int64_t warps, int lane) {
  FinalizeParams const& p = f.fin;
  for (std::int64_t t = warp; t < p.num_tokens; t += warps) {
    if (token_meta(p, t, lane).count() != 0)
      continue;
    auto* out = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.out) + t * p.hidden);
    for (std::int64_t c = lane; c < p.hidden / Policy::kVecElems; c += 32)
      out[c] = make_uint4(0, 0, 0, 0);
  }
}

/// GEMM1's share: clears the counters after its grid-dependency wait (every thread of the grid a
/// strided share).
__device__ __forceinline__ void clear_counters(std::int32_t* counters, std::int64_t n) {
  std::int64_t const stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    counters[i] = 0;
}

} // namespace moefin::finalize::fused
