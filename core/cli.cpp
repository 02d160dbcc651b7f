#include "core/cli.hpp"

#include <iostream>

namespace moefin::cli {

bool parse(std::string const& command, std::string const& synopsis,
           po::options_description const& desc, Args const& args, po::variables_map& vm,
           po::positional_options_description const* positional) {
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

void add_output_options(po::options_description& desc, std::string const& default_out) {
  desc.add_options()("out,o", po::value<std::string>()->default_value(default_out),
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
                       "' is not an integer (expected a list like 1,2,4 or 1-8)");
    check_range(flag, v, lo, hi);
    return v;
  };
  while (std::getline(ss, item, ',')) {
    auto const dash = item.find('-', 1);
    if (dash != std::string::npos) {
      std::int64_t const a = to_int(item.substr(0, dash));
      std::int64_t const b = to_int(item.substr(dash + 1));
      if (b < a)
        throw InputError(flag + ": empty range " + item);
      for (std::int64_t v = a; v <= b; ++v)
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
