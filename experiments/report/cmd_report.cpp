// moefin report FILE_OR_DIR... [--out DIR]: tables, figures and report.md from result files and
// the published tables. The analysis lives in the Python package analysis/ (one implementation
// for the command line, the notebooks and the tests); this command finds the project's Python
// environment and hands over to it, so the options and messages are the package's own.

#include "experiments/report/report_runner.hpp"

#include "core/ops/errors.hpp"
#include "experiments/commands.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

extern char** environ;

namespace moefin {

namespace report {

std::string python_path() {
  if (char const* env = std::getenv("MOEFIN_PYTHON"); env && *env)
    return env;
  return std::string(MOEFIN_SOURCE_DIR) + "/.venv/bin/python";
}

void require_python(std::string const& python) {
  if (::access(python.c_str(), X_OK) != 0)
    throw FileError(python, "no Python environment for the report (run scripts/setup.sh, or set "
                            "MOEFIN_PYTHON to a python with numpy, h5py and matplotlib)");
}

std::string data_dir() {
  return std::string(MOEFIN_SOURCE_DIR) + "/data";
}

namespace {

/// The package is found through the source directory, so any interpreter with the three
/// packages works (the environment's own .pth file is then not needed).
void point_python_at_sources() {
  std::string path = MOEFIN_SOURCE_DIR;
  if (char const* old = std::getenv("PYTHONPATH"); old && *old)
    path += std::string(":") + old;
  ::setenv("PYTHONPATH", path.c_str(), 1);
  ::setenv("MOEFIN_REPORT_PROG", "moefin", 1);
}

} // namespace

int run(std::vector<std::string> const& args, bool replace_process) {
  std::string const python = python_path();
  require_python(python);
  point_python_at_sources();
  std::vector<std::string> words{python, "-m", "analysis", "report"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words)
    argv.push_back(w.data());
  argv.push_back(nullptr);
  std::cout << std::flush;
  std::cerr << std::flush;
  if (replace_process) {
    ::execv(python.c_str(), argv.data());
    throw FileError(python, std::string("cannot execute: ") + std::strerror(errno));
  }
  pid_t pid = 0;
  int const rc = ::posix_spawn(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ);
  if (rc != 0)
    throw FileError(python, std::string("cannot execute: ") + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      throw FileError(python, std::string("lost the child process: ") + std::strerror(errno));
  return WIFEXITED(status) ? WEXITSTATUS(status) : kExitFailure;
}

} // namespace report

namespace cmd {

int report(cli::Args const& args) {
  bool const help = args.empty() || args[0] == "--help" || args[0] == "-h";
  if (help) {
    std::string const python = report::python_path();
    if (::access(python.c_str(), X_OK) != 0) {
      // the full help comes from the package; without it, say what the command needs
      std::ostream& os = args.empty() ? std::cerr : std::cout;
      os << "usage: moefin report FILE_OR_DIR... [--out DIR] [--published DIR]\n\n"
            "Tables, figures and report.md from result files (python -m analysis report).\n"
            "Needs the Python environment: "
         << python << " is missing (run scripts/setup.sh or set MOEFIN_PYTHON).\n";
      return args.empty() ? kExitUsage : kExitOk;
    }
  }
  return report::run(args, /*replace_process=*/true);
}

} // namespace cmd

} // namespace moefin
