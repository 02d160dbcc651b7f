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

/// The one default result file of a command: "out/<command>.h5", its words joined by '_'
/// ("sweep finalize" -> "out/sweep_finalize.h5").
std::string default_out(std::string const& command);

/// Adds the options every experiment that writes a result file takes: --out (default
/// default_out(command)), --resume, --seed.
void add_result_options(po::options_description& desc, std::string const& command);

/// A flag spelling that was renamed: `parse` refuses it in every command with one line naming
/// the new spelling (prefix guessing would otherwise take some old spellings for new ones).
struct Renamed {
  char const* old;
  char const* now;
  char const* command = nullptr; // the one command it was renamed in; nullptr: every command
};
/// Every renamed spelling (one vocabulary: the same name for the same axis in every command).
std::vector<Renamed> const& renamed_flags();

/// The paragraph of `moefin --help` on list and range values (the syntax every list flag takes).
extern char const* const kListSyntaxHelp;

// The range checks (core/ops/ranges.hpp), under the names the commands use.
using ranges::check_choice;
using ranges::check_multiple;
using ranges::check_range;
using ranges::to_text;

/// Parses "1,2,4,8" and ranges "lo:hi" or "lo:hi:step" (inclusive: "1:4" is 1,2,3,4; "16:64:16"
/// is 16,32,48,64) into integers, each checked against [lo, hi]. The old range spelling "1-4"
/// is an InputError naming "1:4".
std::vector<std::int64_t> parse_int_list(std::string const& flag, std::string const& text,
                                         std::int64_t lo, std::int64_t hi);

} // namespace moefin::cli
