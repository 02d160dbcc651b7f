#pragma once
// The chain description the happens-before verifier checks for a run of the layer chain,
// generated from the layer plan (core/ops/layer_plan.hpp) that the CUDA enqueue executes, and the
// verifier's verdict on a race-matrix cell. Host-only.

#include "core/ops/chain_knobs.hpp"
#include "core/ops/finalize_variants.hpp"
#include "core/ops/layer_plan.hpp"
#include "core/pdl/chain.hpp"
#include "core/pdl/verifier.hpp"

#include <cstddef>
#include <string>

namespace moefin::chain {

/// Layers of the runner a verifier chain repeats. Two decide every pair across layers: each
/// layer ends in the checksum kernel, which waits at entry and triggers only at its exit, and
/// every kernel waits on every path (kernels/common/pdl_stage.cuh), so the next layer launches
/// only after the kernels before the checksum completed and the checksum made its accesses.
/// Layer 1 against layer 0 checks that link; layers d > 1 apart have it d times in between.
inline constexpr int kVerifierIterations = 2;

/// The plan's kernels as a chain description of the verifier (docs/reference/chain-json.md, "Chain
/// descriptions"), with PDL on: `iterations` layers back to back in one stream, or (`graph`) as
/// stream capture puts every layer of a batch into one CUDA graph (pdl::captured_graph), as
/// `moefin race` runs them. Left out: the kernel that poisons every buffer once per batch
/// (launched without PDL, the first routing's primary). Its writes race with a read only where
/// routing's writes do too (routing waits on every path, so a kernel after routing that waits
/// before it triggers orders both), so it changes no verdict.
pdl::Chain verifier_chain(LayerPlan const& plan, std::string const& description, bool graph,
                          int iterations = kVerifierIterations);
/// The same for the plan of `cfg` with finalize `fin` (the variant the run launches).
pdl::Chain verifier_chain(ChainConfig const& cfg, finalize::FinalizeVariant const& fin, bool graph,
                          int iterations = kVerifierIterations);
/// verifier_chain as JSON, the format `moefin verify` reads; the plan's kernels those of
/// `flavour` (the one of the run's weights format).
std::string chain_json(ChainConfig const& cfg, finalize::FinalizeVariant const& fin, bool graph,
                       ChainFlavour const& flavour = moefin_flavour());

/// What the verifier says about the chain of a race-matrix cell.
struct CellVerdict {
  pdl::Verdict chain = pdl::Verdict::kOrdered; // every pair: a race here can change any buffer
  // Finalize's reads of what routing wrote for it (expanded_to_permuted, expert_weights), on the
  // side of the wait where the variant reads them: what the stale-read counter and the output see.
  pdl::Verdict metadata = pdl::Verdict::kOrdered;
  std::size_t races = 0, pairs = 0;
};
CellVerdict verify_cell(ChainConfig const& cfg, finalize::FinalizeVariant const& fin, bool graph,
                        ChainFlavour const& flavour = moefin_flavour());

} // namespace moefin::chain
