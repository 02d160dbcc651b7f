#pragma once
// The PTX side of the comparison "does the SASS load earlier relative to the wait than the PTX
// does": per .entry, its parameter names and, for every global load, the parameter its address
// derives from and whether a path reaches it before griddepcontrol.wait.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moefin::audit {

struct PtxLoad {
  std::size_t line = 0;
  int ordinal = -1;         // the parameter the address derives from; -1: not traced
  std::uint32_t offset = 0; // byte offset inside that parameter
  bool before_wait = false; // some PTX path reaches it before griddepcontrol.wait
};

struct PtxEntry {
  std::vector<std::string> params; // names in ordinal order
  bool has_wait = false;
  bool has_trigger = false;
  std::vector<PtxLoad> loads;
};

/// Every .entry of PTX text (one module or several concatenated), by name.
std::map<std::string, PtxEntry> parse_ptx(std::string const& text);

} // namespace moefin::audit
