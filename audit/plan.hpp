#pragma once
// The comparison of a chain description's kernel (what the verifier is told) with what the audit
// found in that kernel's binary. The description side is a small plain struct, so that any
// description can be pointed at it by an adapter (moefin's layer plan:
// experiments/audit/moefin_plan.hpp).

#include "audit/audit.hpp"

#include <functional>
#include <string>
#include <vector>

namespace moefin::audit {

/// One kernel as a chain description has it.
struct PlannedKernel {
  std::string name;
  std::string impl;    // the implementation the description names (which binary is audited)
  std::string trigger; // "entry", "after_wait", "after_writes", "exit"
  bool waits = true;   // every path waits
  std::vector<std::string> reads_before_wait;
  std::vector<std::string> reads_after_wait;
  std::vector<std::string> writes;
};

/// The same facts read from the audit, in buffer names.
struct ObservedKernel {
  std::string trigger; // the plan's vocabulary: entry (before the wait), after_wait (writes
                       // follow the trigger), after_writes (none does), exit (no trigger)
  bool waits = false;
  std::vector<std::string> reads_before_wait, reads_after_wait, writes; // sorted, unique
  std::vector<std::string> untraced; // accesses whose address the audit could not trace
};

/// `buffer` maps a parameter offset to the buffers it names (none: not part of the chain).
ObservedKernel observe(AuditedKernel const& k,
                       std::function<std::vector<std::string>(std::uint32_t)> const& buffer);

/// Every way the two differ, one line each ("trigger: planned entry, binary after_wait");
/// empty when they agree.
std::vector<std::string> compare_plan(PlannedKernel const& plan, ObservedKernel const& seen);

} // namespace moefin::audit
