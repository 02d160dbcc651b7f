#pragma once
// The PDL knobs every kernel of the chain has (docs/design/architecture.md#pdl-knobs): where it
// triggers its dependents, the launch attribute, an injected delay and per-CTA stamps. The one
// Trigger of the project: kernels, the layer plan and the verifier's chain descriptions (core/pdl)
// all use it. Header-only, no CUDA.

#include <array>
#include <cstdint>
#include <string_view>

namespace moefin {

/// Where a kernel executes griddepcontrol.launch_dependents.
enum class Trigger : std::int32_t {
  kDefault = 0,    // the kernel's own placement (its params header names it; finalize: per variant)
  kExit = 1,       // never explicitly: implicit when each CTA exits
  kEntry = 2,      // first instruction, before the grid-dependency wait
  kAfterWait = 3,  // right after the grid-dependency wait, before any write
  kAfterWrites = 4 // after the kernel's last global write
};

/// The four placements a kernel can have (every Trigger but kDefault), in this order.
inline constexpr std::array<Trigger, 4> kPlacements = {Trigger::kExit, Trigger::kEntry,
                                                       Trigger::kAfterWait, Trigger::kAfterWrites};

/// "default", "exit", "entry", "after_wait", "after_writes".
inline char const* trigger_name(Trigger t) {
  switch (t) {
  case Trigger::kDefault:
    return "default";
  case Trigger::kExit:
    return "exit";
  case Trigger::kEntry:
    return "entry";
  case Trigger::kAfterWait:
    return "after_wait";
  case Trigger::kAfterWrites:
    return "after_writes";
  }
  return "?";
}

/// The Trigger named `s` (a trigger_name); false when there is none.
inline bool parse_trigger(std::string_view s, Trigger* out) {
  for (Trigger t : {Trigger::kDefault, Trigger::kExit, Trigger::kEntry, Trigger::kAfterWait,
                    Trigger::kAfterWrites})
    if (s == trigger_name(t)) {
      if (out)
        *out = t;
      return true;
    }
  return false;
}
inline bool parse_trigger(char const* s, Trigger* out) {
  return s != nullptr && parse_trigger(std::string_view(s), out);
}

/// Per-CTA %globaltimer stamps, recorded when `stamps` is set: [grid CTAs][4] =
/// start, wait returned, trigger, end (ns); -1 where the event did not happen.
struct PdlKnobs {
  bool pdl = true; // launch with programmatic stream serialization
  Trigger trigger = Trigger::kDefault;
  std::int64_t delay_ns = 0;      // spin on %globaltimer before the kernel's first write
  std::int64_t* stamps = nullptr; // device pointer or nullptr
  // Resident-wave kernels (the chain's GEMMs, permute, activation): CTAs per SM of their grid; 0 =
  // the kernel's policy. Whether the kernels between two others can all be resident at once decides
  // whether early triggers really let the later one start early (docs/design/layer-chain.md).
  int ctas_per_sm = 0;
  // Resident-wave kernels: ask for the largest shared-memory carveout (else the driver's choice).
  bool max_shared_carveout = false;
};

/// `t` with kDefault replaced by the kernel's own placement.
constexpr Trigger resolve(Trigger t, Trigger kernel_default) {
  return t == Trigger::kDefault ? kernel_default : t;
}

} // namespace moefin
