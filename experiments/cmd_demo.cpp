// moefin demo: the main job. Runs everything this machine can run, end to end, and says where
// the results went. Without a GPU that is the host side (build information, the result store and
// statistics on a host measurement); later parts add their own steps here.

#include "core/device_info.hpp"
#include "core/h5store.hpp"
#include "core/stats.hpp"
#include "experiments/commands.hpp"

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

} // namespace

int demo(cli::Args const& args) {
  cli::po::options_description desc("demo options");
  desc.add_options()("out-dir", cli::po::value<std::string>()->default_value("out/demo"),
                     "directory for the demo's result files")(
      "seed", cli::po::value<std::uint64_t>()->default_value(2026),
      "seed of every random input")("rounds", cli::po::value<int>()->default_value(7),
                                    "interleaved rounds of each timing, 3..1000");
  cli::po::variables_map vm;
  if (!cli::parse("demo", "[--out-dir DIR] [--rounds N] [--seed S]", desc, args, vm))
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

  banner("done");
  std::cout << "results are in " << dir << "/\n";
  return kExitOk;
}

} // namespace moefin::cmd
