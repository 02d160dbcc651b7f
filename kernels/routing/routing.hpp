#pragma once
// routing::run — router scores to the permuted layout (the first kernel of the chain).
// Host-visible header: no CUDA includes.
//
// PDL: waits at entry (the scores come from the kernel before it in a real layer), so every read
// and write follows the wait. Trigger::kDefault = after the wait, before the writes (the seed's
// code); the seed's previous placement is kAfterWrites.

#include "core/ops/pdl_knobs.hpp"
#include "core/ops/routing_params.hpp"

#include <cstddef>
#include <cstdint>

struct CUstream_st;

namespace moefin::routing {

using Stream = CUstream_st*; // cudaStream_t

/// Tuning of the two paths (one place, not literals in the kernels).
struct Policy {
  static constexpr int kBlockThreads = 256;  // single-CTA kernel: 8 warps, 2 tokens each at T = 16
  static constexpr int kBlockMaxTokens = 16; // above this, the multi-CTA path (with workspace)
  static constexpr int kMultiThreads = 256;  // multi-CTA kernel: one warp per token
  static constexpr int kMaxTokens = 128;     // token bitmasks of 4 words per expert
  static constexpr int kMaxExperts = 1024;   // 32 experts per lane
  static constexpr int kMaxTopK = 32;        // one selection per lane
};

/// Device scratch of the multi-CTA path; zero before the first use, and the kernel leaves it
/// zero again. Size from workspace_bytes().
struct Workspace {
  void* ptr = nullptr;
  std::size_t bytes = 0;
};
std::size_t workspace_bytes(RoutingParams const& p);

/// Throws InputError naming the field when p is outside what the kernels support.
void validate(RoutingParams const& p);

/// True when run(p, knobs, ws, stream) takes the multi-CTA path.
bool uses_multi_cta(RoutingParams const& p, Workspace const& ws);
/// CTAs of the kernel run() launches (the size of the stamps array is 4 x this).
std::int64_t num_ctas(RoutingParams const& p, Workspace const& ws);

/// The single-CTA block kernel for any T <= 128.
void run(RoutingParams const& p, PdlKnobs const& knobs, Stream stream);
/// The block kernel for T <= Policy::kBlockMaxTokens, the multi-CTA kernel above (given ws).
void run(RoutingParams const& p, PdlKnobs const& knobs, Workspace const& ws, Stream stream);

} // namespace moefin::routing
