#pragma once
// Small text helpers shared by the audit's readers of tool output.

#include <cstdint>
#include <string>
#include <vector>

namespace moefin::audit {

/// `s` without leading and trailing blanks (spaces, tabs, carriage returns).
std::string trim(std::string const& s);

/// `s` split at `sep` where no bracket ([], (), {}) is open; pieces trimmed, empty ones kept out.
std::vector<std::string> split_top_level(std::string const& s, char sep);

/// "0x1f0".
std::string hex(std::uint64_t v);

} // namespace moefin::audit
