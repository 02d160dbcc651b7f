#pragma once
// finalize::run — the public host call of the finalize operation (one dispatcher, several
// CUDA variants; DESIGN.md section 2). Host-visible header: no CUDA includes.

#include "kernels/common/pdl_knobs.hpp"
#include "kernels/finalize/finalize_params.hpp"

struct CUstream_st;

namespace moefin::finalize {

using Stream = CUstream_st*; // cudaStream_t

enum class Variant : std::int32_t {
  kAuto = 0,    // the dispatch rule below
  kScalar,      // previous small-batch kernel (baseline of every ratio)
  kVecload,     // large-batch kernel: one CTA per token, 128-bit loads
  kSmallBatch,  // the seed's kernel: CTA per (token, hidden slice), top-K split over blockDim.y
  kDeepseekFp8, // block-scale variant (FP8 E4M3 output with per-(token, 128-column) scales)
};

char const* variant_name(Variant v); // "scalar", "vecload", "small_batch", "deepseek_fp8", "auto"

/// CTA budget of the dispatch rule: the seed hard-codes 1184 (148 SMs x 8).
constexpr int kPublishedCtaBudget = 1184;

struct Options {
  Variant variant = Variant::kAuto;
  int cta_budget = kPublishedCtaBudget; // or SMs x 8 of the device (device_cta_budget())
  bool deepseek_fp8 = false;            // select the FP8 block-scale path under kAuto
  bool allow_small_batch = true;        // false: the dispatch rule before the seed's change

  // small_batch ablation switches (the seed: all true).
  bool split_topk = true;           // false: the whole top-K in one thread group
  bool metadata_before_wait = true; // indices and weights read before the grid-dependency wait

  // PDL knobs. Trigger::kDefault = the variant's own placement (small_batch: entry; others: exit).
  PdlKnobs pdl;

  // Race study: when set, the kernel copies the permuted indices it read before its wait here
  // ([num_tokens * top_k], device), so the host can compare them with what routing wrote.
  // Variants that read them after the wait (scalar, deepseek_fp8, metadata_before_wait = false)
  // record the indices they used.
  std::int32_t* pre_wait_snapshot = nullptr;

  // small_batch tuning: 128-bit column chunks per CTA (8, 16 or 32); 0 = the policy's choice.
  int slice_chunks = 0;
};

/// The launch `run` makes for a shape: variant after selection and its grid.
struct LaunchPlan {
  Variant variant = Variant::kAuto;
  int grid_x = 0, grid_y = 0;   // CTAs; per-CTA stamps are indexed blockIdx.x + grid_x * blockIdx.y
  int block_x = 0, block_y = 0; // threads
  int loads_per_thread = 0;     // independent expert loads in flight per thread
  Trigger trigger = Trigger::kExit; // resolved placement (never kDefault)
  std::int64_t ctas() const { return static_cast<std::int64_t>(grid_x) * grid_y; }
};

/// The seed's selection rule: deepseek when asked; else scalar when
/// ceil(H/256) * min(8192, T) < budget and not small_batch-eligible; small_batch when
/// ceil(H/256) * T < budget, the row is 128-bit aligned and 4 < K <= 64; vecload otherwise.
Variant select(FinalizeParams const& p, Options const& o);

/// Validates the shape for the selected variant (InputError naming the field, the value and what
/// the variant supports) and computes its launch. Host only: needs no GPU.
LaunchPlan plan(FinalizeParams const& p, Options const& o);

/// SMs x 8 of the current device.
int device_cta_budget();

/// Checks shapes (throws InputError naming what is unsupported), selects, launches on `stream`
/// with cudaLaunchKernelEx and checks the launch. Capturable in a CUDA graph.
void run(FinalizeParams const& p, Options const& o, Stream stream);

} // namespace moefin::finalize
