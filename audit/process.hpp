#pragma once
// Running the external tools of the audit (nvdisasm, cuobjdump, nvcc): one process with its
// output captured, and a pool that runs several at once (nvdisasm is single-threaded; the
// released audit disassembles about a thousand cubins).

#include <functional>
#include <string>
#include <vector>

namespace moefin::audit {

struct ProcessResult {
  int status = -1; // exit status; 128 + signal when killed; -1 when it could not start
  std::string out; // stdout
  std::string err; // stderr
};

/// Runs argv[0] (searched in PATH when it has no '/') with the arguments, in `cwd` when given,
/// and waits for it. Never throws for a failing program: the status says it.
ProcessResult run_process(std::vector<std::string> const& argv, std::string const& cwd = {});

/// Calls `job(i)` for i in [0, n) on up to `jobs` threads (at least 1); the first exception a
/// job throws is rethrown after every started job finished.
void parallel_for(std::size_t n, int jobs, std::function<void(std::size_t)> const& job);

/// Processors this process may use (at least 1).
int available_cpus();

/// "a b 'c d'": a command line for messages.
std::string command_text(std::vector<std::string> const& argv);

} // namespace moefin::audit
