#pragma once
// routing::run_fast — routing for decode batches (T <= 32) whose layout is built by every
// thread of the CTA, not by a serial pass. Host-visible header: no CUDA includes.
//
// One CTA of max(8, T, local experts / 32) warps (at most 1024 threads). Every thread copies
// scores into shared memory (cp.async: one load latency); each of the first T warps selects one
// token's top-K: every lane sorts its keys (order-preserving integers of the scores, expert
// lane + 32 j) with a compile-time network (sort_network.hpp), then K passes of a warp-wide max
// of the lanes' heads that shift the winner's list; the expert ids come after the passes. A warp
// in which a lane holds one score twice takes a general selection by key trees. The layout
// (docs/design/computation.md: experts ascending, tokens ascending inside an expert, tile padding,
// inverse maps) then comes from per-expert token bitmasks (one word per expert): counts by
// popcount, the tile-padded offsets by a block-wide scan (warp shuffles, then one warp over the
// warp totals), and each row's place inside its expert by a popcount of the lower tokens' bits.
// The arrays are bitwise those of routing::run (same selection, same fp32 weight arithmetic).
// PDL as routing::run: waits before its first read; Trigger::kDefault = after the wait, before
// the writes.

#include "core/ops/pdl_knobs.hpp"
#include "core/ops/routing_params.hpp"
#include "core/router_scores.hpp" // MOEFIN_HD

#include <cstdint>
#include <cstring>

struct CUstream_st;

namespace moefin::routing {

struct FastPolicy {
  static constexpr int kMaxTokens = 32;    // one warp per token, one mask word per expert
  static constexpr int kMinWarps = 8;      // the layout's threads, whatever T
  static constexpr int kMaxExperts = 1024; // 32 scores per lane in registers
  static constexpr int kMaxTopK = 32;      // one selection per lane
};

/// True when run_fast takes p (T, E and K within FastPolicy).
bool fast_supports(RoutingParams const& p);
/// routing::validate plus FastPolicy's limits; throws InputError naming the field.
void validate_fast(RoutingParams const& p);
/// Threads of the CTA run_fast launches for p.
int fast_threads(RoutingParams const& p);
/// Scores per lane of the kernel run_fast launches for `num_experts` experts (its template
/// argument): the power of two 1..32 that holds them.
int fast_scores_per_lane(std::int64_t num_experts);
void run_fast(RoutingParams const& p, PdlKnobs const& knobs, CUstream_st* stream);

/// The selection's key of a score: an unsigned integer ordered as the float (larger score,
/// larger key); -0 is +0, as a float comparison has it. Every finite score maps above 0, which
/// stands for "no candidate". The kernel's and the host's (fast_selection_is_sorted).
MOEFIN_HD std::uint32_t score_key(float f) {
#if defined(__CUDA_ARCH__)
  std::uint32_t u = __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
#endif
  if ((u & 0x7fffffffu) == 0)
    u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/// Which selection run_fast's warp takes for one token's `num_experts` scores: true for the
/// sorted lists (no lane holds one non-zero key twice; lane l holds experts l, l + 32, ...),
/// false for the general selection. The host twin of the kernel's test, so that a test knows
/// which path its scores exercise.
bool fast_selection_is_sorted(float const* scores, std::int64_t num_experts);

} // namespace moefin::routing
