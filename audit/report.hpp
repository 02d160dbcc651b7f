#pragma once
// How `moefin audit` shows what it found: one table line per kernel, notes under the table,
// the JSON facts (`--json`, format in docs/reference/audit-files.md), and each kernel as a
// fragment in the verifier's chain format (core/pdl/chain.hpp: paths of read/write/wait/trigger
// ops), its buffers named by a mapping from parameters or by the parameters' own names.

#include "audit/audit.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace moefin::audit {

/// The demangled symbol without its parameter list ("moefin::permute::permute_kernel").
std::string short_name(std::string const& symbol);

/// "before the wait", "after the wait", "none (implicit at exit)".
std::string trigger_text(KernelFacts const& f);

/// The parameter names of the accesses that satisfy `pick`, each once, in offset order.
std::vector<std::string> access_names(AuditedKernel const& k,
                                      std::function<bool(Access const&)> const& pick);

/// The table: a header and one line per kernel; then the notes (witness paths, switches,
/// loads the SASS moved above the wait, kernels without PDL instructions).
void print_table(std::ostream& os, std::vector<AuditedKernel> const& kernels);

/// The facts of one kernel as JSON.
nlohmann::ordered_json facts_json(AuditedKernel const& k);

/// The kernel's paths in the chain format: op texts ("read B", "wait", "trigger"). `buffer`
/// maps a parameter offset to the buffers it names (none: not a buffer of the chain, the
/// access is left out and its parameter name added to `unmapped`). Without `buffer` every
/// parameter is its own buffer, named after it.
///
/// One path with the wait when the CTA waits on every path (accesses that may run before the
/// wait placed before it, the trigger where it may first run), plus a path without the wait
/// when some path exits without waiting; each access after the trigger when it may run after
/// the CTA's trigger.
std::vector<std::vector<std::string>>
fragment_paths(AuditedKernel const& k,
               std::function<std::vector<std::string>(std::uint32_t)> const& buffer = {},
               std::vector<std::string>* unmapped = nullptr);

} // namespace moefin::audit
