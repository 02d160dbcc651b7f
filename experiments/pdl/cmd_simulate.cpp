// moefin simulate CHAIN.json: random schedules of a chain under the PDL rules
// (core/pdl/simulator.hpp); reports every stale read, premature overwrite and lost write with a
// witness schedule, and optionally writes one schedule as a timeline (HDF5,
// docs/reference/chain-json.md). Exit 0 when no schedule showed a hazard, 1 when one did, 2 on bad
// input.

#include "core/ops/errors.hpp"
#include "core/pdl/chain.hpp"
#include "core/pdl/simulator.hpp"
#include "experiments/commands.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

namespace moefin::cmd {

namespace {

constexpr std::int64_t kMaxSchedules = 100000000;
constexpr std::int64_t kMinAutoSchedules = 1000;

std::int64_t parse_schedules(std::string const& s) {
  if (s == "auto")
    return 0;
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (std::exception const&) {
    used = 0;
  }
  if (used != s.size() || s.empty())
    throw InputError("--schedules: '" + s + "' is not an integer or 'auto'");
  cli::check_range<std::int64_t>("--schedules", v, 1, kMaxSchedules);
  return v;
}

void print_bound(pdl::WitnessBound const& b) {
  std::cout << "witness bound: " << b.pivots << " pivots; ";
  if (b.q >= 1.0) {
    std::cout << "every kernel has one path, so every race the verifier reports is witnessed "
                 "within "
              << b.schedules << " schedules\n";
  } else if (b.saturated) {
    std::printf("path draws succeed with probability >= %.3g, so the bound 2 x %lld x R with R = "
                "ceil(ln %.3g / ln(1 - q)) is more than %.3g schedules\n",
                b.q, static_cast<long long>(b.pivots), b.miss,
                static_cast<double>(pdl::kSaturated));
    std::fflush(stdout);
  } else {
    std::printf("path draws succeed with probability >= %.3g, so every race the verifier reports "
                "is witnessed within 2 x %lld x %lld = %lld schedules with probability >= 1 - "
                "%.3g\n",
                b.q, static_cast<long long>(b.pivots), static_cast<long long>(b.rounds),
                static_cast<long long>(b.schedules), b.miss);
    std::fflush(stdout);
  }
}

/// The --timeline file, checked before the run: a name, not there yet, whose nearest existing
/// folder can be written (the missing ones are made when the file is written). InputError,
/// exit 2: exit 1 means a hazard.
void check_timeline_path(std::string const& out) {
  namespace fs = std::filesystem;
  if (out.empty())
    throw InputError("--timeline: empty file name");
  std::error_code ec;
  if (fs::exists(out, ec))
    throw InputError("--timeline: " + out + " exists; refusing to overwrite it");
  fs::path dir = fs::absolute(fs::path(out), ec).parent_path();
  while (!dir.empty() && !fs::exists(dir, ec) && dir != dir.root_path())
    dir = dir.parent_path();
  if (!fs::is_directory(dir, ec) || ::access(dir.c_str(), W_OK) != 0)
    throw InputError("--timeline: cannot write " + out + " (" + dir.string() +
                     " is not a writable folder)");
}

} // namespace

int simulate(cli::Args const& args) {
  cli::po::options_description desc("simulate options");
  desc.add_options()("chain", cli::po::value<std::string>()->required(),
                     "chain description (JSON, format in docs/reference/chain-json.md)")(
      "schedules", cli::po::value<std::string>()->default_value("auto"),
      "schedules to simulate, 1..1e8, or 'auto' (the witness bound, at least 1000)")(
      "seed", cli::po::value<std::uint64_t>()->default_value(2026), "seed of the schedules")(
      "miss", cli::po::value<double>()->default_value(1e-6, "1e-6"),
      "with --schedules auto: allowed probability of missing a race, (0, 0.5]")(
      "witnesses", cli::po::value<int>()->default_value(5),
      "hazards whose witness schedule is printed in full, 0..1000")(
      "timeline", cli::po::value<std::string>(),
      "write one schedule as a timeline into this new HDF5 file (group /timeline)")(
      "timeline-schedule", cli::po::value<std::int64_t>()->default_value(-1),
      "the schedule to write (default: the first witness, else schedule 0)");
  cli::po::positional_options_description pos;
  pos.add("chain", 1);
  cli::po::variables_map vm;
  if (!cli::parse("simulate",
                  "CHAIN.json [--schedules N|auto] [--seed S] [--witnesses M] [--timeline FILE]",
                  desc, args, vm, &pos))
    return kExitOk;
  std::string const path = vm["chain"].as<std::string>();
  pdl::SimOptions o;
  o.schedules = parse_schedules(vm["schedules"].as<std::string>());
  o.seed = vm["seed"].as<std::uint64_t>();
  o.miss = vm["miss"].as<double>();
  if (!(o.miss > 0.0 && o.miss <= 0.5))
    throw InputError("--miss: value " + cli::to_text(o.miss) + " out of range (0, 0.5]");
  int const witnesses = vm["witnesses"].as<int>();
  cli::check_range("--witnesses", witnesses, 0, 1000);
  std::int64_t const tl_schedule = vm["timeline-schedule"].as<std::int64_t>();
  if (tl_schedule < -1)
    throw InputError("--timeline-schedule: value " + std::to_string(tl_schedule) +
                     " out of range [0, schedules - 1] (or -1: the first witness)");
  if (vm.count("timeline"))
    check_timeline_path(vm["timeline"].as<std::string>());

  pdl::Chain const c = pdl::load_chain(path); // a malformed file is an InputError: exit 2
  if (o.schedules == 0) {
    std::int64_t const bound = pdl::witness_bound(c, o.miss).schedules;
    if (bound > kMaxSchedules)
      throw InputError("--schedules auto: the witness bound of " + path + " exceeds " +
                       std::to_string(kMaxSchedules) + " schedules; give --schedules N");
    // Free schedules are cheap and explore timings the pivot schedules do not.
    o.schedules = std::max<std::int64_t>(bound, kMinAutoSchedules);
  }
  if (vm.count("timeline") && tl_schedule >= 0) // before the run, not after it
    cli::check_range<std::int64_t>("--timeline-schedule", tl_schedule, 0, o.schedules - 1);
  auto const t0 = std::chrono::steady_clock::now();
  o.progress = [t0](std::int64_t done, std::int64_t total) {
    if (total < 200000)
      return;
    double const el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "[simulate %lld/%lld %.0fs]\n", static_cast<long long>(done),
                 static_cast<long long>(total), el);
  };
  pdl::SimReport const rep = pdl::simulate(c, o);
  double const secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::cout << c.name << " (" << path << "): " << c.kernels.size() << " kernels, " << c.iterations
            << (c.iterations == 1 ? " iteration" : " iterations") << "\n";
  print_bound(rep.bound);
  std::printf("simulated %lld schedules (seed %llu) in %.2f s; %lld showed a hazard\n",
              static_cast<long long>(rep.schedules), static_cast<unsigned long long>(o.seed), secs,
              static_cast<long long>(rep.stale_schedules));
  std::fflush(stdout);

  pdl::Simulator const sim(c);
  pdl::Schedule s;
  int printed = 0;
  for (pdl::HazardStat const& h : rep.hazards) {
    std::cout << "  " << pdl::hazard_name(h.hazard) << " " << c.buffers[h.key.buffer] << " in "
              << h.schedules << " of " << rep.schedules << " schedules (first: schedule "
              << h.first_schedule << ")\n    " << pdl::hazard_text(c, h.first) << "\n";
    if (printed++ < witnesses) {
      sim.run(o.seed, h.first_schedule, &s);
      pdl::print_witness(std::cout, c, s, h.first);
    }
  }
  if (rep.hazards.empty())
    std::cout << "no stale read, premature overwrite or lost write in any schedule\n";
  else if (printed > witnesses)
    std::cout << "(" << printed - witnesses
              << " more witness schedules not printed; see --witnesses)\n";

  if (vm.count("timeline")) {
    std::int64_t const which = tl_schedule >= 0      ? tl_schedule
                               : rep.hazards.empty() ? 0
                                                     : rep.hazards[0].first_schedule;
    cli::check_range<std::int64_t>("--timeline-schedule", which, 0, rep.schedules - 1);
    sim.run(o.seed, which, &s);
    std::string const out = vm["timeline"].as<std::string>();
    // Exit 1 means a hazard here, so an output that cannot be written is bad input (exit 2).
    try {
      pdl::write_timeline(out, "/timeline", c, s, o.seed);
    } catch (std::exception const& e) {
      throw InputError("--timeline: " + std::string(e.what()));
    }
    std::cout << "wrote schedule " << which << " as a timeline to " << out << " (/timeline)\n";
  }
  return rep.hazards.empty() ? kExitOk : kExitFailure;
}

} // namespace moefin::cmd
