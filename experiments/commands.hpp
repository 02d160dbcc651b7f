#pragma once
// Entry points of the subcommands; each lives in its own experiments/cmd_*.cpp.

#include "core/cli.hpp"

namespace moefin::cmd {

int info(cli::Args const& args);
int demo(cli::Args const& args);
int show(cli::Args const& args);
int compare(cli::Args const& args);
int route(cli::Args const& args);
int reference_finalize(cli::Args const& args);
int verify(cli::Args const& args);
int simulate(cli::Args const& args);
int report(cli::Args const& args);
int check_finalize(cli::Args const& args);
int sweep_finalize(cli::Args const& args);
int equivalence(cli::Args const& args);
int race(cli::Args const& args);
int sweep_layer(cli::Args const& args);
int pdl_probe(cli::Args const& args);
int merge(cli::Args const& args);
int sweep_synthetic(cli::Args const& args);

} // namespace moefin::cmd
