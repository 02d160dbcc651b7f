#pragma once
// The layer plan: what every kernel of one MoE layer does about PDL, resolved from a ChainConfig
// and the finalize variant's registry entry. Per kernel (routing, permute, gemm1, act, gemm2,
// finalize, then the checksum kernel of the checked runs): the implementation, its launch
// attribute, trigger placement, whether it waits on every path, the injected delay, the buffers
// it reads before and after its wait and what it writes.
//
// Three things derive from it and nothing else: the CUDA enqueue (kernels/chain/chain_launches.hpp
// turns it into launch descriptors that chain.cu executes), the Kokkos reference chain's order
// (experiments/chain/reference_chain.cpp) and the chain description the verifier checks
// (core/chain/verifier_chain.hpp). Header-only, no CUDA.
//
// Seams: a chain flavour names one implementation per kernel (moefin's own today; a flavour of
// released kernels with moefin's GEMMs is another ChainFlavour), and its GEMMs name their weight
// format (bf16 today).

#include "core/ops/chain_knobs.hpp"
#include "core/ops/finalize_variants.hpp"
#include "core/ops/pdl_knobs.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace moefin::chain {

/// Buffers of a layer. The first kNumBuffers are the ones the checksum kernel hashes per
/// iteration, in chain order (the first differing one names a mismatch); then the layer's inputs
/// (written before a batch starts) and the measurement buffers.
enum class Buffer : std::int32_t {
  kExpertIds = 0,
  kExpertWeights,
  kExpandedToPermuted,
  kPermutedToToken,
  kPermutedToExpanded,
  kExpertCounts,
  kExpertOffsets,
  kCtaToExpert,
  kTotalPaddedRows,
  kPermuted,
  kGemm1Out,
  kActOut,
  kGemm2Out,
  kOut,
  // Inputs of the layer.
  kScores,
  kHiddenStates,
  kW1,
  kW2,
  // Measurement: finalize's pre-wait index snapshot, the checksum slots.
  kSnapshot,
  kChecksums,
  // The fused finalize's arrival counters (kernels/finalize/fused_finalize.hpp): GEMM1 clears
  // them, GEMM2 counts on them. Not hashed: their final values follow from routing's arrays.
  kFusedCounters,
};
inline constexpr int kNumBuffers = 14;     // hashed per iteration
inline constexpr int kNumPlanBuffers = 21; // every Buffer

/// "expert_ids", ..., "out", "scores", "hidden_states", "w1", "w2", "snapshot", "checksums",
/// "fused_counters".
inline char const* buffer_name(Buffer b) {
  static constexpr char const* kNames[kNumPlanBuffers] = {"expert_ids",
                                                          "expert_weights",
                                                          "expanded_to_permuted",
                                                          "permuted_to_token",
                                                          "permuted_to_expanded",
                                                          "expert_counts",
                                                          "expert_offsets",
                                                          "cta_to_expert",
                                                          "total_padded_rows",
                                                          "permuted",
                                                          "gemm1_out",
                                                          "act_out",
                                                          "gemm2_out",
                                                          "out",
                                                          "scores",
                                                          "hidden_states",
                                                          "w1",
                                                          "w2",
                                                          "snapshot",
                                                          "checksums",
                                                          "fused_counters"};
  auto const i = static_cast<int>(b);
  return i >= 0 && i < kNumPlanBuffers ? kNames[i] : "?";
}

/// The buffers the checksum kernel hashes, in chain order.
inline std::vector<Buffer> hashed_buffers() {
  std::vector<Buffer> out;
  for (int b = 0; b < kNumBuffers; ++b)
    out.push_back(static_cast<Buffer>(b));
  return out;
}

/// What one implementation of a chain kernel does around its wait: the contract the plan
/// copies for it.
struct KernelImpl {
  std::string name; // "moefin.routing", ...
  Trigger default_trigger = Trigger::kExit;
  std::vector<Buffer> reads_before_wait, reads_after_wait, writes; // writes follow the wait
};

/// One implementation of each kernel of the layer but finalize (whose implementation is the
/// registry entry the run picks) and the weight format its GEMMs read.
struct ChainFlavour {
  std::string name;                  // "moefin"
  std::string weights;               // "bf16"
  std::array<KernelImpl, 5> kernels; // routing, permute, gemm1, act, gemm2
};

/// moefin's kernels (kernels/routing, permute, gemm, activation): every one waits before its
/// first routing-dependent read (pdl_wait_point); the weights and the router scores are written
/// before a batch starts.
inline ChainFlavour const& moefin_flavour() {
  using B = Buffer;
  static ChainFlavour const f{
      "moefin",
      "bf16",
      {KernelImpl{"moefin.routing",
                  routing::kDefaultTrigger,
                  {},
                  // It reads back the expert ids it wrote when it builds the layout (its SASS
                  // says so: test_audit).
                  {B::kScores, B::kExpertIds},
                  {B::kExpertIds, B::kExpertWeights, B::kExpandedToPermuted, B::kPermutedToToken,
                   B::kPermutedToExpanded, B::kExpertCounts, B::kExpertOffsets, B::kCtaToExpert,
                   B::kTotalPaddedRows}},
       KernelImpl{"moefin.permute",
                  permute::kDefaultTrigger,
                  {},
                  {B::kTotalPaddedRows, B::kPermutedToToken, B::kHiddenStates},
                  {B::kPermuted}},
       KernelImpl{"moefin.grouped_gemm.bf16",
                  gemm::kDefaultTrigger,
                  {},
                  {B::kTotalPaddedRows, B::kCtaToExpert, B::kPermutedToToken, B::kPermuted, B::kW1},
                  {B::kGemm1Out}},
       KernelImpl{"moefin.activation",
                  activation::kDefaultTrigger,
                  {},
                  {B::kTotalPaddedRows, B::kGemm1Out},
                  {B::kActOut}},
       KernelImpl{"moefin.grouped_gemm.bf16",
                  gemm::kDefaultTrigger,
                  {},
                  {B::kTotalPaddedRows, B::kCtaToExpert, B::kPermutedToToken, B::kActOut, B::kW2},
                  {B::kGemm2Out}}}};
  return f;
}

/// One kernel of the plan.
struct KernelPlan {
  Kernel kernel = Kernel::kRouting;
  std::string name; // kernel_name(kernel): "routing", ..., "finalize", "checksum"
  std::string impl; // its implementation (KernelImpl::name; finalize: the variant's name)
  bool pdl = true;  // launched with the attribute when the run has PDL on
  Trigger trigger = Trigger::kExit; // resolved, never kDefault
  bool waits = true;                // every path executes the grid-dependency wait
  std::int64_t delay_ns = 0;        // spin after the wait, before the first write
  std::vector<Buffer> reads_before_wait, reads_after_wait, writes;
  // False for finalize when its variant runs inside GEMM2 (FinalizeVariant::inside_gemm2): no
  // launch and no accesses (GEMM2's entry has them); the entry keeps the plan's shape.
  bool launched = true;
};

/// The kernels of one checked layer: the six of the chain, then the checksum kernel.
inline constexpr int kPlanKernels = kNumKernels + 1;

struct LayerPlan {
  std::string flavour; // ChainFlavour::name
  std::string weights; // ChainFlavour::weights
  finalize::FinalizeVariant const* finalize = nullptr;
  // The run lets finalize read metadata before its wait (ChainConfig::metadata_before_wait).
  // Exactly then the snapshot of finalize's indices is taken and hashed, whatever the variant
  // does with the permission.
  bool meta_allowed = false;
  std::vector<KernelPlan> kernels; // kPlanKernels, in stream order

  KernelPlan const& at(Kernel k) const { return kernels.at(static_cast<std::size_t>(k)); }
  KernelPlan const& checksum() const { return kernels.back(); }
  /// Whether finalize reads routing's metadata (expanded_to_permuted, expert_weights) before
  /// its wait.
  bool finalize_meta_before_wait() const {
    return !at(Kernel::kFinalize).reads_before_wait.empty();
  }
  /// The kernel that reads routing's metadata for the reduction: finalize, or GEMM2 when the
  /// reduction runs in its epilogue.
  Kernel metadata_reader() const {
    return at(Kernel::kFinalize).launched ? Kernel::kFinalize : Kernel::kGemm2;
  }
};

/// The plan of one layer of `cfg` whose finalize is `fin` (the variant the run launches: the one
/// the dispatch rule picks for the shape, or the forced one).
inline LayerPlan make_layer_plan(ChainConfig const& cfg, finalize::FinalizeVariant const& fin,
                                 ChainFlavour const& flavour = moefin_flavour()) {
  using B = Buffer;
  LayerPlan p;
  p.flavour = flavour.name;
  p.weights = flavour.weights;
  p.finalize = &fin;
  p.meta_allowed = cfg.metadata_before_wait;
  for (std::size_t i = 0; i < flavour.kernels.size(); ++i) {
    Kernel const k = kAllKernels[i];
    KernelImpl const& impl = flavour.kernels[i];
    KernelPlan kp;
    kp.kernel = k;
    kp.name = kernel_name(k);
    kp.impl = impl.name;
    kp.pdl = cfg.at(k).pdl;
    kp.trigger = resolve(cfg.at(k).trigger, impl.default_trigger);
    kp.delay_ns = cfg.at(k).delay_ns;
    kp.reads_before_wait = impl.reads_before_wait;
    kp.reads_after_wait = impl.reads_after_wait;
    kp.writes = impl.writes;
    p.kernels.push_back(std::move(kp));
  }
  KernelPlan f;
  f.kernel = Kernel::kFinalize;
  f.name = kernel_name(Kernel::kFinalize);
  f.impl = fin.name;
  if (fin.inside_gemm2) {
    // GEMM2 reduces in its epilogue: after its wait it reads routing's metadata (as it reads the
    // rest of routing's output) and counts on the arrival counters GEMM1 cleared after its own
    // wait; it writes out. No finalize launch, so no snapshot and no finalize knobs.
    KernelPlan& g1 = p.kernels.at(static_cast<std::size_t>(Kernel::kGemm1));
    KernelPlan& g2 = p.kernels.at(static_cast<std::size_t>(Kernel::kGemm2));
    g1.impl += "+clear_counters";
    g1.writes.push_back(B::kFusedCounters);
    g2.impl += "+" + fin.name;
    for (B b : {B::kExpandedToPermuted, B::kExpertWeights, B::kFusedCounters})
      g2.reads_after_wait.push_back(b);
    g2.writes.push_back(B::kFusedCounters);
    g2.writes.push_back(B::kOut);
    p.meta_allowed = false;
    f.launched = false;
    f.pdl = g2.pdl;
    f.trigger = g2.trigger;
  } else {
    f.pdl = cfg.at(Kernel::kFinalize).pdl;
    f.trigger = fin.trigger_for(cfg.at(Kernel::kFinalize).trigger);
    f.delay_ns = cfg.at(Kernel::kFinalize).delay_ns;
    std::vector<B> const meta = {B::kExpandedToPermuted, B::kExpertWeights};
    if (fin.reads_meta_before_wait(cfg.metadata_before_wait))
      f.reads_before_wait = meta;
    else
      f.reads_after_wait = meta;
    f.reads_after_wait.push_back(B::kGemm2Out);
    f.writes = {B::kOut};
    if (p.meta_allowed)
      f.writes.push_back(B::kSnapshot); // recorded after the wait
  }
  p.kernels.push_back(std::move(f));
  // The checksum kernel: a PDL secondary that waits at entry, hashes every buffer of the layer
  // and never triggers; the next layer's routing is its secondary.
  KernelPlan c;
  c.kernel = Kernel::kChecksum;
  c.name = kernel_name(Kernel::kChecksum);
  c.impl = "moefin.checksum";
  c.trigger = Trigger::kExit;
  c.reads_after_wait = hashed_buffers();
  if (p.meta_allowed)
    c.reads_after_wait.push_back(B::kSnapshot);
  c.writes = {B::kChecksums};
  p.kernels.push_back(std::move(c));
  return p;
}

} // namespace moefin::chain
