// moefin pdl-probe: the producer/middle/consumer chains of the H200 table (docs/design/pdl.md) on
// this GPU, as plain stream launches and inside one CUDA graph, with the stale reads each one
// shows.

#include "core/device_info.hpp"
#include "core/store/h5store.hpp"
#include "experiments/commands.hpp"
#include "experiments/harness/bench_state.hpp"

#include <algorithm>

#include <cstdio>

#ifdef MOEFIN_HAVE_CUDA
#include "kernels/common/pdl_probe.hpp"
#endif

namespace moefin::cmd {

int pdl_probe(cli::Args const& args) {
  cli::po::options_description desc("pdl-probe options");
  desc.add_options()("iterations", cli::po::value<int>()->default_value(200),
                     "rounds per chain and launch mode, 2..100000")(
      "delay-ns", cli::po::value<std::int64_t>()->default_value(20000),
      "producer's delay before its write, 0..10^8 ns");
  cli::add_result_options(desc, "pdl-probe");
  cli::po::variables_map vm;
  if (!cli::parse("pdl-probe", "[--iterations N] [--delay-ns D] [--out FILE]", desc, args, vm))
    return kExitOk;
  int const iterations = vm["iterations"].as<int>();
  std::int64_t const delay = vm["delay-ns"].as<std::int64_t>();
  cli::check_range("--iterations", iterations, 2, 100000);
  cli::check_range<std::int64_t>("--delay-ns", delay, 0, 100000000);
#ifndef MOEFIN_HAVE_CUDA
  throw DeviceError("pdl-probe needs a CUDA build and a GPU");
#else
  DeviceInfo const d = query_device();
  if (!d.present)
    throw DeviceError("pdl-probe needs a GPU: no CUDA device (" + d.reason + ")");
  auto file = h5::ResultWriter::open(vm["out"].as<std::string>(), vm["resume"].as<std::string>(),
                                     vm["seed"].as<std::uint64_t>());
  auto const chains = probe::design_chains();
  bench::Benchmark b("pdl_probe",
                     {h5::str_col("chain", 96), h5::str_col("launch", 16), h5::int_col("delay_ns"),
                      h5::int_col("iterations"), h5::int_col("stale_pre_wait"),
                      h5::int_col("stale_post_wait")},
                     "stale reads of a consumer before and after its grid-dependency wait");
  std::vector<std::string> names;
  for (auto const& c : chains)
    names.push_back(c.name);
  b.axis(bench::string_axis("chain", names));
  b.axis(bench::string_axis("launch", {"stream", "graph"}));
  b.key([delay](bench::Config const& r) {
    return r.str("chain") + "," + r.str("launch") + ",d=" + std::to_string(delay);
  });
  std::printf("%-60s %-7s %-14s %s\n", "chain", "launch", "stale pre-wait", "stale post-wait");
  int post_violations = 0;
  auto body = [&](bench::Unit const& u, std::vector<bench::Config> const&, bench::Recorder& rec) {
    auto const& c = *std::find_if(chains.begin(), chains.end(), [&](probe::ProbeChain const& x) {
      return x.name == u.config.str("chain");
    });
    std::string const& launch = u.config.str("launch");
    probe::ProbeResult const r = probe::run_probe(c, launch == "graph", iterations, delay);
    bench::Measurement m;
    m.columns.set("delay_ns", delay)
        .set("iterations", r.iterations)
        .set("stale_pre_wait", r.stale_pre_wait)
        .set("stale_post_wait", r.stale_post_wait);
    rec.add(u.config, std::move(m));
    post_violations += r.stale_post_wait;
    std::printf("%-60s %-7s %6d/%-7d %6d/%d\n", c.name.c_str(), launch.c_str(), r.stale_pre_wait,
                r.iterations, r.stale_post_wait, r.iterations);
  };
  b.run(file, bench::RunOptions{}, body);
  std::printf("wrote %s\n", file.path().c_str());
  // A stale read after the wait would break the one ordering PDL promises.
  return post_violations == 0 ? kExitOk : kExitFailure;
#endif
}

} // namespace moefin::cmd
