#include "audit/text.hpp"

#include <cstdio>

namespace moefin::audit {

std::string trim(std::string const& s) {
  std::size_t const b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos)
    return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::vector<std::string> split_top_level(std::string const& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char ch : s) {
    if (ch == '[' || ch == '(' || ch == '{')
      ++depth;
    else if (ch == ']' || ch == ')' || ch == '}')
      --depth;
    if (ch == sep && depth == 0) {
      if (!trim(cur).empty())
        out.push_back(trim(cur));
      cur.clear();
      continue;
    }
    cur += ch;
  }
  if (!trim(cur).empty())
    out.push_back(trim(cur));
  return out;
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

} // namespace moefin::audit
