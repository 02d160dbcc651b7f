#include "experiments/commands.hpp"

namespace moefin::cli {

std::vector<Command> const& commands() {
  static std::vector<Command> const list{
      {"info", "print the build and the GPU", cmd::info},
      {"demo", "the main job: what this machine can run, end to end", cmd::demo},
      {"show", "print what a result file holds (provenance, tables)", cmd::show},
      {"equivalence", "layer chain: bitwise PDL on/off equivalence over randomized routings",
       cmd::equivalence},
      {"race", "layer chain: the race matrix of PDL trigger placements and delays", cmd::race},
      {"sweep layer", "layer chain: whole-layer time, new vs previous finalize and placements",
       cmd::sweep_layer},
  };
  return list;
}

} // namespace moefin::cli
