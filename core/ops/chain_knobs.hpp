#pragma once
// The PDL knobs of one MoE layer chain: routing -> permute -> GEMM1 -> activation -> GEMM2 ->
// finalize, each with its launch attribute, trigger placement and injected delay, finalize's
// metadata placement and which finalize runs. Presets and command-line overrides fill it
// (core/chain/presets.hpp); the layer plan (core/ops/layer_plan.hpp) resolves it. Header-only.

#include "core/ops/activation_params.hpp"
#include "core/ops/finalize_variants.hpp"
#include "core/ops/gemm_params.hpp"
#include "core/ops/pdl_knobs.hpp"
#include "core/ops/permute_params.hpp"
#include "core/ops/routing_params.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace moefin::chain {

/// The kernels of one layer, in stream order, and the checksum kernel a checked run launches
/// after each layer (it has no knobs: kAllKernels lists the six of the layer).
enum class Kernel : std::int32_t {
  kRouting = 0,
  kPermute,
  kGemm1,
  kActivation,
  kGemm2,
  kFinalize,
  kChecksum,
};
inline constexpr int kNumKernels = 6;
inline constexpr std::array<Kernel, kNumKernels> kAllKernels = {
    Kernel::kRouting,    Kernel::kPermute, Kernel::kGemm1,
    Kernel::kActivation, Kernel::kGemm2,   Kernel::kFinalize};
/// The kernels between routing and finalize, whose trigger placement decides the race.
inline constexpr std::array<Kernel, 4> kBetweenKernels = {Kernel::kPermute, Kernel::kGemm1,
                                                          Kernel::kActivation, Kernel::kGemm2};

/// "routing", "permute", "gemm1", "act", "gemm2", "finalize", "checksum".
inline char const* kernel_name(Kernel k) {
  switch (k) {
  case Kernel::kRouting:
    return "routing";
  case Kernel::kPermute:
    return "permute";
  case Kernel::kGemm1:
    return "gemm1";
  case Kernel::kActivation:
    return "act";
  case Kernel::kGemm2:
    return "gemm2";
  case Kernel::kFinalize:
    return "finalize";
  case Kernel::kChecksum:
    return "checksum";
  }
  return "?";
}

inline bool parse_kernel(std::string_view s, Kernel* out) {
  for (Kernel k : kAllKernels)
    if (s == kernel_name(k)) {
      *out = k;
      return true;
    }
  return false;
}

/// The placement moefin's kernel k uses for Trigger::kDefault (each op's params header names
/// it): routing after its wait, permute and activation at entry, the GEMMs implicitly at exit.
/// Finalize stays kDefault: its variant resolves it (FinalizeVariant::default_trigger).
constexpr Trigger default_trigger(Kernel k) {
  switch (k) {
  case Kernel::kRouting:
    return routing::kDefaultTrigger;
  case Kernel::kPermute:
    return permute::kDefaultTrigger;
  case Kernel::kGemm1:
  case Kernel::kGemm2:
    return gemm::kDefaultTrigger;
  case Kernel::kActivation:
    return activation::kDefaultTrigger;
  case Kernel::kFinalize:
    return Trigger::kDefault;
  case Kernel::kChecksum:
    return Trigger::kExit;
  }
  return Trigger::kExit;
}

/// Which finalize the chain launches.
struct FinalizeChoice {
  // A variant launched whatever the shape; nullptr: the dispatch rule (finalize::select).
  finalize::FinalizeVariant const* forced = nullptr;
  bool previous = false; // the dispatch rule before the seed's change (no small_batch)

  /// "new" (the dispatch rule), "previous" or the forced variant's name.
  std::string name() const { return forced ? forced->name : previous ? "previous" : "new"; }
  static FinalizeChoice dispatch_new() { return {}; }
  static FinalizeChoice dispatch_previous() { return {nullptr, true}; }
  static FinalizeChoice of(finalize::FinalizeVariant const& v) { return {&v, false}; }
  bool operator==(FinalizeChoice const& o) const {
    return forced == o.forced && previous == o.previous;
  }
  bool operator!=(FinalizeChoice const& o) const { return !(*this == o); }
};

struct KernelKnobs {
  bool pdl = true; // launched with the programmatic-serialization attribute when PDL is on
  Trigger trigger = Trigger::kDefault;
  std::int64_t delay_ns = 0; // spin before the kernel's first write
};

struct ChainConfig {
  std::string preset = "seed-after"; // name of the preset this started from
  std::array<KernelKnobs, kNumKernels> knobs{};
  bool metadata_before_wait = true; // finalize may read indices and weights before its wait
  FinalizeChoice finalize;
  // The implementations of the kernels: "moefin" (its own) or "released" (the released FlashInfer
  // routing, permute and activation around moefin's GEMMs; layer_plan.hpp, chain_flavour()).
  std::string flavour = "moefin";

  KernelKnobs& at(Kernel k) { return knobs[static_cast<std::size_t>(k)]; }
  KernelKnobs const& at(Kernel k) const { return knobs[static_cast<std::size_t>(k)]; }
  /// The trigger kernel k uses (kDefault resolved, except finalize's: see default_trigger).
  Trigger trigger(Kernel k) const { return resolve(at(k).trigger, default_trigger(k)); }
};

} // namespace moefin::chain
