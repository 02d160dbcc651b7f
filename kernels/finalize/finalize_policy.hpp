#pragma once
// Tuning constants of the finalize kernels, in one place (the role of CUB's tuning_*.cuh).
// Host-visible: the dispatcher sizes grids from them and the kernels size their arrays.

#include <cstdint>

namespace moefin::finalize {

struct Policy {
  // Geometry the seed's dispatch rule counts CTAs in: ceil(H / kRuleColumns) per token.
  static constexpr int kRuleColumns = 256;
  static constexpr int kMaxTopK = 64; // vectorized paths stage at most this many experts per token
  static constexpr int kVecElems = 8; // bf16 per 128-bit load

  // scalar: grid ceil(H/256) x min(8192, T), one output element per thread.
  static constexpr int kScalarThreads = 256;
  static constexpr int kScalarMaxGridY = 8192;

  // vecload: one CTA of 256 threads per token.
  static constexpr int kVecloadThreads = 256;

  // small_batch: blockDim.x = 128-bit column chunks of the CTA's hidden slice, blockDim.y =
  // top-K groups of at most kMaxLoads experts each.
  static constexpr int kMaxLoads = 4;
  static constexpr int kMaxSliceChunks = 32; // 256 columns, the rule's CTA width
  static constexpr int kMinSliceChunks = 8;  // 128 bytes of a row: one cache line per load
  // Narrow the slice until a launch has this many CTAs: at one token a 256-column slice gives
  // only 4..28 CTAs on a GPU with over a hundred SMs, and a decode finalize is latency bound.
  static constexpr int kTargetCtas = 128;
  static constexpr int kMaxGroups = (kMaxTopK + kMaxLoads - 1) / kMaxLoads;
  static constexpr int kMaxThreads = kMaxSliceChunks * kMaxGroups;
  static constexpr int kMaxGridY = 65535; // tokens (gridDim.y limit)

  // deepseek_fp8: one CTA per (128-column scale block, token), one column per thread.
  static constexpr int kScaleBlock = 128;
  static constexpr int kDeepseekMaxGridY = 65535;
  static constexpr float kFp8Max = 448.0f; // largest finite E4M3 value
};

} // namespace moefin::finalize
