#pragma once
// The PDL facts of one kernel from its SASS (docs/design/pdl.md): whether every path waits
// (ACQBULK = griddepcontrol.wait) and whether every path waits before it triggers (PREEXIT =
// griddepcontrol.launch_dependents), with a witness path where not; every global access with
// the parameter its address derives from and where it may run relative to the executing
// thread's wait and the CTA's trigger; the runtime PDL switches and how they were decided.
//
// Granularity. The wait blocks only the thread that executes it, and a CTA triggers at the
// first of its threads that executes PREEXIT, so "waits before it triggers" is checked on
// every path to every PREEXIT, whichever warp runs it. When the launch's threads per CTA are
// known, each warp is also analysed with its index fixed (warp-specialized kernels branch on
// it), which resolves what every CTA certainly contains: the kernel waits on every path when
// some warp waits on all of its paths (a CTA completes, and triggers implicitly, only after
// all its threads exit). Without it every thread path is taken as a whole CTA's.

#include "audit/dataflow.hpp"
#include "audit/sass.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moefin::audit {

enum class AccessKind : std::uint8_t { kRead, kWrite, kAtomic };
char const* access_kind_name(AccessKind k); // "read", "write", "atomic"

/// One global-memory instruction.
struct Access {
  std::uint32_t addr = 0;
  std::string opcode;
  AccessKind kind = AccessKind::kRead;
  bool descriptor = false;           // TMA or bulk copy: the parameter is the tensor descriptor
  bool guarded = false;              // predicated: may execute
  bool many = false;                 // derives from more parameters than are tracked
  std::vector<std::uint32_t> params; // parameter offsets it derives from; empty: not traced
  bool before_wait = false;          // may run before the executing thread waited
  // ... and before it passed any barrier: no other thread's wait can order it (a read in a warp
  // that never waits may still follow a barrier after another warp's wait: before_wait only).
  bool before_any_sync = false;
  bool after_wait = false;           // may run after it
  bool after_trigger = false; // may run after the CTA triggered (its own thread or another's)
};

/// A branch around the wait decided by a parameter compared with a constant.
struct PdlSwitch {
  std::uint32_t branch = 0; // address of the branch
  std::uint32_t offset = 0; // the parameter bytes [offset, offset + size)
  std::uint32_t size = 4;
  PredValue::Op op = PredValue::kNe;
  std::uint32_t k = 0;
  bool is_unsigned = false;
  bool waits_when = true;     // the comparison's outcome on the branch that reaches the wait
  bool by_assumption = false; // decided by an assumed parameter value, not by the PDL default
  bool taken_waits = true;    // the decision made: the branch that waits (false: skips it)
};

struct KernelFacts {
  std::string name; // the symbol
  std::string arch;
  std::size_t instructions = 0;
  bool has_wait = false;    // an ACQBULK is reachable
  bool has_trigger = false; // a PREEXIT is reachable
  bool waits_every_path = false;
  bool wait_before_trigger = false;
  bool trigger_before_wait = false;                // a PREEXIT may run before its thread waited
  std::vector<std::uint32_t> exit_without_wait;    // witness: block addresses, then the EXIT
  std::vector<std::uint32_t> trigger_without_wait; // witness: ..., then the PREEXIT
  std::vector<Access> accesses;
  std::vector<PdlSwitch> switches;
  int warps = 0;                  // warps analysed one by one; 0: thread paths only
  std::vector<int> waiting_warps; // warps of which every path waits
  std::vector<std::string> notes;
};

struct AnalysisOptions {
  int threads = 0;         // threads per CTA of the launch (blockDim.x); 0: unknown
  bool pdl_default = true; // runtime PDL switches take the branch that waits
};

/// Analyses `kernel` of `module` in `env` (parameter block, known bytes, constant bank 2).
KernelFacts analyze_kernel(SassModule const& module, SassFunction const& kernel,
                           Environment const& env, AnalysisOptions const& opt);

} // namespace moefin::audit
