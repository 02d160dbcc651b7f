#include "experiments/commands.hpp"

namespace moefin::cli {

std::vector<Command> const& commands() {
  static std::vector<Command> const list{
      {"info", "print the build and the GPU", cmd::info},
      {"demo", "the main job: what this machine can run, end to end", cmd::demo},
      {"show", "print what a result file holds (provenance, tables)", cmd::show},
      {"report", "tables, figures and report.md from result files (analysis/)", cmd::report},
  };
  return list;
}

} // namespace moefin::cli
