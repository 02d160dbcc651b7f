// moefin: the command-line entry point. Parses the subcommand and maps every error class to its
// exit status (core/ops/errors.hpp) with a single line on stderr.

#include "core/build_info.hpp"
#include "core/cli.hpp"
#include "core/store/h5store.hpp"
#include "core/ops/errors.hpp"
#include "reference/kokkos_env.hpp"

#include <iostream>
#include <string>
#include <vector>

namespace {

using moefin::cli::Command;
using moefin::cli::commands;
using moefin::cli::one_line;

void print_usage(std::ostream& os) {
  os << "usage: moefin <command> [options]\n"
        "       moefin <command> --help\n"
        "       moefin --version\n\n"
        "MoE finalize kernels and PDL ordering: reference, fast paths, verification.\n\n"
        "commands:\n";
  for (Command const& c : commands()) {
    std::string name = c.name;
    name.resize(std::max<std::size_t>(name.size(), 20), ' ');
    os << "  " << name << " " << c.summary << "\n";
  }
  os << "\n" << moefin::cli::kListSyntaxHelp;
}

/// Finds the command named by the first one or two words; `used` tells how many.
Command const* find_command(std::vector<std::string> const& words, std::size_t& used) {
  if (words.size() >= 2) {
    std::string const two = words[0] + " " + words[1];
    for (Command const& c : commands())
      if (c.name == two) {
        used = 2;
        return &c;
      }
  }
  for (Command const& c : commands())
    if (c.name == words[0]) {
      used = 1;
      return &c;
    }
  return nullptr;
}

/// A group word ("sweep") that only exists as the first word of two-word commands.
bool is_group(std::string const& word) {
  for (Command const& c : commands())
    if (c.name.rfind(word + " ", 0) == 0)
      return true;
  return false;
}

int dispatch(std::vector<std::string> const& words) {
  if (words.empty()) {
    print_usage(std::cerr);
    return moefin::kExitUsage;
  }
  std::string const& first = words[0];
  if (first == "help" && words.size() >= 2) { // "moefin help verify" is "moefin verify --help"
    std::vector<std::string> rest(words.begin() + 1, words.end());
    rest.push_back("--help");
    return dispatch(rest);
  }
  if (first == "--help" || first == "-h" || first == "help") {
    print_usage(std::cout);
    return moefin::kExitOk;
  }
  if (first == "--version" || first == "-V") {
    auto const& b = moefin::build_info();
    std::cout << "moefin " << b.version << " (" << b.git_commit << ")\n";
    return moefin::kExitOk;
  }
  std::size_t used = 0;
  Command const* cmd = find_command(words, used);
  if (!cmd) {
    if (is_group(first)) {
      bool const help = words.size() >= 2 && (words[1] == "--help" || words[1] == "-h");
      std::string subs;
      for (Command const& c : commands())
        if (c.name.rfind(first + " ", 0) == 0)
          subs += (subs.empty() ? "" : ", ") + c.name;
      if (!help) {
        std::cerr << "moefin: '" << first << "' needs a subcommand"
                  << (words.size() >= 2 ? " (unknown: '" + moefin::cli::cut(words[1]) + "')"
                                        : std::string())
                  << "; usage: moefin " << first << " <what> [options], <what> one of: " << subs
                  << "\n";
        return moefin::kExitUsage;
      }
      std::cout << "usage: moefin " << first << " <what> [options]\n";
      for (Command const& c : commands())
        if (c.name.rfind(first + " ", 0) == 0)
          std::cout << "  " << c.name << "  " << c.summary << "\n";
      return moefin::kExitOk;
    }
    std::cerr << "moefin: unknown command '" << moefin::cli::cut(first)
              << "'; usage: moefin <command> [options] (see 'moefin --help')\n";
    return moefin::kExitUsage;
  }
  return cmd->run(std::vector<std::string>(words.begin() + static_cast<long>(used), words.end()));
}

} // namespace

int main(int argc, char** argv) {
  moefin::h5::set_command_line(argc, argv);
  std::vector<std::string> const words(argv + 1, argv + argc);
  try {
    moefin::reference::KokkosSession kokkos;
    return dispatch(words);
  } catch (moefin::UsageError const& e) {
    std::cerr << "moefin: " << one_line(e.what()) << "\n";
    return moefin::kExitUsage;
  } catch (moefin::InputError const& e) {
    std::cerr << "moefin: error: " << one_line(e.what()) << "\n";
    return moefin::kExitUsage;
  } catch (moefin::FileError const& e) {
    std::cerr << "moefin: error: " << one_line(e.what()) << "\n";
    return moefin::kExitFailure;
  } catch (moefin::DeviceError const& e) {
    std::cerr << "moefin: device error: " << one_line(e.what()) << "\n";
    return moefin::kExitFailure;
  } catch (std::bad_alloc const&) {
    std::cerr << "moefin: error: out of memory\n";
    return moefin::kExitFailure;
  } catch (std::exception const& e) {
    std::cerr << "moefin: error: " << one_line(e.what()) << "\n";
    return moefin::kExitFailure;
  }
}
