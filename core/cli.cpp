#include "core/cli.hpp"

#include <iostream>

namespace moefin::cli {

bool parse(std::string const& command, std::string const& synopsis,
           po::options_description const& desc, Args const& args, po::variables_map& vm,
           po::positional_options_description const* positional) {
  for (auto const& arg : args)
    for (auto const& r : renamed_flags()) {
      std::string const old = r.old;
      if (r.command && command != r.command)
        continue;
      if (arg == old || arg.rfind(old + "=", 0) == 0)
        throw UsageError(command + ": " + old + " is now " + r.now + " (see 'moefin " + command +
                         " --help')");
    }
  po::options_description all;
  all.add(desc);
  all.add_options()("help,h", "show this help and exit");
  try {
    po::command_line_parser parser(args);
    parser.options(all).style(po::command_line_style::unix_style);
    if (positional)
      parser.positional(*positional);
    po::store(parser.run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: moefin " << command << " " << synopsis << "\n\n" << all << "\n";
      return false;
    }
    po::notify(vm);
  } catch (po::error const& e) {
    std::ostringstream os;
    os << e.what() << "\nusage: moefin " << command << " " << synopsis << "\n(see 'moefin "
       << command << " --help')";
    throw UsageError(os.str());
  }
  return true;
}

std::string default_out(std::string const& command) {
  std::string name = command;
  for (char& c : name)
    if (c == ' ' || c == '-')
      c = '_';
  return "out/" + name + ".h5";
}

std::vector<Renamed> const& renamed_flags() {
  static std::vector<Renamed> const kRenamed = {
      {"--shape", "--shapes"},
      {"--delays", "--delay-ns"},
      {"--delay-kernel", "--delay-kernels"},
      // --table GROUP selects a table (show); --print FILE prints a command's tables of files.
      {"--table", "--print", "sweep finalize"},
  };
  return kRenamed;
}

char const* const kListSyntaxHelp =
    "Lists and ranges: a flag that takes several values takes them comma-separated (a,b,c); an\n"
    "integer list also takes inclusive ranges lo:hi or lo:hi:step (1:4 is 1,2,3,4; 16:64:16 is\n"
    "16,32,48,64), mixed with single values (1,2,8:10). The same axis has the same flag in\n"
    "every command (--shapes, --tokens, --delay-ns, --delay-kernels, ...); a renamed spelling\n"
    "fails with a line naming the new one. --print FILE prints a command's tables of result\n"
    "files (no GPU); --table GROUP picks one table of a file (show). Experiments write\n"
    "out/<command>.h5 unless --out names a file (out/sweep_finalize.h5 for `sweep finalize`).\n";

void add_result_options(po::options_description& desc, std::string const& command) {
  desc.add_options()("out,o", po::value<std::string>()->default_value(default_out(command)),
                     "result file to create (HDF5); refuses to overwrite")(
      "resume", po::value<std::string>()->default_value(""),
      "continue this result file, skipping configurations it already holds")(
      "seed", po::value<std::uint64_t>()->default_value(2026), "seed of every random input");
}

std::vector<std::int64_t> parse_int_list(std::string const& flag, std::string const& text,
                                         std::int64_t lo, std::int64_t hi) {
  std::vector<std::int64_t> out;
  std::stringstream ss(text);
  std::string item;
  auto to_int = [&](std::string const& s) -> std::int64_t {
    std::size_t used = 0;
    std::int64_t v = 0;
    try {
      v = std::stoll(s, &used);
    } catch (std::exception const&) {
      used = 0;
    }
    if (s.empty() || used != s.size())
      throw InputError(flag + ": '" + s +
                       "' is not an integer (expected a list like 1,2,4 or 1:8)");
    check_range(flag, v, lo, hi);
    return v;
  };
  while (std::getline(ss, item, ',')) {
    auto const dash = item.find('-', 1);
    auto const colon = item.find(':');
    if (dash != std::string::npos && colon == std::string::npos)
      throw InputError(flag + ": '" + item + "': ranges are written lo:hi[:step] (" +
                       item.substr(0, dash) + ":" + item.substr(dash + 1) + ")");
    if (colon != std::string::npos) {
      auto const second = item.find(':', colon + 1);
      std::int64_t const a = to_int(item.substr(0, colon));
      std::int64_t const b = to_int(item.substr(colon + 1, second - colon - 1));
      std::int64_t step = 1;
      if (second != std::string::npos) {
        std::string const st = item.substr(second + 1);
        std::size_t used = 0;
        try {
          step = std::stoll(st, &used);
        } catch (std::exception const&) {
          used = 0;
        }
        if (st.empty() || used != st.size() || step < 1)
          throw InputError(flag + ": '" + item + "': the step of lo:hi:step is an integer >= 1");
      }
      if (b < a)
        throw InputError(flag + ": empty range " + item);
      for (std::int64_t v = a; v <= b; v += step)
        out.push_back(v);
    } else {
      out.push_back(to_int(item));
    }
  }
  if (out.empty())
    throw InputError(flag + ": empty list");
  return out;
}

} // namespace moefin::cli
