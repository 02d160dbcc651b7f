// moefin show FILE: what a result file holds (provenance, groups, tables), or one table's rows
// in a format any tool reads (CSV, JSON, Markdown, plain text). Also the quickest check that a
// file is a readable moefin file.

#include "core/store/h5store.hpp"
#include "core/table_format.hpp"
#include "experiments/commands.hpp"
#include "experiments/report/store_table.hpp"

#include <iomanip>
#include <iostream>

namespace moefin::cmd {

namespace {

/// The overview as JSON: {"file", "provenance", "groups": [{"name", "kind", "attrs", and for
/// tables "rows", "samples", "columns"}]}.
void print_overview_json(h5::ResultReader const& reader) {
  nlohmann::json doc{{"file", reader.path()}, {"provenance", reader.provenance()}};
  doc["groups"] = nlohmann::json::array();
  for (auto const& g : reader.groups()) {
    auto attrs = reader.group_attrs(g);
    std::string const kind = attrs.count("kind") ? attrs.at("kind") : "";
    nlohmann::json group{{"name", g}, {"kind", kind}, {"attrs", attrs}};
    if (kind == "table") {
      auto const t = reader.read_table(g);
      group["rows"] = t.rows;
      group["samples"] = t.samples.size();
      nlohmann::json cols = nlohmann::json::array();
      for (auto const& c : t.columns)
        cols.push_back({{"name", c.name},
                        {"type", c.type == h5::ColType::kInt64     ? "int"
                                 : c.type == h5::ColType::kFloat64 ? "float"
                                                                   : "string"}});
      group["columns"] = cols;
    }
    doc["groups"].push_back(std::move(group));
  }
  std::cout << doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void print_overview(h5::ResultReader const& reader) {
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
}

} // namespace

int show(cli::Args const& args) {
  cli::po::options_description desc("show options");
  std::string format;
  desc.add_options()("file", cli::po::value<std::string>()->required(), "result file (HDF5)")(
      "table", cli::po::value<std::string>(),
      "print this experiment's table (every stored column, one line per row)")(
      "format", cli::po::value(&format)->default_value("csv"),
      "with --table: csv (RFC 4180 quoting, full precision; the default), json ({name, "
      "columns, rows: [{column: value}]}), md (Markdown), text (aligned columns); without "
      "--table: the overview, as text (the default) or json (provenance and groups)");
  cli::po::positional_options_description pos;
  pos.add("file", 1);
  cli::po::variables_map vm;
  if (!cli::parse("show", "FILE [--table GROUP] [--format csv|json|md|text]", desc, args, vm, &pos))
    return kExitOk;
  table::Format const f = table::parse_format("--format", format);
  h5::ResultReader reader(vm["file"].as<std::string>());
  if (vm.count("table")) {
    std::string const group = vm["table"].as<std::string>();
    table::write(results::store_table(reader.read_table(group), group, reader.path()), f,
                 std::cout);
    return kExitOk;
  }
  if (vm["format"].defaulted() || f == table::Format::kText) {
    print_overview(reader);
    return kExitOk;
  }
  if (f != table::Format::kJson)
    throw InputError("--format: '" + format +
                     "' needs --table GROUP (the overview is written as text or json)");
  print_overview_json(reader);
  return kExitOk;
}

} // namespace moefin::cmd
