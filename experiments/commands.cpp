#include "experiments/commands.hpp"

namespace moefin::cli {

std::vector<Command> const& commands() {
  static std::vector<Command> const list{
      {"info", "print the build and the GPU", cmd::info},
      {"demo", "the main job: what this machine can run, end to end", cmd::demo},
      {"show", "print what a result file holds (provenance, tables)", cmd::show},
      {"compare", "before/after verdicts per configuration of two result files", cmd::compare},
      {"route", "a seeded routing and its permuted layout, to HDF5", cmd::route},
      {"reference finalize", "the Kokkos reference finalize over a routing, to HDF5",
       cmd::reference_finalize},
      {"verify", "PDL happens-before verifier of a chain description", cmd::verify},
      {"audit", "PDL facts of compiled kernels (SASS); --chain: verify their launch order",
       cmd::audit},
      {"simulate", "random PDL schedules of a chain; witnesses of stale reads", cmd::simulate},
      {"report", "tables, figures and report.md from result files (analysis/)", cmd::report},
      {"check finalize", "every finalize variant against the Kokkos reference (GPU)",
       cmd::check_finalize},
      {"sweep finalize", "time the finalize variants over the seed's grid (GPU); --print: print",
       cmd::sweep_finalize},
      {"equivalence", "layer chain: bitwise PDL on/off equivalence over randomized routings",
       cmd::equivalence},
      {"race", "layer chain: the race matrix of PDL trigger placements and delays", cmd::race},
      {"sweep layer", "layer chain: whole-layer time, new vs previous finalize and placements",
       cmd::sweep_layer},
      {"sweep gemm", "decode GEMMs alone: bf16 and fp4 weights vs the copy bandwidth (GPU)",
       cmd::sweep_gemm},
      {"sweep routing", "routing implementations side by side at decode token counts (GPU)",
       cmd::sweep_routing},
      {"pdl-probe", "producer/middle/consumer chains of the H200 table: stale reads on this GPU",
       cmd::pdl_probe},
      {"merge", "the shard files of a sharded sweep (--shard, launchers) into one result file",
       cmd::merge},
      {"sweep synthetic", "host-only sweep of seeded values: --shard, launchers, merge, no GPU",
       cmd::sweep_synthetic},
  };
  return list;
}

} // namespace moefin::cli
