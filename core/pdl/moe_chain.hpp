#pragma once
// The 6-kernel MoE layer chain (docs/design/seed.md) as chain descriptions: routing -> permute ->
// gemm1 -> activation -> gemm2 -> finalize, with every PDL knob a parameter. Used for the shipped
// seed scenarios and the cross-check corpus (the chain the GPU race matrix runs is
// chain::verifier_chain, core/chain/verifier_chain.hpp).

#include "core/ops/pdl_knobs.hpp"
#include "core/pdl/chain.hpp"

#include <array>
#include <string>
#include <vector>

namespace moefin::pdl {

inline constexpr int kMoeKernels = 6;

/// routing, permute, gemm1, activation, gemm2, finalize.
char const* moe_kernel_name(int k);

struct MoeChainSpec {
  std::array<Trigger, kMoeKernels> trigger{}; // placements (never Trigger::kDefault)
  bool finalize_meta_before_wait = true;      // the small-batch kernel's pre-wait metadata reads
  int omit_wait = -1;                         // a kernel whose wait is left out, or -1
  bool pdl = true;                            // every launch with PDL (false: serialized)
  int iterations = 1;
  int ctas = 2; // CTAs of every kernel but routing (a single-CTA block kernel)
};

/// Before the seed's change: routing triggers after its writes; permute and activation trigger
/// first, then wait; the GEMMs trigger at exit (their placement is not in the seed: a parameter);
/// the scalar finalize waits at entry and never triggers.
MoeChainSpec seed_before_spec();

/// After it: routing triggers right after its own wait, before its writes; the small-batch
/// finalize triggers at entry and reads routing metadata before its wait.
MoeChainSpec seed_after_spec();

/// The chain for a spec (buffers scores, hidden_states, routing_meta, layout, permuted, gemm1_out,
/// act_out, gemm2_out, out).
Chain make_moe_chain(MoeChainSpec const& spec, std::string const& name);

/// "r=after_wait,p=entry,g1=entry,a=entry,g2=entry,f=entry,meta=before,omit=none,it=2".
std::string spec_label(MoeChainSpec const& s);

/// The generated corpus of the cross-check: from the seed-after chain with both GEMMs
/// triggering at entry (the reviewer's scenario), every trigger placement of each kernel, every
/// single omitted wait, finalize metadata before and after its wait, one and two iterations.
std::vector<MoeChainSpec> moe_corpus();

} // namespace moefin::pdl
