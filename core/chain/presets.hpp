#pragma once
// The named PDL presets of the layer chain and the command-line overrides on top of them
// (`--set KEY=VALUE,...`), and the one-line descriptions of a configuration. Host-only.

#include "core/ops/chain_knobs.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace moefin::chain {

enum class Preset : std::int32_t {
  kSeedBefore = 0, // docs/design/seed.md, before the change: routing triggers after its writes,
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
/// A comma-separated list of presets (throws InputError naming `flag`).
std::vector<Preset> parse_presets(std::string const& text, std::string const& flag);

ChainConfig preset_config(Preset p);

/// Applies "KEY=VALUE[,KEY=VALUE...]" with keys <kernel>.trigger (a trigger name),
/// <kernel>.delay_ns (0..10^9), <kernel>.pdl (on/off), finalize.meta (before/after),
/// finalize.variant (new, previous or a registered finalize variant). Throws InputError naming
/// `flag`, the item and what is allowed.
void apply_overrides(ChainConfig& cfg, std::string const& text, std::string const& flag = "--set");

/// Sets cfg's flavour (chain_flavour(name): "moefin" or "released"; InputError otherwise) and
/// writes the placement of every kernel whose contract fixes it (KernelImpl::fixed) into its
/// knob, so that between_triggers, describe and result rows show where it really triggers. Apply
/// after the presets and overrides.
void set_flavour(ChainConfig& cfg, std::string const& name);

/// "permute=entry,gemm1=exit,act=entry,gemm2=exit": resolved placements of the kernels between
/// routing and finalize (the race_matrix `triggers` column).
std::string between_triggers(ChainConfig const& cfg);
/// Every knob on one line, for logs and result-file attributes.
std::string describe(ChainConfig const& cfg);

/// The non-empty items of a comma-separated list (throws InputError naming `flag` when none).
std::vector<std::string> split_list(std::string const& text, std::string const& flag);

} // namespace moefin::chain
