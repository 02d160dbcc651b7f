#pragma once
// The MoE layer chain as an experiment sees it: layer shapes, the PDL knobs of each kernel, the
// named presets, overrides from the command line, and the seeds of randomized routings.
// Host-only (the CUDA runner in kernels/chain/ consumes these).

#include "core/pdl/chain.hpp"
#include "kernels/activation/activation_params.hpp"
#include "kernels/common/pdl_knobs.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace moefin::chain {

/// The kernels of one layer, in stream order.
enum class Kernel : std::int32_t {
  kRouting = 0,
  kPermute,
  kGemm1,
  kActivation,
  kGemm2,
  kFinalize,
};
inline constexpr int kNumKernels = 6;
inline constexpr std::array<Kernel, kNumKernels> kAllKernels = {
    Kernel::kRouting,    Kernel::kPermute, Kernel::kGemm1,
    Kernel::kActivation, Kernel::kGemm2,   Kernel::kFinalize};
/// The kernels between routing and finalize, whose trigger placement decides the race.
inline constexpr std::array<Kernel, 4> kBetweenKernels = {Kernel::kPermute, Kernel::kGemm1,
                                                          Kernel::kActivation, Kernel::kGemm2};

char const* kernel_name(Kernel k); // "routing", "permute", "gemm1", "act", "gemm2", "finalize"
bool parse_kernel(std::string const& s, Kernel* out);

/// The placement a kernel uses for Trigger::kDefault: routing after its wait (the seed's code),
/// permute and activation at entry, the GEMMs implicitly at exit. Finalize stays kDefault:
/// finalize::run resolves it per variant (small_batch at entry, the others at exit).
Trigger default_trigger(Kernel k);

enum class Preset : std::int32_t {
  kSeedBefore = 0, // DESIGN.md section 2 before the seed: routing triggers after its writes,
                   // finalize reads metadata after its wait and never triggers
  kSeedAfter,      // after the seed: routing triggers after its wait, finalize reads metadata
                   // before its wait and triggers at entry
  kAllEarly,       // every kernel triggers at entry; finalize reads metadata before its wait
  kSafe,           // every kernel triggers after its wait; finalize reads metadata before it
};
inline constexpr std::array<Preset, 4> kAllPresets = {Preset::kSeedBefore, Preset::kSeedAfter,
                                                      Preset::kAllEarly, Preset::kSafe};
char const* preset_name(Preset p); // "seed-before", "seed-after", "all-early", "safe"
bool parse_preset(std::string const& s, Preset* out);

enum class FinalizeChoice : std::int32_t {
  kNew = 0,      // finalize::run's automatic dispatch (small-batch kernel where eligible)
  kPrevious = 1, // allow_small_batch = false: the dispatch rule before the seed
};
char const* finalize_choice_name(FinalizeChoice f); // "new", "previous"

struct KernelKnobs {
  bool pdl = true; // launched with the programmatic-serialization attribute when PDL is on
  Trigger trigger = Trigger::kDefault;
  std::int64_t delay_ns = 0; // spin before the kernel's first write
};

struct ChainConfig {
  std::string preset = "seed-after"; // name of the preset this started from
  std::array<KernelKnobs, kNumKernels> knobs{};
  bool metadata_before_wait = true; // finalize reads indices and weights before its wait
  FinalizeChoice finalize = FinalizeChoice::kNew;

  KernelKnobs& at(Kernel k) { return knobs[static_cast<std::size_t>(k)]; }
  KernelKnobs const& at(Kernel k) const { return knobs[static_cast<std::size_t>(k)]; }
  /// The trigger kernel k uses (kDefault resolved, except finalize's: see default_trigger).
  Trigger trigger(Kernel k) const;
};

ChainConfig preset_config(Preset p);

/// Applies "KEY=VALUE[,KEY=VALUE...]" with keys <kernel>.trigger (a trigger name),
/// <kernel>.delay_ns (0..10^9), <kernel>.pdl (on/off), finalize.meta (before/after),
/// finalize.variant (new/previous). Throws InputError naming `flag`, the item and what is allowed.
void apply_overrides(ChainConfig& cfg, std::string const& text, std::string const& flag = "--set");

/// "permute=entry,gemm1=exit,act=entry,gemm2=exit": resolved placements of the kernels between
/// routing and finalize (the race_matrix `triggers` column).
std::string between_triggers(ChainConfig const& cfg);
/// Every knob on one line, for logs and result-file attributes.
std::string describe(ChainConfig const& cfg);

/// Buffers of one layer in chain order, the order of chain::Buffer (kernels/chain/chain.hpp):
/// what the checksum kernel hashes and the verifier chain names.
inline constexpr int kLayerBuffers = 14;
std::array<char const*, kLayerBuffers> const& layer_buffer_names();

/// Finalize as the variant finalize::select picked runs it (kernels/finalize/finalize.hpp):
/// Trigger::kDefault is entry for small_batch and exit for the others, and only vecload and
/// small_batch read the metadata before their wait (scalar and deepseek_fp8 read it after).
struct FinalizeRun {
  Trigger trigger = Trigger::kExit; // never kDefault
  bool metadata_before_wait = false;
};
/// `variant` is a name of finalize::variant_name: scalar, vecload, small_batch or deepseek_fp8
/// (throws InputError naming it otherwise).
FinalizeRun finalize_run(ChainConfig const& cfg, std::string const& variant);

/// One kernel of the chain as the happens-before verifier sees it.
struct KernelDescription {
  std::string name;
  bool pdl = true;     // launched with the attribute (when the run has PDL on)
  std::string trigger; // resolved placement
  bool waits = true;   // every path executes the grid-dependency wait
  std::vector<std::string> reads_before_wait;
  std::vector<std::string> reads_after_wait;
  std::vector<std::string> writes; // all after the wait
};
/// One layer of the checked chain that ChainRunner launches (kernels/chain/chain.cu,
/// enqueue_layer) with PDL on, finalize being `finalize_variant`: routing, permute, gemm1, act,
/// gemm2, finalize, then the checksum kernel (a PDL secondary that waits at entry, reads every
/// buffer and never triggers); the next layer's routing is the checksum's secondary. What each
/// kernel reads before and after its wait and writes, by the buffer names of chain::buffer_name
/// plus the inputs (scores, hidden_states, w1, w2) and the measurement buffers (snapshot,
/// checksums). Left out: the kernel that poisons every buffer once per batch (launched without
/// PDL, the first routing's primary). Its writes race with a read only where routing's writes do
/// too (routing waits on every path, so a kernel after routing that waits before it triggers
/// orders both), so it changes no verdict.
std::vector<KernelDescription> describe_chain(ChainConfig const& cfg,
                                              std::string const& finalize_variant);

/// Layers of the runner a verifier chain repeats. Two decide every pair across layers: each
/// layer ends in the checksum kernel, which waits at entry and triggers only at its exit, and
/// every kernel waits on every path (kernels/common/pdl_stage.cuh), so the next layer launches
/// only after the kernels before the checksum completed and the checksum made its accesses.
/// Layer 1 against layer 0 checks that link; layers d > 1 apart have it d times in between.
inline constexpr int kVerifierIterations = 2;

/// describe_chain as a chain description of the verifier (data/README.md, "Chain descriptions"):
/// `iterations` layers back to back in one stream, or (`graph`) as stream capture puts every
/// layer of a batch into one CUDA graph (pdl::captured_graph), as `moefin race` runs them.
pdl::Chain verifier_chain(ChainConfig const& cfg, std::string const& finalize_variant, bool graph,
                          int iterations = kVerifierIterations);
/// verifier_chain as JSON, the format `moefin verify` reads.
std::string chain_json(ChainConfig const& cfg, std::string const& finalize_variant, bool graph);

/// What the verifier says about the chain of a race-matrix cell.
struct CellVerdict {
  pdl::Verdict chain = pdl::Verdict::kOrdered; // every pair: a race here can change any buffer
  // Finalize's reads of what routing wrote for it (expanded_to_permuted, expert_weights), on the
  // side of the wait where the variant reads them: what the stale-read counter and the output see.
  pdl::Verdict metadata = pdl::Verdict::kOrdered;
  std::size_t races = 0, pairs = 0;
};
CellVerdict verify_cell(ChainConfig const& cfg, std::string const& finalize_variant, bool graph);

/// A MoE layer shape.
struct LayerShape {
  std::string name; // "H6144/I512/E256/top-8"
  std::int64_t hidden = 0;
  std::int64_t inter = 0;
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  activation::Type act = activation::Type::kSwiGlu;
  std::int64_t gemm1_n() const { return act == activation::Type::kSwiGlu ? 2 * inter : inter; }
};
char const* activation_name(activation::Type t); // "swiglu", "relu2"

/// The seed's shapes. The intermediate size of H3584/E896/top-16 is not published; moefin uses
/// kTop16Inter (recorded in every result file through the shape name).
inline constexpr std::int64_t kTop16Inter = 512;
std::vector<LayerShape> published_shapes();

/// "top-8", "top-22", "top-16" (the published shapes) or "H<h>/I<i>/E<e>/top-<k>[/relu2|/swiglu]".
/// Throws InputError naming `flag`.
LayerShape parse_shape(std::string const& text, std::string const& flag = "--shapes");

/// The non-empty items of a comma-separated list (throws InputError naming `flag` when none).
std::vector<std::string> split_list(std::string const& text, std::string const& flag);
/// Comma-separated lists of shapes and presets (throw InputError naming `flag`).
std::vector<LayerShape> parse_shapes(std::string const& text, std::string const& flag);
std::vector<Preset> parse_presets(std::string const& text, std::string const& flag);

/// Limits of the CUDA chain: throws InputError naming what is out of range.
///   H multiple of 64 in [64, 16384]; I multiple of 64 in [64, 8192]; E in [K, 1024];
///   K in [1, 32]; T in [1, 128]; tile_m in {16, 32, 64, 128}.
void validate(LayerShape const& s, std::int64_t tokens, std::int64_t tile_m);

/// Rows of the permuted buffers: every expert's group padded to tile_m (a multiple of tile_m).
std::int64_t max_padded_rows(LayerShape const& s, std::int64_t tokens, std::int64_t tile_m);

/// Seed of routing `index` of the (shape, T) series of a run with seed `base`. Presets share
/// the series, so every preset sees the same routings.
std::uint64_t routing_seed(std::uint64_t base, LayerShape const& s, std::int64_t tokens,
                           std::int64_t index);
/// Seed of the weights and hidden states of a shape in a run with seed `base`.
std::uint64_t weight_seed(std::uint64_t base, LayerShape const& s);
/// The routing a replay of `seed` runs before it (a stale read needs a different predecessor).
std::uint64_t replay_predecessor(std::uint64_t seed);

/// Host copy of the router scores of one routing: [tokens, experts].
std::vector<float> router_scores(std::uint64_t seed, std::int64_t tokens, std::int64_t experts);

} // namespace moefin::chain
