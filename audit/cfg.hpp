#pragma once
// The control-flow graph of one kernel over its SASS: basic blocks of every function the kernel
// reaches, with callees inlined per call site (a node is a block in one calling context), so
// that a path through a callee returns to its own call site. Edges keep the branch they come
// from, so that a later analysis can drop an edge whose predicate it knows.

#include "audit/sass.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moefin::audit {

enum class EdgeKind : std::uint8_t {
  kFall,     // to the next instruction
  kTaken,    // a direct branch taken
  kIndirect, // one target of BRX/JMX
  kCall,     // into a callee
  kReturn,   // from a callee's RET back to its call site
};

struct Edge {
  int to = 0;
  EdgeKind kind = EdgeKind::kFall;
  std::uint32_t target_addr = 0; // kIndirect: the code address it goes to
};

struct Node {
  SassFunction const* fn = nullptr;
  std::size_t begin = 0, end = 0; // instruction range [begin, end) in fn->code
  int context = 0;                // calling context (0: the kernel itself)
  std::vector<Edge> succ;
  Instr const& last() const { return fn->code[end - 1]; }
};

struct Cfg {
  std::vector<Node> nodes;        // nodes[0] is the kernel entry
  std::vector<std::string> notes; // what was approximated (unresolved calls, depth limit, ...)
  // Indirect branches: how their targets were found.
  int indirect_annotated = 0, indirect_unannotated = 0;
};

/// The kernel's CFG. `module` supplies callees in other sections. Calls nest at most 16 deep;
/// deeper (or recursive) calls are treated as returning without effect, and say so in notes.
Cfg build_cfg(SassModule const& module, SassFunction const& kernel);

/// True for the opcodes that end a basic block (branches, exits, calls, returns, traps).
bool ends_block(Instr const& ins);

} // namespace moefin::audit
