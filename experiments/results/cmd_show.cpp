// moefin show FILE: what a result file holds (provenance, groups, tables), optionally a table's
// rows as CSV. Also the quickest check that a file is a readable moefin file.

#include "core/h5store.hpp"
#include "experiments/commands.hpp"

#include <iomanip>
#include <iostream>

namespace moefin::cmd {

namespace {

void print_csv(h5::Table const& t) {
  for (std::size_t c = 0; c < t.columns.size(); ++c)
    std::cout << (c ? "," : "") << t.columns[c].name;
  std::cout << "\n";
  for (std::size_t r = 0; r < t.rows; ++r) {
    for (std::size_t c = 0; c < t.columns.size(); ++c) {
      auto const& col = t.columns[c];
      std::cout << (c ? "," : "");
      if (col.type == h5::ColType::kInt64)
        std::cout << t.ints.at(col.name)[r];
      else if (col.type == h5::ColType::kFloat64)
        std::cout << std::setprecision(9) << t.reals.at(col.name)[r];
      else
        std::cout << t.strings.at(col.name)[r];
    }
    std::cout << "\n";
  }
}

} // namespace

int show(cli::Args const& args) {
  cli::po::options_description desc("show options");
  desc.add_options()("file", cli::po::value<std::string>()->required(), "result file (HDF5)")(
      "table", cli::po::value<std::string>(), "print this experiment's table as CSV");
  cli::po::positional_options_description pos;
  pos.add("file", 1);
  cli::po::variables_map vm;
  if (!cli::parse("show", "FILE [--table GROUP]", desc, args, vm, &pos))
    return kExitOk;
  h5::ResultReader reader(vm["file"].as<std::string>());
  if (vm.count("table")) {
    print_csv(reader.read_table(vm["table"].as<std::string>()));
    return kExitOk;
  }
  std::cout << reader.path() << "\n";
  for (auto const& kv : reader.provenance())
    std::cout << "  " << std::left << std::setw(24) << kv.first << kv.second << "\n";
  for (auto const& g : reader.groups()) {
    auto const attrs = reader.group_attrs(g);
    auto const kind = attrs.count("kind") ? attrs.at("kind") : std::string("?");
    std::cout << "/" << g << " (" << kind << ")";
    if (kind == "table") {
      auto const t = reader.read_table(g);
      std::cout << ": " << t.rows << " rows, " << t.samples.size() << " samples; columns";
      for (auto const& c : t.columns)
        std::cout << " " << c.name;
    }
    std::cout << "\n";
    for (auto const& kv : attrs)
      if (kv.first != "kind")
        std::cout << "    " << kv.first << " = " << kv.second << "\n";
  }
  return kExitOk;
}

} // namespace moefin::cmd
