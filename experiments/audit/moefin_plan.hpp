#pragma once
// moefin's own chain for the audit: the kernels ChainRunner (kernels/chain/chain.cu) launches for
// one layer, as a launches file (symbols, PDL attributes, the knob values as parameter values,
// which parameters name which buffer), and the layer plan the verifier uses for the same
// configuration (chain::make_layer_plan) as the audit's plan. Both come from the plan: each
// launch's kernel is the symbol of its KernelPlan::impl (an implementation this file does not
// know is an error), its knob values are the plan's resolved trigger and finalize's metadata
// placement.

#include "audit/launches.hpp"
#include "audit/plan.hpp"
#include "core/chain/verifier_chain.hpp"
#include "core/ops/finalize_variants.hpp"
#include "core/ops/layer_plan.hpp"

#include <optional>
#include <string>
#include <vector>

namespace moefin::audit_plan {

struct MoefinLaunchOptions {
  std::int64_t tokens = 4;        // routing_block_kernel up to 16 tokens, else the multi-CTA one
  std::int64_t num_experts = 256; // the decode routing's routing_fast_kernel<scores per lane>
  std::int64_t tile_m = 16; // grouped_gemm_kernel<tile_m / 16>, decode_gemm_kernel<., tile_m / 8>
  // fp4 decode GEMMs with tiled scales (fp4::ScaleLayout::kTiled): decode_gemm_tscale_kernel
  // <tile_m / 8, lean>; false: decode_gemm_kernel (row-major scales). Unset: as the chain
  // launches it (chain::LayerWeights' default layout: tiled for fp4, none for other GEMMs). An
  // InputError for true with another GEMM implementation, or for lean without tiled scales.
  std::optional<bool> tiled_scales;
  bool lean = false;
  // fp4 values as packed words (fp4::ValueLayout::kPacked or kTiles, with tiled scales only):
  // decode_gemm_wpack_kernel<tile_m / 8, lean>; false: the kernel of tiled_scales. Unset: as the
  // chain launches it (fp4::chain_value_layout: packed words, in tiles, where the scales are
  // tiled). An InputError for true without tiled scales.
  std::optional<bool> packed_values;
  // fp4 GEMMs launched wide (gemm::DecodeOptions::wide, with packed values only):
  // decode_gemm_wide_kernel<tile_m / 8, lean, stages> with the stages of
  // DecodePolicy::wide_stages(ctas_per_sm); false: the kernel of packed_values. Unset: as the chain
  // launches it (fp4::chain_wide_gemms: wide where the values are packed words). An InputError
  // for true without packed values.
  std::optional<bool> wide;
  // fp4 values in warp-stage tiles (fp4::ValueLayout::kTiles: packed words, read by the wide
  // launch only): decode_gemm_tiles_kernel<tile_m / 8, lean, stages>; false: the kernel of wide.
  // Unset: as the chain launches it (fp4::chain_value_layout). An InputError for true without
  // packed values or with wide false.
  std::optional<bool> tiled_values;
  int ctas_per_sm = 2;    // the wide kernel's residency: sweep layer's default, two CTAs per SM
  std::int64_t top_k = 8; // vecload's unroll (4, 2 or 1: whichever divides K)
  bool swiglu = true;     // activation_kernel<kSwiGlu> or <kRelu2>
  int iterations = chain::kVerifierIterations;
  bool checksum = true; // the checked runner: each layer ends in the checksum kernel
  std::string permute_kernel = "moefin::permute::permute_kernel"; // a mutant replaces it
};

/// The launches of `o.iterations` layers of `plan` (make_layer_plan of the run's configuration).
audit::Launches moefin_launches(chain::LayerPlan const& plan, MoefinLaunchOptions const& o = {});

/// The plan's kernels as the audit's plan, in the order of moefin_launches' launches of one
/// layer (the checksum kernel last when `checksum`).
std::vector<audit::PlannedKernel> moefin_plan(chain::LayerPlan const& plan, bool checksum = true);

} // namespace moefin::audit_plan
