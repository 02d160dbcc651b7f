#pragma once
// Command-line plumbing shared by every subcommand: parsing with Boost.Program_options, the
// one-line range errors, and the registry of subcommands.

#include "core/errors.hpp"

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

template <class T> std::string to_text(T const& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// Throws InputError "--flag: value V out of range [lo, hi]" unless lo <= value <= hi.
template <class T> void check_range(std::string const& flag, T value, T lo, T hi) {
  if (!(value >= lo && value <= hi))
    throw InputError(flag + ": value " + to_text(value) + " out of range [" + to_text(lo) + ", " +
                     to_text(hi) + "]");
}

/// Throws InputError unless value is a positive multiple of m.
void check_multiple(std::string const& flag, std::int64_t value, std::int64_t m);

/// Parses "1,2,4,8" (and ranges "1-4") into integers, each checked against [lo, hi].
std::vector<std::int64_t> parse_int_list(std::string const& flag, std::string const& text,
                                         std::int64_t lo, std::int64_t hi);

/// Checks `value` is one of `allowed`; throws InputError listing them otherwise.
void check_choice(std::string const& flag, std::string const& value,
                  std::vector<std::string> const& allowed);

} // namespace moefin::cli
