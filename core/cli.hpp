#pragma once
// Command-line plumbing shared by every subcommand: parsing with Boost.Program_options, the
// registry of subcommands, lists; the one-line range errors are core/ops/ranges.hpp's.

#include "core/ops/errors.hpp"
#include "core/ops/ranges.hpp"

#include <boost/program_options.hpp>

#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace moefin::cli {

namespace po = boost::program_options;

using Args = std::vector<std::string>;

/// A subcommand: `name` may be two words ("sweep finalize").
struct Command {
  std::string name;
  std::string summary;
  std::function<int(Args const&)> run;
};

/// Every subcommand, in the order `moefin --help` lists them (experiments/commands.cpp).
std::vector<Command> const& commands();

/// Parses `args` (the words after the subcommand name) against `desc`. Prints the help text and
/// returns false on --help; throws UsageError on unknown options or malformed values.
bool parse(std::string const& command, std::string const& synopsis,
           po::options_description const& desc, Args const& args, po::variables_map& vm,
           po::positional_options_description const* positional = nullptr);

/// Adds the options every experiment that writes a result file takes: --out, --resume, --seed.
void add_output_options(po::options_description& desc, std::string const& default_out);

// The range checks (core/ops/ranges.hpp), under the names the commands use.
using ranges::check_choice;
using ranges::check_multiple;
using ranges::check_range;
using ranges::to_text;

/// Parses "1,2,4,8" (and ranges "1-4") into integers, each checked against [lo, hi].
std::vector<std::int64_t> parse_int_list(std::string const& flag, std::string const& text,
                                         std::int64_t lo, std::int64_t hi);

} // namespace moefin::cli
