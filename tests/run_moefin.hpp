#pragma once
// Runs the moefin binary of this build (MOEFIN_BINARY) from a test and captures what it printed.

#include <boost/test/unit_test.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace moefin::test {

struct Result {
  int status = -1;
  std::string out; // stdout and stderr together
};

/// Runs a shell command line, capturing its output (stdout and stderr) and exit status.
inline Result shell(std::string const& command) {
  std::string const cmd = "(" + command + ") 2>&1";
  Result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  BOOST_REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
    r.out.append(buf.data(), n);
  int const st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

/// Runs the moefin binary with `args` (shell words), capturing its output and exit status.
inline Result run(std::string const& args) {
  return shell(std::string(MOEFIN_BINARY) + " " + args);
}

inline bool contains(std::string const& s, std::string const& sub) {
  return s.find(sub) != std::string::npos;
}

inline int lines(std::string const& s) {
  int n = 0;
  for (char c : s)
    n += c == '\n';
  return n;
}

} // namespace moefin::test
