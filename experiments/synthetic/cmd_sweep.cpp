// moefin sweep synthetic: a host-only sweep through the same harness as the GPU sweeps
// (configuration list, cost estimates, --shard and launchers, --resume, one row per
// configuration), whose measurement is a seeded function of the configuration key. So a sharded
// run, merged, can be compared row for row and value for value with an unsharded one on any
// machine, which is what the tests of sharding and `moefin merge` do.

#include "core/cli.hpp"
#include "core/store/h5store.hpp"
#include "core/rng.hpp"
#include "core/stats.hpp"
#include "experiments/commands.hpp"
#include "experiments/finalize/cases.hpp"
#include "experiments/finalize/grid.hpp"
#include "experiments/harness/progress.hpp"
#include "experiments/harness/run_limit.hpp"
#include "experiments/harness/shard_run.hpp"

#include <unistd.h>

#include <algorithm>
#include <iostream>

namespace moefin::cmd {

namespace {

/// Relative cost of each synthetic variant: the estimates differ, so the partition has work.
double variant_weight(std::string const& v) {
  return v == "fast" ? 1.0 : v == "slow" ? 4.0 : 2.0;
}

std::string synthetic_key(std::int64_t n, std::string const& variant) {
  return "n=" + std::to_string(n) + ",variant=" + variant;
}

} // namespace

int sweep_synthetic(cli::Args const& args) {
  cli::po::options_description desc("sweep synthetic options");
  std::string sizes, variants;
  int samples = 5, stop_after = 0;
  double max_minutes = 0;
  desc.add_options()("sizes", cli::po::value(&sizes)->default_value("1:24"),
                     "axis n: list or ranges, 1..1000000 (cost estimate n x the variant's weight "
                     "ms)")("variants", cli::po::value(&variants)->default_value("base,fast,slow"),
                            "axis variant: base (weight 2), fast (1), slow (4)")(
      "samples", cli::po::value(&samples)->default_value(5), "raw samples per row, 1..1000")(
      "stop-after", cli::po::value(&stop_after)->default_value(0),
      "stop cleanly after this many configurations measured in this call (0: no limit); "
      "continue with --resume")("max-minutes", cli::po::value(&max_minutes)->default_value(0),
                                "stop cleanly before this many minutes, by the estimates (0: no "
                                "limit); continue with --resume");
  harness::add_shard_option(desc);
  cli::add_result_options(desc, "sweep synthetic");
  cli::po::variables_map vm;
  if (!cli::parse("sweep synthetic",
                  "[--sizes LIST] [--variants LIST] [--samples N] [--stop-after N] "
                  "[--max-minutes M] [--shard I/N|env] [--out FILE | --resume FILE]",
                  desc, args, vm))
    return kExitOk;
  cli::check_range("--samples", samples, 1, 1000);
  cli::check_range("--stop-after", stop_after, 0, 1000000000);
  cli::check_range("--max-minutes", max_minutes, 0.0, 1e6);
  auto const ns = cli::parse_int_list("--sizes", sizes, 1, 1000000);
  auto const vs = fin::parse_choices("--variants", variants, {"base", "fast", "slow"});

  std::vector<harness::PlannedConfig> configs;
  for (auto n : ns)
    for (auto const& v : vs)
      configs.push_back({synthetic_key(n, v), static_cast<double>(n) * variant_weight(v) * 1e-3});
  harness::ShardedRun run("sweep synthetic", vm, configs,
                          "variants=" + variants + ";samples=" + std::to_string(samples));
  if (run.active())
    std::cout << run.summary() << "\n";

  auto file = run.open(vm);
  std::string const path = file.path();
  std::uint64_t const seed = file.seed();
  auto process = file.table("synthetic_process", {h5::str_col("host", 64), h5::int_col("pid")},
                            "the process that measured this file's rows (one per shard)");
  run.per_shard_table(file, "synthetic_process");
  if (!process.has("process")) {
    char host[64] = {0};
    gethostname(host, sizeof(host) - 1);
    h5::Row row;
    row.set("host", std::string(host)).set("pid", static_cast<std::int64_t>(::getpid()));
    process.append("process", row);
  }
  auto table = file.table("synthetic_sweep",
                          {h5::int_col("n"), h5::str_col("variant", 16), h5::real_col("cost_s"),
                           h5::real_col("median"), h5::real_col("min")},
                          "seeded synthetic values of each (n, variant): median and minimum of "
                          "the raw samples; cost_s = the estimate the partition used");

  Progress progress("sweep synthetic", run.mine().size());
  RunLimit const limit(max_minutes);
  int measured = 0;
  std::size_t left = 0;
  for (std::size_t i : run.mine()) {
    auto const& c = configs[i];
    if (table.has(c.key)) {
      run.finished(i, 1, 0.0);
      progress.step(c.key, true);
      continue;
    }
    if ((stop_after > 0 && measured >= stop_after) || !limit.allows(c.cost_s)) {
      left = run.mine_from(i);
      break;
    }
    std::int64_t const n = ns[i / vs.size()];
    std::string const& v = vs[i % vs.size()];
    Rng rng(fin::case_seed(seed, c.key));
    std::vector<double> values;
    for (int r = 0; r < samples; ++r)
      values.push_back(static_cast<double>(n) * variant_weight(v) * (1.0 + 0.05 * rng.uniform()));
    double const t0 = progress.elapsed();
    h5::Row row;
    row.set("n", n)
        .set("variant", v)
        .set("cost_s", c.cost_s)
        .set("median", stats::median(values))
        .set("min", *std::min_element(values.begin(), values.end()));
    table.append(c.key, row, values);
    run.finished(i, 1, progress.elapsed() - t0);
    ++measured;
    progress.step(c.key);
  }
  progress.finish();
  std::cout << "wrote " << path << " (" << table.rows() << " rows in /synthetic_sweep)\n";
  if (left)
    std::cout << "incomplete: stopped by --stop-after or --max-minutes with " << left
              << " configurations left; continue with --resume " << run.resume_name(vm, path)
              << "\n";
  return kExitOk;
}

} // namespace moefin::cmd
