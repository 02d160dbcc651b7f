// moefin compare BASE.h5 NEW.h5: before/after verdicts per configuration (experiments/report/
// compare.hpp), as Markdown, CSV or JSON, with an exit status a CI job can gate on.

#include "core/cli.hpp"
#include "core/store/h5store.hpp"
#include "core/ops/errors.hpp"
#include "experiments/commands.hpp"
#include "experiments/report/compare.hpp"

#include <fstream>
#include <iostream>
#include <sstream>

namespace moefin::cmd {

namespace {

char const* const kSynopsis =
    "BASE.h5 NEW.h5 [--threshold P] [--format md|csv|json] [--out FILE] [--side-by-side] "
    "[--table GROUP,..] [--rows all|changed]";

char const* const kAbout =
    "Compares two result files table by table: every timing table both hold (a `median_us`\n"
    "column: /finalize_sweep, /finalize_repeat, /launch_floor, /copy_bandwidth, /layer_sweep,\n"
    "...), configurations matched by their axis values (H, T, K, weights, mode, l2, variant; "
    "mode;\n"
    "bytes; shape, T, finalize, placement; else the key), never by row order.\n"
    "For each: ratio = base median / new median (> 1: NEW is faster), its 95% percentile\n"
    "bootstrap interval (each file's rounds resampled on their own, 2000 resamples), the noise\n"
    "(the largest of each file's spread of rounds (q3 - q1) / median, the configuration's own\n"
    "run-to-run difference where the file measured it twice (/finalize_repeat), and the median\n"
    "run-to-run difference of the table), and a verdict: same within a factor 1 + P/100 either\n"
    "way; beyond it noisy when the change is within the noise, else faster or slower.\n"
    "A summary line per table (on stdout; on stderr for csv and json without --out).\n"
    "Files of different GPUs or conditions (root attributes arch, gpu_name, carveout,\n"
    "ctas_per_sm, launch) are refused, or shown beside each other without verdicts with\n"
    "--side-by-side; they are never pooled.\n"
    "Exit status: 0 no configuration slower beyond the threshold; 1 some slower, or a bad file\n"
    "(one line naming it); 2 bad usage, files of different conditions without --side-by-side, or\n"
    "files without a configuration in common (nothing compared).";

std::vector<std::string> split_list(std::string const& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty())
      out.push_back(item[0] == '/' ? item.substr(1) : item);
  return out;
}

} // namespace

int compare(cli::Args const& args) {
  cli::po::options_description desc(std::string("compare options\n") + kAbout + "\n\noptions");
  double threshold = 5;
  std::string format, out, rows;
  std::vector<std::string> tables;
  desc.add_options()("base", cli::po::value<std::string>()->required(),
                     "the result file before the change")(
      "new", cli::po::value<std::string>()->required(), "the result file after the change")(
      "threshold", cli::po::value(&threshold)->default_value(5),
      "percent: a change within a factor 1 + P/100 either way is 'same', 0..1000")(
      "format", cli::po::value(&format)->default_value("md"),
      "md (Markdown: files, method, a section per table), csv (one table, RFC 4180 quoting; a "
      "`table` column and the union of the axes), json")(
      "out,o", cli::po::value(&out)->default_value(""),
      "write the comparison to FILE (overwritten) instead of stdout")(
      "side-by-side", "show files of different GPUs or conditions beside each other (no verdicts)")(
      "table", cli::po::value(&tables)->multitoken(), "compare only these groups (GROUP,..)")(
      "rows", cli::po::value(&rows)->default_value("all"),
      "all: every configuration; changed: those not 'same' (the summary counts all)");
  cli::po::positional_options_description pos;
  pos.add("base", 1).add("new", 1);
  cli::po::variables_map vm;
  if (!cli::parse("compare", kSynopsis, desc, args, vm, &pos))
    return kExitOk;
  cli::check_range("--threshold", threshold, 0.0, 1000.0);
  cli::check_choice("--format", format, {"md", "csv", "json"});
  cli::check_choice("--rows", rows, {"all", "changed"});

  compare::Options o;
  o.threshold = threshold / 100;
  o.side_by_side = vm.count("side-by-side") != 0;
  for (auto const& t : tables)
    for (auto const& g : split_list(t))
      o.tables.push_back(g);
  h5::ResultReader const base(vm["base"].as<std::string>());
  h5::ResultReader const next(vm["new"].as<std::string>());
  compare::Result const r = compare::compare_files(base, next, o);
  bool const changed = rows == "changed";

  std::ofstream file;
  if (!out.empty()) {
    file.open(out, std::ios::out | std::ios::trunc);
    if (!file)
      throw FileError(out, "cannot open for writing");
  }
  std::ostream& os = out.empty() ? std::cout : file;
  if (format == "md")
    compare::write_markdown(r, changed, os);
  else if (format == "csv")
    table::write_csv(compare::combined_table(r, changed), os);
  else
    compare::write_json(r, changed, os);
  if (!out.empty()) {
    file.close();
    if (!file)
      throw FileError(out, "write failed");
  }

  // Markdown on stdout already holds the summary; otherwise it goes where it does not mix with
  // a machine-readable stream.
  if (format != "md" || !out.empty()) {
    std::ostream& log = out.empty() ? std::cerr : std::cout;
    for (auto const& t : r.tables)
      log << summary_line(t, o, r.judged()) << "\n";
    for (auto const& n : r.not_compared)
      log << "not compared: " << n << "\n";
    if (!out.empty())
      log << "wrote " << out << " (" << format << ")\n";
  }
  // A gate that compared nothing must not pass: two files without a configuration in common
  // (another experiment, or a table missing from one of them) are an error, not "none slower".
  if (r.matched() == 0) {
    std::string why;
    for (auto const& n : r.not_compared)
      why += (why.empty() ? " (" : "; ") + n;
    throw InputError("compare: no configuration is in both files, nothing was compared" +
                     (why.empty() ? std::string() : why + ")"));
  }
  std::size_t const slower = r.slower();
  std::ostream& verdict = format == "md" || !out.empty() ? std::cout : std::cerr;
  if (format != "md" || !out.empty())
    verdict << (r.judged() ? "compare: " + std::to_string(slower) +
                                 " configuration(s) slower beyond the threshold"
                           : std::string("compare: not judged (different conditions, side by "
                                         "side)"))
            << "\n";
  return slower ? kExitFailure : kExitOk;
}

} // namespace moefin::cmd
