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

/// `value` with control characters replaced and cut to `max` characters ("..." at the end): how
/// a value given on the command line is echoed in a message.
std::string cut(std::string const& value, std::size_t max = 80);

/// A message as one line: newlines and tabs become blanks, quoted values ('...') are cut to 80
/// characters and other runs without blanks to 240 (what main() prints for every error).
std::string one_line(std::string const& message);

/// Values one list option may expand to (ranges "1:8" included).
inline constexpr std::int64_t kMaxListValues = 4096;

// The range checks (core/ops/ranges.hpp), under the names the commands use.
using ranges::check_choice;
using ranges::check_multiple;
using ranges::check_range;
using ranges::to_text;

// Option values whose check runs inside parse() (po::notify), so that a bad value is a usage
// error (exit 2) before the command opens a device or a file, whatever the command does first.
// Use them in the option tables: desc.add_options()("rounds", cli::ranged("--rounds", 5, 3, 1000),
// "...").

/// A number with its default, checked against [lo, hi].
template <class T>
po::typed_value<T>* ranged(std::string const& flag, T default_value, T lo, T hi) {
  return po::value<T>()->default_value(default_value)->notifier([flag, lo, hi](T const& v) {
    check_range(flag, v, lo, hi);
  });
}

/// A word with its default, one of `allowed`.
po::typed_value<std::string>* choice(std::string const& flag,
                                     std::vector<std::string> const& allowed,
                                     std::string const& default_value);

/// A list "1,2,4" / "1:8" with its default, every value in [lo, hi] (parse_int_list's rules).
po::typed_value<std::string>* int_list(std::string const& flag, std::int64_t lo, std::int64_t hi,
                                       std::string const& default_value);

/// Parses "1,2,4,8" and ranges "lo:hi" or "lo:hi:step" (inclusive: "1:4" is 1,2,3,4; "16:64:16"
/// is 16,32,48,64) into integers, each checked against [lo, hi]. The old range spelling "1-4"
/// is an InputError naming "1:4".
std::vector<std::int64_t> parse_int_list(std::string const& flag, std::string const& text,
                                         std::int64_t lo, std::int64_t hi);

} // namespace moefin::cli
