// moefin check finalize: every finalize variant against the Kokkos reference over the sweep's grid,
// with uniform and skewed routings, with and without dropped experts. Outputs are poisoned before
// each run; an unwritten or NaN element, or an error above the tolerance, fails. One row per
// (variant, shape, routing) in /finalize_check (docs/reference/experiment-tables.md). The benchmark
// state (harness/bench_state.hpp) enumerates the configurations, skips what a variant cannot read,
// resumes and stops on --max-minutes; the body builds each case once for every variant.

#include "core/cli.hpp"
#include "core/device_info.hpp"
#include "core/store/h5store.hpp"
#include "core/rng.hpp"
#include "experiments/commands.hpp"
#include "experiments/finalize/cases.hpp"
#include "experiments/finalize/grid.hpp"
#include "experiments/finalize/verify.hpp"
#include "experiments/harness/bench_state.hpp"
#include "experiments/harness/shard_run.hpp"

#ifdef MOEFIN_HAVE_CUDA
#include "experiments/finalize/device_case.hpp"
#endif

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

namespace moefin::cmd {

namespace {

std::vector<h5::Column> check_columns() {
  return {h5::str_col("variant", 28),
          h5::int_col("H"),
          h5::int_col("T"),
          h5::int_col("K"),
          h5::int_col("hidden_padded"),
          h5::str_col("weights", 8),
          h5::str_col("routing", 16),
          h5::real_col("dropped"),
          h5::real_col("max_abs_err"),
          h5::real_col("peak"),
          h5::real_col("rel_err"),
          h5::int_col("ulp_max"),
          h5::int_col("unwritten"),
          h5::int_col("nan"),
          h5::int_col("pass"),
          h5::real_col("tolerance")};
}

struct VariantTotals {
  std::int64_t rows = 0, failed = 0, ulp_max = 0;
  double rel_err_max = 0;
};

/// The configurations: the grid's (H, T, K, weights) x routings per unit, one row per variant,
/// keyed "variant=V,H=..,T=..,K=..,w=..,routing=R" (as every /finalize_check so far).
bench::Benchmark check_benchmark(fin::GridAxes const& grid,
                                 std::vector<fin::RoutingCase> const& cases,
                                 std::vector<fin::NamedVariant> const& variants, std::int64_t pad) {
  bench::Benchmark b("finalize_check", check_columns(),
                     "every finalize variant against the Kokkos reference; rel_err = "
                     "max_abs_err / peak (bf16: vs the exact sum; deepseek_fp8: vs the "
                     "reference's E4M3 output dequantized); ulp_max in bf16 or E4M3 steps "
                     "to the rounded reference");
  fin::add_grid_axes(b, grid);
  std::vector<std::string> routing_names, variant_names;
  for (auto const& rc : cases)
    routing_names.push_back(rc.name);
  for (auto const& v : variants)
    variant_names.push_back(v.name);
  b.axis(bench::string_axis("routing", routing_names));
  b.axis(bench::string_axis("variant", variant_names, bench::Scope::kRow));
  b.key_order({"variant", "H", "T", "K", "weights", "routing"});
  b.skip_if([pad](bench::Config const& row) {
    return fin::unsupported_reason(*fin::variant_options(row.str("variant")).variant,
                                   fin::shape_of(row), row.num("H") + pad);
  });
  b.cost([](bench::Config const& u, std::size_t rows) {
    // The host reference dominates: T * K * H products, twice (rounded and exact).
    double const work = static_cast<double>(u.num("T") * u.num("K") * u.num("H"));
    return 0.005 + 4e-9 * work + 2e-3 * static_cast<double>(rows);
  });
  return b;
}

} // namespace

int check_finalize(cli::Args const& args) {
  cli::po::options_description desc("check finalize options");
  fin::GridFlags g;
  std::string routings, variants;
  std::int64_t pad = 0;
  double tolerance = fin::kBf16Tolerance, max_minutes = 0;
  fin::add_grid_options(desc, g);
  desc.add_options()(
      "routings", cli::po::value(&routings)->default_value("uniform,uniform/ep2,zipf/ep2,hot"),
      "routing distributions; DIST/epN keeps 1/N of the 256 experts local (the rest dropped). "
      "Distributions the routing generator does not implement are skipped with a note")(
      "variants", cli::po::value(&variants)->default_value(fin::join(fin::check_variant_names())),
      "finalize variants to check (any registered one)")("hidden-pad",
                                                         cli::po::value(&pad)->default_value(0),
                                                         "hidden_padded = hidden + PAD (0..1024)")(
      "tolerance", cli::po::value(&tolerance)->default_value(fin::kBf16Tolerance, "4e-3"),
      "bf16: max error relative to the output's peak")(
      "max-minutes", cli::po::value(&max_minutes)->default_value(0),
      "stop cleanly before this many minutes (0: no limit); continue with --resume")(
      "list", "print the configurations (index, estimated seconds, row keys, skipped rows with "
              "their reason) and exit; no GPU needed");
  harness::add_shard_option(desc);
  cli::add_result_options(desc, "check finalize");
  cli::po::variables_map vm;
  if (!cli::parse("check finalize",
                  "[--hidden LIST] [--tokens LIST|regime] [--top-k LIST] [--weights LIST] "
                  "[--routings LIST] [--variants LIST] [--list] [--shard I/N|env] "
                  "[--out FILE | --resume FILE]",
                  desc, args, vm))
    return kExitOk;
  cli::check_range<std::int64_t>("--hidden-pad", pad, 0, 1024);
  cli::check_range("--tolerance", tolerance, 1e-7, 1.0);
  cli::check_range("--max-minutes", max_minutes, 0.0, 1e6);
  fin::check_grid_options(vm);
  fin::GridAxes const grid = fin::parse_grid_axes(g);
  // small_batch_v2/candidates expands to the geometry candidates that fit the grid's top-K.
  auto const vlist =
      fin::parse_variants("--variants", fin::expand_v2_candidates(variants, fin::parse_grid(g)));
  std::vector<fin::RoutingCase> cases;
  for (auto const& rc : fin::parse_routing_cases("--routings", routings)) {
    std::string why;
    if (fin::routing_available(rc, &why))
      cases.push_back(rc);
    else
      std::cout << "note: routing " << rc.name << " skipped: " << why << "\n";
  }
  if (cases.empty())
    throw InputError("--routings: none of '" + routings + "' is available");
  bench::Benchmark const bench = check_benchmark(grid, cases, vlist, pad);
  // The shard partition runs over the benchmark state's units (a shape and routing each, in
  // their stable order), priced by its cost estimates.
  std::vector<bench::Unit> const units = bench.enumerate();
  std::vector<harness::PlannedConfig> planned;
  for (auto const& u : units)
    planned.push_back({u.label, u.cost_s});
  harness::ShardedRun run("check finalize", vm, std::move(planned),
                          "variants=" + variants + ";hidden_pad=" + std::to_string(pad) +
                              ";tolerance=" + cli::to_text(tolerance));
  if (run.active())
    std::cout << run.summary() << "\n";
  if (vm.count("list")) {
    bench.list(std::cout, run.listed());
    return kExitOk;
  }

#ifndef MOEFIN_HAVE_CUDA
  throw DeviceError("check finalize: this moefin was built without CUDA");
#else
  if (run.use_device().selected)
    std::cout << run.summary() << "\n";
  DeviceInfo const dinfo = query_device();
  if (!dinfo.present)
    throw DeviceError("check finalize needs a CUDA device: " + dinfo.reason);

  auto file = run.open(vm);
  std::uint64_t const seed = file.seed();
  bool const any_fp8 =
      std::any_of(vlist.begin(), vlist.end(), [](auto const& v) { return v.entry->fp8_output; });
  std::map<std::string, fin::RoutingCase> case_of;
  for (auto const& rc : cases)
    case_of[rc.name] = rc;

  dev::Stream stream;
  std::map<std::string, VariantTotals> totals;
  std::int64_t failures = 0;
  std::unique_ptr<fin::RowPool> pool; // units come grouped by H: one pool at a time
  auto body = [&](bench::Unit const& u, std::vector<bench::Config> const& todo,
                  bench::Recorder& rec) {
    fin::Shape const shape = fin::shape_of(u.config);
    std::int64_t const hp = shape.hidden + pad;
    if (!pool || pool->hidden() != shape.hidden)
      pool = std::make_unique<fin::RowPool>(
          shape.hidden, hp, Rng::mix(seed, static_cast<std::uint64_t>(shape.hidden * 4099 + hp)));
    fin::RoutingCase const& rc = case_of.at(u.config.str("routing"));
    std::string const base = fin::shape_key(shape) + ",routing=" + rc.name;
    auto const host = fin::make_case(shape, hp, rc, fin::case_seed(seed, base), *pool, any_fp8);
    auto const expected = fin::expected_of(host, any_fp8);
    fin::DeviceCase d(host);
    std::string worst_name;
    double worst = -1;
    int passed = 0;
    for (auto const& row : todo) {
      std::string const& name = row.str("variant");
      finalize::Options const o = fin::variant_options(name);
      try {
        (void)finalize::plan(d.params, o);
      } catch (InputError const& e) {
        // e.g. a small_batch_v2 geometry candidate that does not fit this top-K
        rec.skip(row, e.what());
        continue;
      }
      fin::Verdict verdict;
      try {
        if (o.variant->fp8_output) {
          auto const out = fin::run_fp8(d, o, stream.get());
          verdict = fin::verify_fp8(out.q, out.scales, expected);
        } else {
          verdict = fin::verify_bf16(fin::run_bf16(d, o, stream.get()), expected, tolerance);
        }
      } catch (std::exception const& e) {
        // A device fault leaves the context unusable: report what ran and stop.
        throw DeviceError(name + " on " + base + ": " + e.what());
      }
      bench::Measurement m;
      m.columns.set("hidden_padded", hp)
          .set("dropped", host.dropped)
          .set("max_abs_err", verdict.max_abs_err)
          .set("peak", verdict.peak)
          .set("rel_err", verdict.rel_err)
          .set("ulp_max", verdict.ulp_max)
          .set("unwritten", verdict.unwritten)
          .set("nan", verdict.nan)
          .set("pass", verdict.pass ? 1 : 0)
          .set("tolerance", verdict.tolerance);
      rec.add(row, std::move(m));
      auto& tot = totals[name];
      ++tot.rows;
      tot.rel_err_max = std::max(tot.rel_err_max, verdict.rel_err);
      tot.ulp_max = std::max(tot.ulp_max, verdict.ulp_max);
      if (!verdict.pass) {
        ++tot.failed;
        ++failures;
        std::cout << "FAIL " << name << " " << base << " (dropped " << host.dropped
                  << "): " << verdict.detail << "\n";
      } else {
        ++passed;
      }
      if (verdict.rel_err > worst) {
        worst = verdict.rel_err;
        worst_name = name;
      }
    }
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%d/%zu pass, worst rel_err %.2e (%s)", passed, todo.size(),
                  worst, worst_name.c_str());
    rec.summary(buf);
  };
  bench::RunOptions ro;
  ro.max_minutes = max_minutes;
  ro.runs = [&run](bench::Unit const& u) { return run.mine(u.index); };
  ro.finished = [&run](bench::Unit const& u, std::size_t rows, double seconds) {
    run.finished(u.index, static_cast<std::int64_t>(rows), seconds);
  };
  bench::RunResult const r = bench.run(file, ro, body);

  std::printf("\n%-28s %8s %8s %12s %8s\n", "variant", "rows", "failed", "max rel_err", "max ulp");
  for (auto const& v : vlist) {
    auto const& t = totals[v.name];
    std::printf("%-28s %8lld %8lld %12.3e %8lld\n", v.name.c_str(), static_cast<long long>(t.rows),
                static_cast<long long>(t.failed), t.rel_err_max, static_cast<long long>(t.ulp_max));
  }
  std::cout << "wrote " << file.path() << " (" << r.rows << " rows in this call, " << r.skips
            << " skipped with a reason in /skipped)\n";
  if (r.left)
    std::cout << "incomplete: stopped by --max-minutes with " << r.left
              << " configurations left; continue with --resume " << run.resume_name(vm, file.path())
              << "\n";
  if (failures) {
    std::cout << "check finalize: FAILED, " << failures << " of the rows above\n";
    return kExitFailure;
  }
  std::cout << "check finalize: " << (r.left ? "passed so far" : "passed") << " (" << r.measured
            << " configurations measured in this call)\n";
  return kExitOk;
#endif
}

} // namespace moefin::cmd
