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
// Seams: a chain flavour names one implementation per kernel and the weight format its GEMMs
// read: `moefin` (the tiled grouped GEMM, bf16 weights), `decode-bf16` and `decode-fp4` (the
// split-K decode GEMM of kernels/gemm/decode.hpp on bf16 or 4-bit weights); the experiments pick
// one by its weights format (`--weights-format`: bf16-tiled, bf16, fp4). ChainConfig::flavour
// "released" replaces moefin's routing, permute and activation by the released FlashInfer ones
// (released_flavour(), over the tiled bf16 GEMMs only).

#include "core/ops/chain_knobs.hpp"
#include "core/ops/errors.hpp"
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
  bool released = false; // a released library's kernel (launched through its adapter)
  // The kernel triggers where its code does, whatever the run asks (default_trigger), and has no
  // injected delay: the released kernels carry neither knob.
  bool fixed = false;
};

/// One implementation of each kernel of the layer but finalize (whose implementation is the
/// registry entry the run picks) and the weight format its GEMMs read.
struct ChainFlavour {
  std::string name;                  // "moefin", "released"
  std::string weights;               // "bf16"
  std::array<KernelImpl, 5> kernels; // routing, permute, gemm1, act, gemm2
  // GEMM1 reads W1 with the two halves of its output rows swapped, so that it writes [up | gate]
  // where moefin's activation reads [gate | up] (the released activation takes the gate from the
  // second half of each row); the layer computes the same function.
  bool gate_second = false;
};

/// Implementation names of the GEMM kernels: what kernels/chain/chain.cu launches for each.
inline constexpr char const* kTiledGemmBf16 = "moefin.grouped_gemm.bf16";
inline constexpr char const* kDecodeGemmBf16 = "moefin.decode_gemm.bf16";
inline constexpr char const* kDecodeGemmFp4 = "moefin.decode_gemm.fp4";
/// The decode routing (kernels/routing/fast_routing.hpp) up to its 32 tokens, routing::run's
/// kernels beyond: the same arrays, bit for bit, and the same PDL contract (waits before its
/// first read, triggers after the wait). It reads the scores only; above 32 tokens the block
/// kernels also read back the expert ids they wrote, a read of their own writes.
inline constexpr char const* kFastRouting = "moefin.routing_fast";

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
       KernelImpl{kTiledGemmBf16,
                  gemm::kDefaultTrigger,
                  {},
                  {B::kTotalPaddedRows, B::kCtaToExpert, B::kPermutedToToken, B::kPermuted, B::kW1},
                  {B::kGemm1Out}},
       KernelImpl{"moefin.activation",
                  activation::kDefaultTrigger,
                  {},
                  {B::kTotalPaddedRows, B::kGemm1Out},
                  {B::kActOut}},
       KernelImpl{kTiledGemmBf16,
                  gemm::kDefaultTrigger,
                  {},
                  {B::kTotalPaddedRows, B::kCtaToExpert, B::kPermutedToToken, B::kActOut, B::kW2},
                  {B::kGemm2Out}}}};
  return f;
}

/// The released flavour: the released FlashInfer routing block kernel, permuteKernel and
/// activationKernel (flashinfer-python 0.7.2.post1; kernels/external/flashinfer/flashinfer_chain.hpp)
/// around moefin's GEMMs. The contracts are the released code's
/// (studies/released_binaries_audit/released_audit.h5 and its README): routing waits on every
/// path, triggers right after its wait and writes every output after it, and writes neither
/// expert_ids nor expert_counts nor expert_offsets (moefin's GEMMs and finalize read none of them); permute and
/// activation trigger at entry, then wait, and read expanded_to_permuted after the wait. The
/// released permute leaves padding rows of `permuted` unwritten and the released activation
/// those of `act_out`; moefin's GEMMs skip them (permuted_to_token < 0). SwiGLU only: there is no
/// released ReLU^2 kernel (FlashInfer fuses it into its GEMM1 epilogue).
inline ChainFlavour const& released_flavour() {
  using B = Buffer;
  ChainFlavour const& m = moefin_flavour();
  static ChainFlavour const f{
      "released",
      "bf16",
      {KernelImpl{"flashinfer.routing_block",
                  Trigger::kAfterWait,
                  {},
                  {B::kScores},
                  {B::kExpertWeights, B::kExpandedToPermuted, B::kPermutedToToken,
                   B::kPermutedToExpanded, B::kCtaToExpert, B::kTotalPaddedRows},
                  true,
                  true},
       KernelImpl{"flashinfer.permute",
                  Trigger::kEntry,
                  {},
                  {B::kExpandedToPermuted, B::kHiddenStates},
                  {B::kPermuted},
                  true,
                  true},
       m.kernels[2],
       KernelImpl{"flashinfer.activation",
                  Trigger::kEntry,
                  {},
                  {B::kExpandedToPermuted, B::kGemm1Out},
                  {B::kActOut},
                  true,
                  true},
       m.kernels[4]},
      true};
  return f;
}

/// The flavour named `name` ("moefin", "released"); InputError otherwise.
inline ChainFlavour const& chain_flavour(std::string const& name) {
  if (name == "moefin")
    return moefin_flavour();
  if (name == "released")
    return released_flavour();
  throw InputError("--flavour: value '" + name + "' not one of {moefin, released}");
}

/// moefin's kernels with the decode routing (kFastRouting) and the split-K decode GEMM
/// (kernels/gemm/decode.hpp) as GEMM1 and GEMM2, on bf16 (`fp4` false) or 4-bit weights. The
/// chain launches the GEMM without weights_before_wait, so its contract is the tiled GEMM's: the
/// expert map, the activations and the weights (values, fp4 scales and global scales: buffers
/// w1/w2) all read after the wait, implicit trigger at exit.
inline ChainFlavour make_decode_flavour(bool fp4) {
  ChainFlavour f = moefin_flavour();
  f.name = fp4 ? "decode-fp4" : "decode-bf16";
  f.weights = fp4 ? "fp4" : "bf16";
  f.kernels[0].name = kFastRouting;
  f.kernels[0].reads_after_wait = {Buffer::kScores};
  for (int i : {2, 4})
    f.kernels[static_cast<std::size_t>(i)].name = fp4 ? kDecodeGemmFp4 : kDecodeGemmBf16;
  return f;
}

/// The values of `--weights-format`, in this order: bf16-tiled (flavour moefin), bf16
/// (decode-bf16), fp4 (decode-fp4).
inline std::vector<std::string> const& weights_format_names() {
  static std::vector<std::string> const n = {"bf16-tiled", "bf16", "fp4"};
  return n;
}
/// The format a run uses when none is given (and that files without the column ran).
inline constexpr char const* kDefaultWeightsFormat = "bf16-tiled";

/// The flavour of a weights format; nullptr for a name that is none.
inline ChainFlavour const* flavour_for_format(std::string const& format) {
  static ChainFlavour const bf16 = make_decode_flavour(false);
  static ChainFlavour const fp4 = make_decode_flavour(true);
  if (format == "bf16-tiled")
    return &moefin_flavour();
  if (format == "bf16")
    return &bf16;
  if (format == "fp4")
    return &fp4;
  return nullptr;
}

/// One kernel of the plan.
struct KernelPlan {
  Kernel kernel = Kernel::kRouting;
  std::string name; // kernel_name(kernel): "routing", ..., "finalize", "checksum"
  std::string impl; // its implementation (KernelImpl::name; finalize: the variant's name)
  bool released = false; // launched through the released library's adapter (KernelImpl::released)
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
  // Finalize records the indices it read before its wait and the checksum compares them:
  // meta_allowed, unless the finalize is a released kernel (it has no snapshot).
  bool snapshot = false;
  bool gate_second = false; // ChainFlavour::gate_second
  // The checksum kernel poisons (0xff bytes) every chunk it hashed, but after the last layer of a
  // batch: released kernels leave rows unwritten (padding rows of permuted, act_out,
  // permuted_to_expanded, tiles past the end of cta_to_expert), so every layer starts from the
  // same poisoned buffers and its hashes are a function of its own routing.
  bool repoison = false;
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
  /// Whether GEMM1 and GEMM2 are the tiled grouped GEMM: kTiledGemmBf16, or its fused kernels
  /// when finalize runs inside GEMM2 (their implementation names add the epilogue to it).
  bool tiled_gemms() const { return at(Kernel::kGemm1).impl.rfind(kTiledGemmBf16, 0) == 0; }
};

/// The finalize inside GEMM2 reduces in the epilogue of moefin's tiled bf16 GEMM2 around moefin's
/// routing (kernels/finalize/fused_finalize.hpp): the split-K decode GEMMs sum partial products
/// across CTAs (no CTA holds a finished output row to reduce), and the released flavour's kernels
/// leave rows unwritten that the arrival counters' rule would have to know of. The one-line
/// refusal naming the flags when `fin` runs inside GEMM2 and cannot with this flavour and these
/// GEMMs; empty when it can (or runs a kernel of its own).
inline std::string inside_gemm2_refusal(std::string const& flavour,
                                        finalize::FinalizeVariant const& fin,
                                        ChainFlavour const& gemms) {
  if (!fin.inside_gemm2)
    return {};
  std::string const who = "finalize " + fin.name + " (--finalize / finalize.variant)";
  if (flavour != "moefin")
    return who + ": reduces inside moefin's GEMM2; not with --flavour " + flavour +
           " (use --flavour moefin)";
  if (gemms.name == moefin_flavour().name)
    return {};
  std::string format = gemms.name;
  for (auto const& n : weights_format_names())
    if (flavour_for_format(n)->name == gemms.name)
      format = n;
  return who + ": reduces in the tiled bf16 GEMM2's epilogue; not with --weights-format " +
         format + " (the split-K decode GEMMs; use --weights-format bf16-tiled)";
}

/// The plan of one layer of `cfg` whose finalize is `fin` (the variant the run launches: the one
/// the dispatch rule picks for the shape, or the forced one).
/// A kernel of a fixed contract (KernelImpl::fixed) ignores the run's trigger placement and
/// refuses an injected delay (InputError); a released finalize triggers where its code does and
/// cannot read its metadata after its wait.
inline LayerPlan make_layer_plan(ChainConfig const& cfg, finalize::FinalizeVariant const& fin,
                                 ChainFlavour const& gemms = moefin_flavour()) {
  using B = Buffer;
  // `gemms` is the flavour of the run's weights format; cfg.flavour "released" puts the released
  // routing, permute and activation around it (the tiled bf16 GEMMs only: the released activation
  // needs GEMM1's weight halves swapped, which only the bf16 tiled weights have a copy for).
  if (cfg.flavour != "moefin" && gemms.name != moefin_flavour().name)
    throw InputError("--flavour " + cfg.flavour + ": runs the tiled bf16 GEMMs only " +
                     "(--weights-format bf16-tiled), not " + gemms.name);
  ChainFlavour const& flavour = cfg.flavour == "moefin" ? gemms : chain_flavour(cfg.flavour);
  if (std::string const why = inside_gemm2_refusal(cfg.flavour, fin, gemms); !why.empty())
    throw InputError(why);
  LayerPlan p;
  p.flavour = flavour.name;
  p.weights = flavour.weights;
  p.finalize = &fin;
  p.meta_allowed = cfg.metadata_before_wait;
  bool const released_fin = fin.source == finalize::Source::kReleased;
  p.snapshot = p.meta_allowed && !released_fin;
  p.gate_second = flavour.gate_second;
  for (std::size_t i = 0; i < flavour.kernels.size(); ++i) {
    Kernel const k = kAllKernels[i];
    KernelImpl const& impl = flavour.kernels[i];
    p.repoison = p.repoison || impl.released;
    KernelPlan kp;
    kp.kernel = k;
    kp.name = kernel_name(k);
    kp.impl = impl.name;
    kp.released = impl.released;
    kp.pdl = cfg.at(k).pdl;
    kp.trigger = impl.fixed ? impl.default_trigger : resolve(cfg.at(k).trigger, impl.default_trigger);
    if (impl.fixed && cfg.at(k).delay_ns != 0)
      throw InputError(std::string(kernel_name(k)) + ".delay_ns: " + impl.name +
                       " (the " + flavour.name + " chain) has no injected delay (delay " +
                       std::to_string(cfg.at(k).delay_ns) + " ns asked)");
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
    p.snapshot = false;
    f.launched = false;
    f.pdl = g2.pdl;
    f.trigger = g2.trigger;
  } else {
    f.pdl = cfg.at(Kernel::kFinalize).pdl;
    f.released = released_fin;
    f.trigger =
        released_fin ? fin.default_trigger : fin.trigger_for(cfg.at(Kernel::kFinalize).trigger);
    f.delay_ns = cfg.at(Kernel::kFinalize).delay_ns;
    if (released_fin && f.delay_ns != 0)
      throw InputError("finalize.delay_ns: " + fin.name + " (released) has no injected delay");
    if (released_fin && fin.meta_before_wait && !cfg.metadata_before_wait)
      throw InputError("finalize.meta=after: " + fin.name +
                       " (released) always reads indices and weights before its wait");
    std::vector<B> const meta = {B::kExpandedToPermuted, B::kExpertWeights};
    if (fin.reads_meta_before_wait(cfg.metadata_before_wait))
      f.reads_before_wait = meta;
    else
      f.reads_after_wait = meta;
    f.reads_after_wait.push_back(B::kGemm2Out);
    f.writes = {B::kOut};
    if (p.snapshot)
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
  if (p.snapshot)
    c.reads_after_wait.push_back(B::kSnapshot);
  c.writes = {B::kChecksums};
  if (p.repoison)
    for (Buffer b : hashed_buffers())
      c.writes.push_back(b);
  p.kernels.push_back(std::move(c));
  return p;
}

} // namespace moefin::chain
