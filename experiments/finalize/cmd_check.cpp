// moefin check finalize: every finalize variant against the Kokkos reference over the sweep's
// grid, with uniform and skewed routings, with and without dropped experts. Outputs are
// poisoned before each run; an unwritten or NaN element, or an error above the tolerance, fails.
// One row per (variant, shape, routing) in /finalize_check (data/README.md).

#include "core/cli.hpp"
#include "core/device_info.hpp"
#include "core/finalize_inputs.hpp"
#include "core/h5store.hpp"
#include "core/rng.hpp"
#include "experiments/commands.hpp"
#include "experiments/finalize/cases.hpp"
#include "experiments/finalize/grid.hpp"
#include "experiments/finalize/verify.hpp"
#include "experiments/harness/progress.hpp"
#include "experiments/harness/shard_run.hpp"
#include "experiments/harness/run_limit.hpp"

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

using fin::NamedVariant;

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

bool needs_128bit(NamedVariant const& v) {
  return v.entry->needs_128bit_rows;
}

/// Rough seconds of one (shape, routing) case, for the shard partition only: a fixed part, the
/// host references over T x H x (K + 1) elements, and each variant's run and comparison.
double check_cost_s(fin::Shape const& s, std::size_t variants) {
  double const elems = static_cast<double>(s.tokens * s.hidden * (s.top_k + 1));
  return 0.004 + 6e-9 * elems + static_cast<double>(variants) * (2e-5 + 1e-9 * elems);
}

struct VariantTotals {
  std::int64_t rows = 0, failed = 0, ulp_max = 0;
  double rel_err_max = 0;
};

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
      "stop cleanly before this many minutes (0: no limit); continue with --resume");
  harness::add_shard_option(desc);
  cli::add_output_options(desc, "out/finalize_check.h5");
  cli::po::variables_map vm;
  if (!cli::parse("check finalize",
                  "[--hidden LIST] [--tokens LIST|regime] [--top-k LIST] [--weights LIST] "
                  "[--routings LIST] [--variants LIST] [--shard I/N|env] "
                  "[--out FILE | --resume FILE]",
                  desc, args, vm))
    return kExitOk;
  cli::check_range<std::int64_t>("--hidden-pad", pad, 0, 1024);
  cli::check_range("--tolerance", tolerance, 1e-7, 1.0);
  cli::check_range("--max-minutes", max_minutes, 0.0, 1e6);
  auto const shapes = fin::parse_grid(g);
  auto const vlist = fin::parse_variants("--variants", variants);
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
  // One configuration per (shape, routing), shape-major: index = shape * cases + case.
  std::vector<harness::PlannedConfig> planned;
  for (auto const& shape : shapes)
    for (auto const& rc : cases)
      planned.push_back(
          {fin::shape_key(shape) + ",routing=" + rc.name, check_cost_s(shape, vlist.size())});
  harness::ShardedRun run("check finalize", vm, std::move(planned),
                          "variants=" + variants + ";hidden_pad=" + std::to_string(pad) +
                              ";tolerance=" + cli::to_text(tolerance));
  if (run.active())
    std::cout << run.summary() << "\n";

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
  auto table = file.table("finalize_check", check_columns(),
                          "every finalize variant against the Kokkos reference; rel_err = "
                          "max_abs_err / peak (bf16: vs the exact sum; deepseek_fp8: vs the "
                          "reference's E4M3 output dequantized); ulp_max in bf16 or E4M3 steps "
                          "to the rounded reference");
  bool const any_fp8 =
      std::any_of(vlist.begin(), vlist.end(), [](auto const& v) { return v.entry->fp8_output; });

  dev::Stream stream;
  RunLimit limit(max_minutes);
  Progress progress("check finalize", run.mine().size());
  std::map<std::string, VariantTotals> totals;
  std::int64_t failures = 0, measured = 0;
  double per_case_s = 0.05;
  std::size_t left = 0;
  std::unique_ptr<fin::RowPool> pool; // shapes come grouped by H: one pool at a time
  std::map<std::int64_t, bool> noted_unaligned;

  for (std::size_t si = 0; si < shapes.size(); ++si) {
    auto const& shape = shapes[si];
    std::int64_t const hp = shape.hidden + pad;
    bool const aligned = shape.hidden % 8 == 0 && hp % 8 == 0;
    for (std::size_t ci = 0; ci < cases.size(); ++ci) {
      auto const& rc = cases[ci];
      std::size_t const idx = si * cases.size() + ci;
      if (!run.mine(idx))
        continue;
      std::string const base = fin::shape_key(shape) + ",routing=" + rc.name;
      std::vector<NamedVariant const*> todo;
      for (auto const& v : vlist)
        if ((aligned || !needs_128bit(v)) && !table.has("variant=" + v.name + "," + base))
          todo.push_back(&v);
      if (!aligned && !noted_unaligned[shape.hidden]) {
        noted_unaligned[shape.hidden] = true;
        std::cout << "note: H=" << shape.hidden << " hidden_padded=" << hp
                  << " is not a multiple of 8: vecload and small_batch* are not run "
                     "(select picks scalar; forcing them is an InputError)\n";
      }
      if (todo.empty()) {
        run.finished(idx, static_cast<std::int64_t>(vlist.size()), 0.0);
        progress.step(base, /*skipped=*/true);
        continue;
      }
      if (!limit.allows(per_case_s)) {
        left = run.mine_from(idx);
        break;
      }
      double const t0 = limit.elapsed_s();
      if (!pool || pool->hidden() != shape.hidden)
        pool = std::make_unique<fin::RowPool>(
            shape.hidden, hp, Rng::mix(seed, static_cast<std::uint64_t>(shape.hidden * 4099 + hp)));
      auto const host = fin::make_case(shape, hp, rc, fin::case_seed(seed, base), *pool, any_fp8);
      auto const expected = fin::expected_of(host, any_fp8);
      fin::DeviceCase d(host);
      std::string worst_name;
      double worst = -1;
      int passed = 0;
      for (auto const* v : todo) {
        fin::Verdict verdict;
        try {
          if (v->entry->fp8_output) {
            auto const out = fin::run_fp8(d, v->options, stream.get());
            verdict = fin::verify_fp8(out.q, out.scales, expected);
          } else {
            verdict =
                fin::verify_bf16(fin::run_bf16(d, v->options, stream.get()), expected, tolerance);
          }
        } catch (std::exception const& e) {
          // A device fault leaves the context unusable: report what ran and stop.
          throw DeviceError(v->name + " on " + base + ": " + e.what());
        }
        h5::Row row;
        row.set("variant", v->name)
            .set("H", shape.hidden)
            .set("T", shape.tokens)
            .set("K", shape.top_k)
            .set("hidden_padded", hp)
            .set("weights", weight_type_name(shape.weights))
            .set("routing", rc.name)
            .set("dropped", host.dropped)
            .set("max_abs_err", verdict.max_abs_err)
            .set("peak", verdict.peak)
            .set("rel_err", verdict.rel_err)
            .set("ulp_max", verdict.ulp_max)
            .set("unwritten", verdict.unwritten)
            .set("nan", verdict.nan)
            .set("pass", verdict.pass ? 1 : 0)
            .set("tolerance", verdict.tolerance);
        table.append("variant=" + v->name + "," + base, row);
        auto& tot = totals[v->name];
        ++tot.rows;
        tot.rel_err_max = std::max(tot.rel_err_max, verdict.rel_err);
        tot.ulp_max = std::max(tot.ulp_max, verdict.ulp_max);
        if (!verdict.pass) {
          ++tot.failed;
          ++failures;
          std::cout << "FAIL " << v->name << " " << base << " (dropped " << host.dropped
                    << "): " << verdict.detail << "\n";
        } else {
          ++passed;
        }
        if (verdict.rel_err > worst) {
          worst = verdict.rel_err;
          worst_name = v->name;
        }
      }
      ++measured;
      run.finished(idx, static_cast<std::int64_t>(todo.size()), limit.elapsed_s() - t0);
      per_case_s = 0.8 * per_case_s + 0.2 * (limit.elapsed_s() - t0);
      char buf[160];
      std::snprintf(buf, sizeof(buf), ": %d/%zu pass, worst rel_err %.2e (%s)", passed, todo.size(),
                    worst, worst_name.c_str());
      progress.step(base + buf);
    }
    if (left)
      break;
  }
  progress.finish();

  std::printf("\n%-28s %8s %8s %12s %8s\n", "variant", "rows", "failed", "max rel_err", "max ulp");
  for (auto const& v : vlist) {
    auto const& t = totals[v.name];
    std::printf("%-28s %8lld %8lld %12.3e %8lld\n", v.name.c_str(), static_cast<long long>(t.rows),
                static_cast<long long>(t.failed), t.rel_err_max, static_cast<long long>(t.ulp_max));
  }
  std::cout << "wrote " << file.path() << " (" << table.rows() << " rows)\n";
  if (left)
    std::cout << "incomplete: stopped by --max-minutes with about " << left
              << " configurations left; continue with --resume " << run.resume_name(vm, file.path())
              << "\n";
  if (failures) {
    std::cout << "check finalize: FAILED, " << failures << " of the rows above\n";
    return kExitFailure;
  }
  std::cout << "check finalize: " << (left ? "passed so far" : "passed") << " (" << measured
            << " configurations measured in this call)\n";
  return kExitOk;
#endif
}

} // namespace moefin::cmd
