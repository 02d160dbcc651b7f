#pragma once
// Runs the Python report of analysis/ (python -m analysis report ...) in the project's virtual
// environment: `moefin report` replaces itself with it, `moefin demo` runs it as one step.

#include <string>
#include <vector>

namespace moefin::report {

/// The interpreter: $MOEFIN_PYTHON when set, else <source dir>/.venv/bin/python (the
/// environment scripts/setup.sh creates).
std::string python_path();

/// Throws FileError naming the interpreter when it is missing or not executable, with the way
/// out (scripts/setup.sh or MOEFIN_PYTHON).
void require_python(std::string const& python);

/// The repository's data/ directory (result files and published tables).
std::string data_dir();

/// Runs `python -m analysis report ARGS...` and returns its exit status. With
/// `replace_process` the current process becomes the interpreter (exec) and never returns.
int run(std::vector<std::string> const& args, bool replace_process);

} // namespace moefin::report
