#pragma once
// moefin's own chain for the audit: the kernels ChainRunner (kernels/chain/chain.cu) launches for
// one layer under a configuration, as a launches file (symbols, PDL attributes, the knob values
// as parameter values, which parameters name which buffer), and the chain description the
// verifier uses for the same configuration (chain::describe_chain) as the audit's plan.
// The description side goes through two functions only (moefin_plan, and the buffer names of
// chain::layer_buffer_names), so that a new description of the layer can replace it here.

#include "core/audit/launches.hpp"
#include "core/audit/plan.hpp"
#include "core/chain_config.hpp"

#include <string>
#include <vector>

namespace moefin::audit_plan {

struct MoefinLaunchOptions {
  std::int64_t tokens = 4;  // routing_block_kernel up to 16 tokens, else the multi-CTA one
  std::int64_t tile_m = 16; // grouped_gemm_kernel<tile_m / 16>
  std::int64_t top_k = 8;   // vecload's unroll (4, 2 or 1: whichever divides K)
  bool swiglu = true;       // activation_kernel<kSwiGlu> or <kRelu2>
  int iterations = chain::kVerifierIterations;
  bool checksum = true; // the checked runner: each layer ends in the checksum kernel
  std::string permute_kernel = "moefin::permute::permute_kernel"; // a mutant replaces it
};

/// The launches of `iterations` layers of `cfg` with finalize as `variant` runs it.
audit::Launches moefin_launches(chain::ChainConfig const& cfg, std::string const& variant,
                                MoefinLaunchOptions const& o = {});

/// chain::describe_chain(cfg, variant) as the audit's plan, kernel by kernel (same order as
/// moefin_launches' launches of one layer).
std::vector<audit::PlannedKernel> moefin_plan(chain::ChainConfig const& cfg,
                                              std::string const& variant);

} // namespace moefin::audit_plan
