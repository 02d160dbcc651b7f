#pragma once
// Kernels of the chain runner itself: router scores from seeds, the poisoning of every buffer
// at the start of a replay, and the per-iteration checksum.

#include "core/router_scores.hpp"
#include "kernels/chain/chain.hpp"
#include "kernels/common/pdl_stage.cuh"

#include <cstdint>

namespace moefin::chain {

/// Marks a pre-wait snapshot entry finalize did not write.
inline constexpr std::int32_t kSnapshotUnset = static_cast<std::int32_t>(0x80000000u);

__global__ void scores_kernel(float* scores, std::uint64_t const* seeds, int iterations,
                              std::int64_t tokens, std::int64_t experts) {
  std::int64_t const per = tokens * experts;
  std::int64_t const n = per * iterations;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t const it = i / per, r = i % per;
    scores[i] = router_score(seeds[it], r / experts, r % experts, experts);
  }
}

inline constexpr int kMaxFills = 32;

struct FillItem {
  std::uint32_t* ptr = nullptr;
  std::int64_t words = 0; // 32-bit words
  std::uint32_t value = 0;
};

struct FillList {
  FillItem item[kMaxFills];
  int count = 0;
};

/// blockIdx.y picks the item; x strides over its words.
__global__ void fill_kernel(FillList list) {
  FillItem const f = list.item[blockIdx.y];
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       i < f.words; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    f.ptr[i] = f.value;
}

struct HashTarget {
  uint4 const* ptr = nullptr;
  std::int64_t chunks = 0; // 16-byte chunks (every chain buffer is allocated in whole chunks)
};

struct ChecksumParams {
  HashTarget buf[kNumBuffers];
  std::int64_t prefix[kNumBuffers + 1];   // chunk offsets of the buffers in one index space
  std::uint64_t* slots = nullptr;         // [kNumBuffers] of this iteration
  std::int32_t const* snapshot = nullptr; // finalize's pre-wait indices, or nullptr
  std::int32_t const* expanded_to_permuted = nullptr;
  std::int64_t expanded = 0;
  std::int32_t* stale = nullptr;    // [1] of this iteration
  std::int32_t* recorded = nullptr; // [1] of this iteration
  // Non-zero: write 0xff bytes over every chunk after hashing it (LayerPlan::repoison). An int32
  // the audit can assume (experiments/audit/moefin_plan.cpp).
  std::int32_t repoison = 0;
};

/// Hash of 32-bit word w of buffer b holding v: distinct (w, v) pairs map to distinct inputs of
/// a bijective mix, and the buffer's hash is their sum mod 2^64 (order-free, so deterministic).
__device__ __forceinline__ std::uint64_t word_hash(int b, std::int64_t w, std::uint32_t v) {
  std::uint64_t const salt = 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(b + 1);
  return mix64(((static_cast<std::uint64_t>(w) << 32) | v) ^ salt);
}

/// Each CTA hashes a contiguous range of the concatenated buffers; per-buffer sums meet in
/// shared memory, then one atomic per buffer and CTA.
__global__ void checksum_kernel(ChecksumParams p) {
  __shared__ unsigned long long sums[kNumBuffers];
  pdl_wait();
  if (threadIdx.x < kNumBuffers)
    sums[threadIdx.x] = 0;
  __syncthreads();
  std::int64_t const total = p.prefix[kNumBuffers];
  std::int64_t const per = (total + gridDim.x - 1) / gridDim.x;
  std::int64_t const begin = blockIdx.x * per;
  std::int64_t const end = min(total, begin + per);
  int b = 0;
  std::uint64_t acc = 0;
  int stale = 0, recorded = 0;
  constexpr int kE2p = static_cast<int>(Buffer::kExpandedToPermuted);
  for (std::int64_t c = begin + threadIdx.x; c < end; c += blockDim.x) {
    int nb = b;
    while (c >= p.prefix[nb + 1])
      ++nb;
    if (nb != b) {
      if (acc)
        atomicAdd(&sums[b], static_cast<unsigned long long>(acc));
      acc = 0;
      b = nb;
    }
    std::int64_t const local = c - p.prefix[b];
    uint4 const v = __ldcg(p.buf[b].ptr + local);
    // Finalize's pre-wait reads against the indices as this thread loaded them, before it
    // poisons the chunk (a separate pass could read a chunk another CTA already poisoned: the
    // released chain's first run counted every iteration but the last stale that way).
    if (b == kE2p && p.snapshot != nullptr) {
      std::uint32_t const got[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        std::int64_t const e = 4 * local + j;
        if (e >= p.expanded)
          break;
        std::int32_t const snap = __ldcg(p.snapshot + e);
        if (snap == kSnapshotUnset)
          continue;
        ++recorded;
        stale += snap != static_cast<std::int32_t>(got[j]);
      }
    }
    if (p.repoison) // only this thread touches the chunk
      __stcg(const_cast<uint4*>(p.buf[b].ptr + local), make_uint4(~0u, ~0u, ~0u, ~0u));
    acc += word_hash(b, 4 * local, v.x) + word_hash(b, 4 * local + 1, v.y) +
           word_hash(b, 4 * local + 2, v.z) + word_hash(b, 4 * local + 3, v.w);
  }
  if (acc)
    atomicAdd(&sums[b], static_cast<unsigned long long>(acc));
  __syncthreads();
  if (threadIdx.x < kNumBuffers && sums[threadIdx.x])
    atomicAdd(reinterpret_cast<unsigned long long*>(&p.slots[threadIdx.x]), sums[threadIdx.x]);
  if (recorded)
    atomicAdd(p.recorded, recorded);
  if (stale)
    atomicAdd(p.stale, stale);
}

} // namespace moefin::chain
