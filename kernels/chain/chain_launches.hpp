#pragma once
// The launches of one layer of the chain, as a pure host function of the layer plan: per kernel
// which launcher runs, with which PDL knobs and, for finalize, which variant with which metadata
// placement. ChainRunner (chain.cu) only executes the list, so the CUDA enqueue cannot drift
// from the plan the verifier checks (core/chain/verifier_chain.hpp). No CUDA here.

#include "core/ops/finalize_variants.hpp"
#include "core/ops/layer_plan.hpp"
#include "core/ops/pdl_knobs.hpp"

#include <string>
#include <vector>

namespace moefin::chain {

/// How one run launches its layers.
struct RunFlags {
  bool pdl = true;                  // PDL on (every kernel whose plan says so gets the attribute)
  int ctas_per_sm = 0;              // resident-wave kernels' CTAs per SM (PdlKnobs::ctas_per_sm)
  bool max_shared_carveout = false; // PdlKnobs::max_shared_carveout of the same kernels
  bool checked = true;              // the checksum kernel after each layer
  bool wide_gemms = false;          // RunnerOptions::wide_gemms, resolved
};

/// One kernel launch of a layer.
struct LaunchDescriptor {
  Kernel kernel = Kernel::kRouting; // which launcher (kChecksum: the checksum kernel)
  std::string impl;                 // KernelPlan::impl: the GEMMs' launcher follows it
  PdlKnobs knobs;                   // trigger resolved; stamps are the CUDA side's (per iteration)
  // Finalize: the Options handed to finalize::run (variant, the run's metadata placement, the
  // same PDL knobs); the CUDA side adds the snapshot pointer when `snapshot` is set.
  finalize::Options finalize;
  bool snapshot = false;    // finalize records its pre-wait indices; the checksum hashes them
  bool released = false;    // the released kernel of this slot (KernelPlan::released)
  bool repoison = false;    // checksum: poison what it hashed (LayerPlan::repoison)
  bool gate_second = false; // GEMM1 reads W1 with its row halves swapped (LayerPlan::gate_second)
  // GEMM1 and GEMM2 of a layer whose finalize runs inside GEMM2: gemm::run_clearing and
  // gemm::run_fused instead of gemm::run.
  bool fused = false;
  // GEMM1 and GEMM2 with fp4 weights: the decode GEMM's wide launch (gemm::DecodeOptions::wide,
  // two warp-stages per pipeline stage; RunFlags::wide_gemms).
  bool wide = false;
};

/// The launches of one layer of `plan` under `run`, in stream order.
std::vector<LaunchDescriptor> layer_launches(LayerPlan const& plan, RunFlags const& run);

} // namespace moefin::chain
