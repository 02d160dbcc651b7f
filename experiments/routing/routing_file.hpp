#pragma once
// The routing flags `moefin route` and `moefin reference finalize` share, and the HDF5 group a
// routing and its layout are stored in (docs/reference/experiment-tables.md, group /route).

#include "core/cli.hpp"
#include "core/store/h5store.hpp"
#include "core/routing.hpp"

#include <map>
#include <string>

namespace moefin::cmd {

/// --tokens, --experts, --top-k, --distribution, --zipf-s, --hot-expert, --score-method,
/// --no-renormalize, --drop-fraction, --local-experts, --tile.
void add_routing_options(cli::po::options_description& desc);

/// --seed, --out (default cli::default_out(command)) and --overwrite of a command that writes
/// one file.
void add_result_file_options(cli::po::options_description& desc, std::string const& seed_help,
                             std::string const& command);

/// The spec those flags describe (validated: InputError naming the flag). --weights and --seed
/// are the caller's (their allowed values differ between commands).
RoutingSpec routing_spec_from(cli::po::variables_map const& vm, std::uint64_t seed,
                              finalize::WeightType weights);

/// The first routing flag given explicitly on the command line, or "" (for options that fix
/// the routing some other way, e.g. --routing FILE).
std::string explicit_routing_flag(cli::po::variables_map const& vm);

/// Writes the routing, its layout and (distribution kScores) its router scores as datasets of
/// `group`, and the spec as string attributes.
void write_routing(h5::ResultWriter& file, std::string const& group, RoutingSpec const& spec,
                   Routing const& routing, RoutingLayout const& layout);

struct StoredRouting {
  Routing routing;
  RoutingLayout layout;
  RoutingSpec spec; // as far as the attributes tell (sizes, distribution, locality, seed)
  std::map<std::string, std::string> attrs; // the group's attributes as written
};

/// Reads a routing written by write_routing. Throws FileError naming the file when the group is
/// missing, an array has the wrong shape, the routing is malformed, or the stored layout is not
/// the one build_layout derives from the stored expert ids.
StoredRouting read_routing(std::string const& path, std::string const& group = "route");

/// "local experts [b, b+n)" and similar one-line facts of a layout, for summaries.
std::string describe_layout(Routing const& routing, RoutingLayout const& layout);

/// Creates the parent directory of `path`; throws FileError when the file exists and
/// `overwrite` is false (call before long work, so that it fails early).
void check_can_create(std::string const& path, bool overwrite);

/// check_can_create, then the result file with this process's provenance.
h5::ResultWriter create_result_file(std::string const& path, std::uint64_t seed, bool overwrite);

} // namespace moefin::cmd
