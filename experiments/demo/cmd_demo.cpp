// moefin demo: the main job. Runs everything this machine can run, end to end, and says where
// the results went. Without a GPU that is the host side (build information, the result store and
// statistics on a host measurement) and the report of whatever data/ holds; later parts add their
// own steps here.

#include "core/device_info.hpp"
#include "core/store/h5store.hpp"
#include "core/pdl/chain.hpp"
#include "core/pdl/verifier.hpp"
#include "core/stats.hpp"
#include "experiments/commands.hpp"
#include "experiments/finalize/reference_run.hpp"
#include "experiments/report/finalize_tables.hpp"
#include "experiments/report/report_runner.hpp"
#include "experiments/routing/routing_file.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#ifdef MOEFIN_HAVE_CUDA
#include "kernels/common/smoke.hpp"
#endif

namespace moefin::cmd {

namespace {

void banner(std::string const& what) {
  std::cout << "\n== " << what << "\n" << std::flush;
}

/// Host copy bandwidth, memcpy against an element loop, interleaved rounds: a small real
/// measurement that exercises the store and the statistics end to end.
void host_copy_experiment(std::string const& path, std::uint64_t seed, int rounds) {
  auto file = h5::ResultWriter::create(path, h5::collect_provenance(seed), /*overwrite=*/true);
  auto table = file.table("host_copy",
                          {h5::int_col("bytes"), h5::str_col("method", 16),
                           h5::real_col("median_us"), h5::real_col("min_us"), h5::real_col("gbps")},
                          "host copy time per call, interleaved rounds");
  for (std::size_t bytes : {std::size_t(1) << 20, std::size_t(16) << 20}) {
    std::vector<std::uint32_t> src(bytes / 4), dst(bytes / 4);
    for (std::size_t i = 0; i < src.size(); ++i)
      src[i] = static_cast<std::uint32_t>(i * 2654435761u + seed);
    std::vector<double> t_memcpy, t_loop;
    for (int r = 0; r < rounds; ++r) {
      for (int m = 0; m < 2; ++m) {
        auto const t0 = std::chrono::steady_clock::now();
        if (m == 0)
          std::memcpy(dst.data(), src.data(), bytes);
        else
          for (std::size_t i = 0; i < src.size(); ++i)
            dst[i] = src[i];
        auto const t1 = std::chrono::steady_clock::now();
        if (dst[src.size() / 2] != src[src.size() / 2])
          throw std::runtime_error("host copy produced a wrong element");
        (m == 0 ? t_memcpy : t_loop)
            .push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    }
    for (int m = 0; m < 2; ++m) {
      auto const& t = m == 0 ? t_memcpy : t_loop;
      auto const s = stats::summarize(t);
      std::string const method = m == 0 ? "memcpy" : "loop";
      h5::Row row;
      row.set("bytes", static_cast<std::int64_t>(bytes))
          .set("method", method)
          .set("median_us", s.median)
          .set("min_us", s.min)
          .set("gbps", 2.0 * static_cast<double>(bytes) / (s.median * 1e3));
      table.append("bytes=" + std::to_string(bytes) + ",method=" + method, row, t);
    }
    auto const ratio = stats::paired_ratio(t_loop, t_memcpy);
    std::printf("  %5zu MiB: memcpy %.1f us, loop/memcpy %.2fx [%.2f, %.2f] (%zu rounds)\n",
                bytes >> 20, stats::median(t_memcpy), ratio.ratio, ratio.lo, ratio.hi, ratio.n);
  }
}

/// A routing with a quarter of the experts dropped, and the reference finalize over it.
void reference_finalize_step(std::string const& path, std::uint64_t seed) {
  RoutingSpec spec = routing_spec(8, 64, 8, Distribution::kUniform, seed);
  spec.drop_fraction = 0.25;
  Routing routing = generate_routing(spec);
  RoutingLayout layout = build_layout(routing, spec, 128);
  std::cout << "  routing T=8 E=64 K=8 uniform: " << describe_layout(routing, layout) << "\n";
  auto const run =
      run_reference_finalize(std::move(routing), std::move(layout), 2048, 2048,
                             finalize::WeightType::kBf16, false, finalize_input_seed(seed));
  auto file = create_result_file(path, seed, /*overwrite=*/true);
  write_routing(file, "route", spec, run.routing, run.layout);
  write_finalize(file, "finalize", run);
  std::cout << "  " << summary_line(run) << "\n  wrote " << path << "\n";
}

/// The shipped PDL chain descriptions: data/chains under the working directory, else next to the
/// build directory that holds this binary.
std::filesystem::path chains_dir() {
  namespace fs = std::filesystem;
  if (fs::is_directory("data/chains"))
    return "data/chains";
  std::error_code ec;
  fs::path const exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path().parent_path() / "data" / "chains";
}

/// `moefin verify` on every shipped chain, one line each; false when a verdict differs from the
/// one the file expects.
bool verify_shipped_chains() {
  namespace fs = std::filesystem;
  fs::path const dir = chains_dir();
  if (dir.empty() || !fs::is_directory(dir)) {
    std::cout << "  no data/chains directory found (run from the repository root)\n";
    return true;
  }
  std::vector<fs::path> files;
  for (auto const& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json")
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  int mismatches = 0;
  for (fs::path const& f : files) {
    pdl::Chain const c = pdl::load_chain(f.string());
    pdl::Report const r = pdl::verify(c, {false});
    bool const ok = !c.expected || *c.expected == r.verdict();
    mismatches += !ok;
    std::printf("  %-48s %-7s (%zu of %zu pairs race)%s\n", f.filename().string().c_str(),
                r.verdict() == pdl::Verdict::kRace ? "RACE" : "ordered", r.races(), r.pairs.size(),
                ok ? "" : "  MISMATCH with the expected verdict");
  }
  std::printf("  %zu chains verified in %s; %d differ from their expected verdict (details: "
              "moefin verify FILE)\n",
              files.size(), dir.string().c_str(), mismatches);
  return mismatches == 0;
}

/// Finalize: with a GPU a short check and a small sweep; without one, the tables of the committed
/// H200 results (data/h200/), or a line saying there are none.
int finalize_step(std::string const& dir, bool gpu) {
  if (gpu) {
    banner("finalize: every variant against the reference (a short check)");
    std::string const check = dir + "/finalize_check.h5";
    std::filesystem::remove(check);
    int rc =
        check_finalize({"--hidden", "1024,7168", "--tokens", "1,8", "--top-k", "8,32", "--weights",
                        "bf16", "--routings", "uniform,uniform/ep2", "--out", check});
    if (rc != kExitOk)
      return rc;
    banner("finalize: a small sweep (H 4096, T 1 and 8, top-K 8 and 32, modes a, b, c)");
    std::string const sweep = dir + "/finalize_sweep.h5";
    std::filesystem::remove(sweep);
    return sweep_finalize({"--hidden", "4096", "--tokens", "1,8", "--top-k", "8,32", "--weights",
                           "bf16", "--rounds", "3", "--launches", "50", "--repeat-shapes", "0",
                           "--out", sweep});
  }
  banner("finalize: tables of the committed H200 results");
  std::vector<std::string> files;
  for (std::string const root :
       {std::string(MOEFIN_SOURCE_DIR) + "/data/h200", std::string("data/h200")}) {
    std::error_code ec;
    if (!files.empty() || !std::filesystem::is_directory(root, ec))
      continue;
    for (auto const& e : std::filesystem::directory_iterator(root, ec))
      if (e.path().extension() == ".h5" &&
          h5::ResultReader(e.path().string()).has_group("finalize_sweep"))
        files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::cout << "  no committed finalize results under data/h200/ (run scripts/gpu/finalize.sh "
                 "on a GPU machine)\n";
    return kExitOk;
  }
  for (auto const& f : files)
    std::cout << "  " << f << "\n";
  std::cout << fin::render_finalize_tables(files, fin::default_published_csv());
  return kExitOk;
}

} // namespace

int demo(cli::Args const& args) {
  cli::po::options_description desc("demo options");
  desc.add_options()("out-dir", cli::po::value<std::string>()->default_value("out/demo"),
                     "directory for the demo's result files")(
      "seed", cli::po::value<std::uint64_t>()->default_value(2026),
      "seed of every random input")("rounds", cli::po::value<int>()->default_value(7),
                                    "interleaved rounds of each timing, 3..1000")(
      "report-dir", cli::po::value<std::string>()->default_value(""),
      "directory of the report rendered from data/ (default: 'report' beside --out-dir)");
  cli::po::variables_map vm;
  if (!cli::parse("demo", "[--out-dir DIR] [--rounds N] [--seed S] [--report-dir DIR]", desc, args,
                  vm))
    return kExitOk;
  std::string const dir = vm["out-dir"].as<std::string>();
  std::uint64_t const seed = vm["seed"].as<std::uint64_t>();
  int const rounds = vm["rounds"].as<int>();
  cli::check_range("--rounds", rounds, 3, 1000);
  std::filesystem::create_directories(dir);

  banner("moefin info");
  int rc = info({});
  if (rc != kExitOk)
    return rc;

  DeviceInfo const d = query_device();
#ifdef MOEFIN_HAVE_CUDA
  if (d.present) {
    banner("device round trip");
    std::string detail;
    bool const ok = run_device_smoke(&detail);
    std::cout << "  " << (ok ? "ok: " : "FAILED: ") << detail << "\n";
    if (!ok)
      return kExitFailure;
    banner("layer chain: PDL on/off equivalence over randomized routings (short)");
    std::string const eq = dir + "/equivalence.h5";
    std::filesystem::remove(eq);
    rc = equivalence({"--shapes", "top-8", "--tokens", "1,4", "--presets", "seed-after,safe",
                      "--routings", "200", "--batch", "100", "--seed", std::to_string(seed),
                      "--out", eq});
    if (rc != kExitOk)
      return rc;
  }
#endif
  if (!d.present)
    std::cout << "\n(no GPU here: running the host parts only)\n";

  banner("host measurement through the result store");
  std::string const path = dir + "/host_copy.h5";
  host_copy_experiment(path, seed, rounds);
  h5::ResultReader reader(path);
  auto const t = reader.read_table("host_copy");
  std::cout << "  wrote " << path << ": " << t.rows << " rows, " << t.samples.size()
            << " raw samples, commit " << reader.provenance().at("git_commit") << "\n";

  banner("routing and the reference finalize");
  reference_finalize_step(dir + "/reference_finalize.h5", seed);
  banner("PDL chains: happens-before verdicts of every shipped scenario");
  if (!verify_shipped_chains())
    return kExitFailure;
  banner("report from data/ (python -m analysis report)");
  std::string report_dir = vm["report-dir"].as<std::string>();
  if (report_dir.empty()) {
    auto out = std::filesystem::path(dir).lexically_normal();
    if (!out.has_filename()) // "out/demo/"
      out = out.parent_path();
    report_dir = (out.parent_path() / "report").string();
  }
  bool have_report = false;
  try {
    report::require_python(report::python_path());
    have_report = true;
  } catch (FileError const& e) {
    std::cout << "  skipped: " << e.what() << "\n";
  }
  if (have_report) {
    rc = report::run({report::data_dir(), "--out", report_dir}, /*replace_process=*/false);
    if (rc != kExitOk)
      return rc;
  }
  rc = finalize_step(dir, d.present);
  if (rc != kExitOk)
    return rc;

  banner("done");
  std::cout << "results are in " << dir << "/\n";
  if (have_report)
    std::cout << "report: " << report_dir << "/report.md (figures and LaTeX tables beside it)\n";
  return kExitOk;
}

} // namespace moefin::cmd
