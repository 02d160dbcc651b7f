#pragma once
// The PDL knobs every kernel of the chain has (DESIGN.md section 4). Host-visible, no CUDA.

#include <cstdint>

namespace moefin {

/// Where a kernel executes griddepcontrol.launch_dependents.
enum class Trigger : std::int32_t {
  kDefault = 0,    // the kernel's own placement in the seed (see each kernel's header)
  kExit = 1,       // never explicitly: implicit when each CTA exits
  kEntry = 2,      // first instruction, before the grid-dependency wait
  kAfterWait = 3,  // right after the grid-dependency wait, before any write
  kAfterWrites = 4 // after the kernel's last global write
};

char const* trigger_name(Trigger t); // "default", "exit", "entry", "after_wait", "after_writes"
bool parse_trigger(char const* s, Trigger* out);

/// Per-CTA %globaltimer stamps, recorded when `stamps` is set: [grid CTAs][4] =
/// start, wait returned, trigger, end (ns); -1 where the event did not happen.
struct PdlKnobs {
  bool pdl = true; // launch with programmatic stream serialization
  Trigger trigger = Trigger::kDefault;
  std::int64_t delay_ns = 0;      // spin on %globaltimer before the kernel's first write
  std::int64_t* stamps = nullptr; // device pointer or nullptr
  // Resident-wave kernels (the chain's GEMMs, permute, activation): CTAs per SM of their grid;
  // 0 = the kernel's policy. Whether the kernels between two others can all be resident at
  // once decides whether early triggers really let the later one start early (README, results).
  int ctas_per_sm = 0;
  // Resident-wave kernels: ask for the largest shared-memory carveout (else the driver's choice).
  bool max_shared_carveout = false;
};

} // namespace moefin
