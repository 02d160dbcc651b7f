// moefin sweep finalize: the seed's finalize-only timing grid, plus what the seed lacked (PDL
// off, a producer -> finalize chain, cold L2, the ablation of the three ingredients, the launch
// floor and the copy bandwidth), nvbench style: declared axes, one row per combination.
//
// Protocol: per (H, T, K, weights) the inputs are built once (uniform routing, every expert
// local, seeded random values); per mode and L2 state one CUDA graph of N launches is captured
// per variant; a warm-up replay of each, then R rounds in which the variants alternate (the
// starting variant rotates); per-launch time = replay time / N; a row's samples are its R
// per-round values; speedups are paired ratios over the rounds (stats::paired_ratio).

#include "core/cli.hpp"
#include "core/device_info.hpp"
#include "core/finalize_inputs.hpp"
#include "core/store/h5store.hpp"
#include "core/rng.hpp"
#include "core/stats.hpp"
#include "experiments/commands.hpp"
#include "experiments/finalize/cases.hpp"
#include "experiments/finalize/grid.hpp"
#include "experiments/finalize/sweep_estimate.hpp"
#include "experiments/harness/bench_state.hpp"
#include "experiments/harness/progress.hpp"
#include "experiments/harness/run_limit.hpp"
#include "experiments/harness/shard_run.hpp"
#include "experiments/harness/timing_rounds.hpp"
#include "experiments/report/finalize_tables.hpp"

#ifdef MOEFIN_HAVE_CUDA
#include "experiments/finalize/device_case.hpp"
#include "experiments/harness/graph_timing.hpp"
#include "kernels/common/bench_kernels.hpp"
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <set>

namespace moefin::cmd {

namespace {

using fin::NamedVariant;
using fin::Shape;

struct SweepConfig {
  std::vector<std::string> modes, l2s;
  std::vector<NamedVariant> variants; // baselines first (fin::with_baselines)
  int rounds = 5, launches = 100;
#ifdef MOEFIN_HAVE_CUDA
  bench::Producer producer = bench::Producer::kPdlWait; // mode b's producer
#endif
};

/// The cost model's view of the sweep (experiments/finalize/sweep_estimate.hpp).
fin::SweepPlan plan_of(SweepConfig const& c, std::vector<Shape> shapes, int repeat_shapes,
                       std::int64_t l2_bytes) {
  fin::SweepPlan p;
  p.shapes = std::move(shapes);
  p.modes = c.modes;
  p.l2s = c.l2s;
  for (auto const& v : c.variants)
    p.variants.push_back(v.name);
  p.rounds = c.rounds;
  p.launches = c.launches;
  p.repeat_shapes = repeat_shapes;
  if (l2_bytes > 0)
    p.l2_bytes = l2_bytes;
  return p;
}

/// The sweep's configurations: one unit per shape (H, T, K, weights), its rows every mode x L2
/// x variant, keyed "H=..,T=..,K=..,w=..,mode=..,l2=..,variant=.." (as every file so far); each
/// row's ratio against its variant's baseline and, for ablations, against the full kernel.
bench::Benchmark sweep_benchmark(SweepConfig const& c, fin::GridAxes const& grid,
                                 fin::SweepPlan const& plan) {
  bench::Benchmark b("finalize_sweep", fin::finalize_sweep_columns(),
                     "finalize per-launch time (us) over interleaved rounds; speedup_* = paired "
                     "ratio baseline/variant (the baseline of the variant's registry entry: "
                     "scalar for moefin's); ablation_* = paired ratio ablated/full kernel; bytes = "
                     "fewest bytes a launch moves; copy_fraction = gbps / the run's device copy "
                     "bandwidth");
  fin::add_grid_axes(b, grid);
  std::vector<std::string> names;
  for (auto const& v : c.variants)
    names.push_back(v.name);
  b.axis(bench::string_axis("mode", c.modes, bench::Scope::kRow));
  b.axis(bench::string_axis("l2", c.l2s, bench::Scope::kRow));
  b.axis(bench::string_axis("variant", names, bench::Scope::kRow));
  b.skip_if([](bench::Config const& row) -> std::string {
    if (row.str("mode") == "b" && row.str("l2") == "cold")
      return "mode b with cold L2 is not measured: the producer leaves gemm_out in L2";
    Shape const s = fin::shape_of(row);
    // variant_options: a small_batch_v2 geometry candidate runs its registry entry.
    return fin::unsupported_reason(*fin::variant_options(row.str("variant")).variant, s, s.hidden);
  });
  b.cost([plan](bench::Config const& u, std::size_t) {
    return fin::shape_seconds(fin::shape_of(u), plan);
  });
  b.timed();
  b.ratio({"speedup_vs_scalar", "speedup_lo", "speedup_hi", "variant",
           [](bench::Config const& row) {
             return finalize::baseline_of(
                        *fin::variant_options(row.str("variant"), "variant").variant)
                 .name;
           },
           true, 1.0});
  b.ratio({"ablation_ratio", "ablation_lo", "ablation_hi", "variant",
           [](bench::Config const& row) -> std::string {
             // A geometry candidate (/exit, /w) runs an ablation's kernel at its own geometry:
             // no ablation ratio, and no small_batch_v2 row needed beside it.
             auto const o = fin::variant_options(row.str("variant"), "variant");
             return o.v2_chunks != 0 ? std::string() : o.variant->ablation_of;
           },
           false, std::numeric_limits<double>::quiet_NaN()});
  return b;
}

} // namespace

#ifdef MOEFIN_HAVE_CUDA
namespace {

using dev::per_launch_us;
using dev::time_rounds;

/// Mode b: (pair - producer alone) per round, per launch.
std::vector<double> minus(std::vector<double> const& a, std::vector<double> const& b) {
  std::vector<double> d;
  for (std::size_t i = 0; i < a.size(); ++i)
    d.push_back(a[i] - b[i]);
  return d;
}

h5::Row stats_row(std::vector<double> const& us) {
  auto const s = stats::summarize(us);
  h5::Row row;
  row.set("median_us", s.median)
      .set("min_us", s.min)
      .set("q1_us", s.q1)
      .set("q3_us", s.q3)
      .set("max_us", s.max);
  return row;
}

class Runner {
public:
  Runner(SweepConfig const& c, h5::ResultWriter& file, DeviceInfo const& d)
      : c_(c), file_(file), dinfo_(d), seed_(file.seed()),
        budget_device_(finalize::device_cta_budget()) {}

  void measure_copy_bandwidth() {
    auto table = file_.table("copy_bandwidth", fin::copy_bandwidth_columns(),
                             "device-to-device cudaMemcpy, bytes read plus written");
    dev::CopyBandwidth const copy = dev::measure_copy_bandwidth(c_.rounds, s_, e0_, e1_);
    std::size_t const bytes = copy.bytes;
    auto const& us = copy.us;
    double const med = stats::median(us);
    copy_gbps_ = copy.gbps;
    std::string const key = "bytes=" + std::to_string(bytes);
    if (!table.has(key)) {
      h5::Row row;
      row.set("bytes", static_cast<std::int64_t>(bytes))
          .set("gbps", copy_gbps_)
          .set("median_us", med)
          .set("min_us", *std::min_element(us.begin(), us.end()))
          .set("rounds", c_.rounds)
          .set("launches", copy.copies);
      table.append(key, row, us);
    }
    std::printf("copy bandwidth: %.0f GB/s (256 MiB device-to-device, read + write)\n", copy_gbps_);
  }

  void measure_launch_floor() {
    auto table = file_.table("launch_floor", fin::launch_floor_columns(),
                             "per-launch time (us) of an empty kernel launched as finalize is in "
                             "each mode (b: after a 16 MiB producer, producer subtracted)");
    std::size_t const pbytes = std::size_t(16) << 20;
    dev::Buffer psrc(pbytes), pdst(pbytes);
    psrc.fill(0x3c, s_.get());
    s_.sync();
    int const n = c_.launches;
    for (auto const& m : c_.modes) {
      std::string const key = "mode=" + m;
      std::vector<dev::Graph> g;
      bool const b = m == "b";
      g.emplace_back(s_.get(), [&] {
        for (int i = 0; i < n; ++i) {
          if (b)
            bench::launch_copy_producer(pdst.get(), psrc.get(), pbytes, producer_ctas_, s_.get(),
                                        c_.producer);
          bench::launch_empty(s_.get(), m != "c");
        }
      });
      if (b)
        g.emplace_back(s_.get(), [&] {
          for (int i = 0; i < n; ++i)
            bench::launch_copy_producer(pdst.get(), psrc.get(), pbytes, producer_ctas_, s_.get(),
                                        c_.producer);
        });
      auto const ms = time_rounds(g, c_.rounds, s_, e0_, e1_);
      auto const us = per_launch_us(b ? minus(ms[0], ms[1]) : ms[0], n);
      std::printf("launch floor, mode %s: %.2f us per launch\n", m.c_str(), stats::median(us));
      if (table.has(key))
        continue;
      h5::Row row = stats_row(us);
      row.set("mode", m).set("rounds", c_.rounds).set("launches", n);
      table.append(key, row, us);
    }
  }

  /// The body of the sweep's benchmark state: one shape, every (mode, L2) its missing rows
  /// name, every variant of that mode timed in the same rounds (the rows already in the file
  /// too: they are the ratios' partners).
  void measure(bench::Unit const& u, std::vector<bench::Config> const& todo, bench::Recorder& rec) {
    Shape const s = fin::shape_of(u.config);
    if (!pool_ || pool_->hidden() != s.hidden)
      pool_ = std::make_unique<fin::RowPool>(
          s.hidden, s.hidden, Rng::mix(seed_, static_cast<std::uint64_t>(s.hidden * 4099)));
    fin::RoutingCase const uniform{"uniform", Distribution::kUniform, 1};
    auto const host = fin::make_case(s, s.hidden, uniform, fin::case_seed(seed_, fin::shape_key(s)),
                                     *pool_, false);
    fin::DeviceCase d(host);
    dev::Buffer const pristine = dev::Buffer::copy_of(d.gemm_out);
    std::vector<dev::Buffer> outs;
    for (std::size_t v = 0; v < c_.variants.size(); ++v)
      outs.emplace_back(d.out.bytes());
    std::string summary;
    for (auto const& mode : c_.modes)
      for (auto const& l2 : c_.l2s)
        if (std::any_of(todo.begin(), todo.end(), [&](bench::Config const& r) {
              return r.str("mode") == mode && r.str("l2") == l2;
            }))
          summary += (summary.empty() ? "" : " ") +
                     measure_mode(s, host, d, pristine, outs, mode, l2, u.config, rec);
    rec.summary(summary);
  }

  std::int64_t failures() const { return failures_; }

private:
  void note_once(std::string const& what) {
    if (notes_.insert(what).second)
      std::cout << "note: " << what << "\n";
  }

  /// Rotating copies of the inputs, so that each launch reads buffers not touched for more than
  /// twice the L2 size of traffic.
  struct ColdSets {
    std::vector<dev::Buffer> gemm, perm, weights, out;
    std::vector<finalize::FinalizeParams> params;
  };

  bool make_cold(fin::DeviceCase const& d, int& launches, ColdSets& cs) {
    std::size_t const set_bytes =
        d.gemm_out.bytes() + d.perm.bytes() + d.weights.bytes() + d.out.bytes();
    auto const l2 = static_cast<std::size_t>(std::max<std::int64_t>(dinfo_.l2_bytes, 1 << 20));
    std::size_t const sets = (2 * l2 + set_bytes - 1) / set_bytes;
    constexpr std::size_t kMaxColdLaunches = 4096;
    if (sets > kMaxColdLaunches)
      return false;
    launches = static_cast<int>(std::max<std::size_t>(c_.launches, sets));
    for (std::size_t i = 0; i < sets; ++i) {
      cs.gemm.push_back(dev::Buffer::copy_of(d.gemm_out));
      cs.perm.push_back(dev::Buffer::copy_of(d.perm));
      cs.weights.push_back(dev::Buffer::copy_of(d.weights));
      cs.out.emplace_back(d.out.bytes());
      finalize::FinalizeParams p = d.params;
      p.gemm_out = cs.gemm.back().get();
      p.expanded_to_permuted = cs.perm.back().get<std::int32_t const>();
      p.expert_weights = cs.weights.back().get();
      p.out = cs.out.back().get();
      cs.params.push_back(p);
    }
    return true;
  }

  std::string measure_mode(Shape const& s, fin::HostCase const& host, fin::DeviceCase& d,
                           dev::Buffer const& pristine, std::vector<dev::Buffer>& outs,
                           std::string const& mode, std::string const& l2,
                           bench::Config const& unit, bench::Recorder& rec) {
    auto row_of = [&](std::size_t v) {
      return bench::Config(unit)
          .set("mode", mode)
          .set("l2", l2)
          .set("variant", c_.variants[v].name);
    };
    bool const b = mode == "b";
    bool const cold = l2 == "cold";
    int launches = c_.launches;
    ColdSets cs;
    if (cold && !make_cold(d, launches, cs)) {
      for (std::size_t v = 0; v < c_.variants.size(); ++v)
        rec.skip(row_of(v), "cold L2 needs inputs large enough to rotate through twice the L2 in "
                            "4096 launches");
      return mode + "/cold: skipped";
    }
    std::vector<finalize::FinalizeParams> hot_params;
    for (auto& o : outs) {
      o.fill(0xff, s_.get());
      finalize::FinalizeParams p = d.params;
      p.out = o.get();
      hot_params.push_back(p);
    }
    // Variants that cannot run this shape (e.g. 128-bit paths on an unaligned row) are left out
    // with the reason; scalar runs every shape.
    std::vector<std::size_t> active;
    for (std::size_t v = 0; v < c_.variants.size(); ++v) {
      try {
        (void)finalize::plan(d.params, c_.variants[v].options);
        active.push_back(v);
      } catch (InputError const& e) {
        rec.skip(row_of(v), e.what());
      }
    }
    std::size_t const producer_bytes = d.gemm_out.bytes() / 16 * 16;
    std::vector<dev::Graph> graphs;
    for (std::size_t v : active) {
      finalize::Options o = c_.variants[v].options;
      o.pdl.pdl = mode != "c";
      graphs.emplace_back(s_.get(), [&] {
        for (int i = 0; i < launches; ++i) {
          if (b)
            bench::launch_copy_producer(d.gemm_out.get(), pristine.get(), producer_bytes,
                                        producer_ctas_, s_.get(), c_.producer);
          finalize::run(cold ? cs.params[static_cast<std::size_t>(i) % cs.params.size()]
                             : hot_params[v],
                        o, s_.get());
        }
      });
    }
    if (b)
      graphs.emplace_back(s_.get(), [&] {
        for (int i = 0; i < launches; ++i)
          bench::launch_copy_producer(d.gemm_out.get(), pristine.get(), producer_bytes,
                                      producer_ctas_, s_.get(), c_.producer);
      });
    auto const ms = time_rounds(graphs, c_.rounds, s_, e0_, e1_);
    std::vector<std::vector<double>> us(c_.variants.size());
    for (std::size_t a = 0; a < active.size(); ++a)
      us[active[a]] = per_launch_us(b ? minus(ms[a], ms.back()) : ms[a], launches);

    // Every timed output must be complete: a kernel that skips elements is not timed.
    std::vector<bool> broken(c_.variants.size(), false);
    if (!cold)
      for (std::size_t v : active) {
        auto const bits = outs[v].download<std::uint16_t>(s_.get());
        auto const bad = std::count_if(bits.begin(), bits.end(),
                                       [](std::uint16_t x) { return (x & 0x7fff) > 0x7f80; });
        if (bad) {
          broken[v] = true;
          ++failures_;
          std::cout << "FAIL " << c_.variants[v].name << " " << fin::shape_key(s) << " mode "
                    << mode << ": " << bad << " output elements NaN or unwritten after timing; "
                    << "row not written (run moefin check finalize)\n";
        }
      }

    std::string const dispatch = fin::dispatch_name(s, finalize::kPublishedCtaBudget);
    std::string const dispatch_dev = fin::dispatch_name(s, budget_device_);
    std::int64_t const bytes = host.min_bytes();
    std::string line = mode + (cold ? "/cold" : "");
    for (std::size_t v = 0; v < c_.variants.size(); ++v) {
      auto const& nv = c_.variants[v];
      if (us[v].empty() || broken[v])
        continue;
      double const med = stats::median(us[v]);
      double const gbps = static_cast<double>(bytes) / (med * 1e3);
      bench::Measurement m;
      m.samples = us[v];
      m.columns.set("dispatch", dispatch)
          .set("dispatch_device", dispatch_dev)
          .set("in_regime", fin::in_regime(s.hidden, s.tokens) ? 1 : 0)
          .set("rounds", c_.rounds)
          .set("launches", launches)
          .set("bytes", bytes)
          .set("gbps", gbps)
          .set("copy_fraction", copy_gbps_ > 0 ? gbps / copy_gbps_ : 0.0)
          .set("ctas", finalize::plan(d.params, nv.options).ctas());
      rec.add(row_of(v), std::move(m));
      if (nv.name == "scalar" || nv.name == "small_batch") {
        char buf[64];
        std::snprintf(buf, sizeof(buf), " %s %.2fus", nv.name == "scalar" ? "sc" : "sb", med);
        line += buf;
      }
    }
    return line;
  }

  SweepConfig const& c_;
  h5::ResultWriter& file_;
  DeviceInfo const dinfo_;
  std::uint64_t const seed_;
  int const budget_device_;
  int const producer_ctas_ = budget_device_; // SMs x 8 CTAs of 256 threads: a full GPU
  dev::Stream s_;
  dev::Event e0_, e1_;
  double copy_gbps_ = 0;
  std::unique_ptr<fin::RowPool> pool_;
  std::set<std::string> notes_;
  std::int64_t failures_ = 0;
};

} // namespace
#endif

int sweep_finalize(cli::Args const& args) {
  cli::po::options_description desc(std::string("sweep finalize options\n") + fin::kEstimateHelp +
                                    "\n\noptions");
  fin::GridFlags g;
  std::string modes, l2, variants, published, producer;
  std::vector<std::string> print_files;
  double max_minutes = 0;
  int rounds = 5, launches = 100, repeat_shapes = 8;
  fin::add_grid_options(desc, g);
  desc.add_options()(
      "modes", cli::po::value(&modes)->default_value("a,b,c"),
      "a: back-to-back, PDL on; b: producer then finalize, PDL on; c: back-to-back, PDL off")(
      "producer", cli::po::value(&producer)->default_value("pdl-wait"),
      "mode b's producer: pdl-wait (launched with the PDL attribute, waits at entry, as GEMM2: "
      "docs/design/experiments.md) or plain (no attribute, no wait: the protocol of files before "
      "2026-12-04, whose mode b rows the tables call b0); recorded as mode_b_producer")(
      "l2", cli::po::value(&l2)->default_value("hot"), "L2 state: hot, cold (or hot,cold)")(
      "variants", cli::po::value(&variants)->default_value(fin::join(fin::sweep_variant_names())),
      "finalize variants timed in the same rounds (each one's baseline, e.g. scalar, is added); "
      "small_batch_v2/candidates[/exit|/w] stands for every small_batch_v2 geometry candidate of "
      "the grid's top-K values (entry or exit trigger, or /w: the warp-groups lane layout), the "
      "policy measurement")("rounds", cli::po::value(&rounds)->default_value(5),
                            "interleaved rounds, 3..1000")(
      "launches", cli::po::value(&launches)->default_value(100),
      "launches per CUDA graph, 1..10000")(
      "max-minutes", cli::po::value(&max_minutes)->default_value(0),
      "stop cleanly before this many minutes (0: no limit); continue with --resume")(
      "repeat-shapes", cli::po::value(&repeat_shapes)->default_value(8),
      "after a complete grid, measure this many shapes again into /finalize_repeat (noise), 0..64")(
      "estimate", "print the rows and the expected time (model above), then exit (no GPU "
                  "needed); warns when the selection measures nothing")(
      "list", "print the configurations (index, estimated seconds, row keys, skipped rows with "
              "their reason) and exit; no GPU needed")(
      "print", cli::po::value(&print_files)->multitoken(),
      "print the seed-format tables of these result files and exit (no GPU needed)")(
      "published", cli::po::value(&published)->default_value(fin::default_published_csv()),
      "published speedups (CSV) shown beside the measured columns");
  harness::add_shard_option(desc);
  cli::add_result_options(desc, "sweep finalize");
  cli::po::variables_map vm;
  if (!cli::parse("sweep finalize",
                  "[--hidden LIST] [--tokens LIST|regime] [--top-k LIST] [--weights LIST] "
                  "[--modes a,b,c] [--l2 hot,cold] [--rounds R] [--launches N] [--max-minutes M] "
                  "[--shard I/N|env] [--out FILE | --resume FILE] | --print FILE... | --estimate | "
                  "--list",
                  desc, args, vm))
    return kExitOk;

  if (!print_files.empty()) {
    if (vm.count("estimate") || vm.count("list"))
      throw UsageError("sweep finalize: --print FILE... prints result files; --estimate and "
                       "--list plan a run: give one of them");
    std::cout << fin::render_finalize_tables(print_files, published);
    return kExitOk;
  }
  cli::check_range("--rounds", rounds, 3, 1000);
  cli::check_range("--launches", launches, 1, 10000);
  cli::check_range("--max-minutes", max_minutes, 0.0, 1e6);
  cli::check_range("--repeat-shapes", repeat_shapes, 0, 64);
  SweepConfig c;
  fin::check_grid_options(vm);
  fin::GridAxes const grid = fin::parse_grid_axes(g);
  c.modes = fin::parse_choices("--modes", modes, {"a", "b", "c"});
  c.l2s = fin::parse_choices("--l2", l2, {"hot", "cold"});
  c.variants = fin::with_baselines(fin::parse_variants(
      "--variants", fin::expand_v2_candidates(variants, fin::parse_grid(g)), true));
  c.rounds = rounds;
  c.launches = launches;
  cli::check_choice("--producer", producer, {"pdl-wait", "plain"});
#ifdef MOEFIN_HAVE_CUDA
  c.producer = producer == "plain" ? bench::Producer::kPlain : bench::Producer::kPdlWait;
#endif
  // The estimate assumes this machine's GPU (its L2 decides which cold shapes are measured);
  // the same model gives each shape's cost in the benchmark state.
  DeviceInfo const here = query_device();
  fin::SweepPlan const plan =
      plan_of(c, fin::parse_grid(g), repeat_shapes, here.present ? here.l2_bytes : 0);
  bench::Benchmark const bench = sweep_benchmark(c, grid, plan);
  std::vector<bench::Unit> const units = bench.enumerate();
  bool const list = vm.count("list") != 0;
  fin::SweepEstimate const estimate = fin::estimate_sweep(plan);
  if (!list)
    std::cout << fin::estimate_text(plan, estimate);
  if (estimate.empty() && !list) {
    std::string const why = "--modes " + modes + " --l2 " + l2 +
                            " selects nothing to measure (every cell is skipped: see the notes); "
                            "add --l2 hot or another mode";
    if (vm.count("estimate")) {
      std::cerr << "moefin: warning: " << why << "\n";
      return kExitOk;
    }
    throw InputError(why);
  }
  // One configuration of the shard partition per unit of the benchmark state (a shape: its
  // modes, L2 states and variants run together in interleaved rounds, so they stay in one
  // file), in the units' stable order, priced by their cost estimates (fin::shape_seconds).
  std::vector<harness::PlannedConfig> planned;
  for (auto const& u : units)
    planned.push_back({u.label, u.cost_s});
  std::string settings = "modes=" + modes + ";l2=" + l2 + ";variants=";
  for (auto const& v : c.variants)
    settings += v.name + " ";
  if (std::find(c.modes.begin(), c.modes.end(), "b") != c.modes.end())
    settings += ";producer=" + producer; // files of two protocols never merge
  settings += ";rounds=" + std::to_string(rounds) + ";launches=" + std::to_string(launches) +
              ";repeat_shapes=" + std::to_string(repeat_shapes);
  harness::ShardedRun run("sweep finalize", vm, std::move(planned), settings);
  if (run.active())
    std::cout << run.summary() << "\n";
  if (list) {
    bench.list(std::cout, run.listed());
    return kExitOk;
  }
  if (vm.count("estimate"))
    return kExitOk;

#ifndef MOEFIN_HAVE_CUDA
  throw DeviceError("sweep finalize: this moefin was built without CUDA");
#else
  if (run.use_device().selected)
    std::cout << run.summary() << "\n";
  DeviceInfo const dinfo = query_device();
  if (!dinfo.present)
    throw DeviceError("sweep finalize needs a CUDA device: " + dinfo.reason);
  std::string path;
  std::size_t left = 0, written = 0;
  std::int64_t failures = 0;
  {
    auto file = run.open(vm);
    path = file.path();
    fin::record_mode_b_producer(file, producer);
    RunLimit const limit(max_minutes);
    Runner runner(c, file, dinfo);
    runner.measure_copy_bandwidth();
    runner.measure_launch_floor();
    run.per_shard_table(file, "copy_bandwidth"); // every GPU measures its own
    run.per_shard_table(file, "launch_floor");
    auto body = [&](bench::Unit const& u, std::vector<bench::Config> const& todo,
                    bench::Recorder& rec) { runner.measure(u, todo, rec); };
    // One limit for the grid and the repeated shapes after it.
    auto remaining = [&] {
      return limit.limited() ? std::max(max_minutes - limit.elapsed_s() / 60, 1e-6) : 0.0;
    };
    bench::RunOptions ro;
    ro.max_minutes = remaining();
    ro.runs = [&run](bench::Unit const& u) { return run.mine(u.index); };
    // A shape with a broken output is not complete: measured again on --resume, so not finished.
    ro.finished = [&run](bench::Unit const& u, std::size_t rows, double seconds) {
      run.finished(u.index, static_cast<std::int64_t>(rows), seconds);
    };
    auto table = file.table(bench.table(), bench.columns(), bench.description());
    auto const r = bench.run(file, table, units, ro, body);
    left = r.left;
    written = r.rows;
    if (left == 0 && repeat_shapes > 0) {
      auto rep = file.table("finalize_repeat", fin::finalize_sweep_columns(),
                            "shapes of /finalize_sweep measured again at the end of the same "
                            "run (same keys): the spread of identical configurations");
      auto const& mine = run.mine(); // a shard repeats shapes of its own part
      std::size_t const m =
          std::min<std::size_t>(static_cast<std::size_t>(repeat_shapes), mine.size());
      std::vector<bench::Unit> again;
      for (std::size_t j = 0; j < m; ++j)
        again.push_back(units[mine[j * mine.size() / m]]);
      bench::RunOptions rep_options; // the grid's units are this shard's already
      rep_options.max_minutes = remaining();
      left = bench.run(file, rep, again, rep_options, body).left;
    }
    failures = runner.failures();
  }

  std::cout << "wrote " << path << " (" << written << " rows in /finalize_sweep in this call)\n";
  if (left)
    std::cout << "incomplete: stopped by --max-minutes with " << left
              << " shapes left; continue with --resume " << run.resume_name(vm, path) << "\n";
  else
    std::cout << fin::render_finalize_tables({path}, published);
  if (failures) {
    std::cout << "sweep finalize: " << failures
              << " variant/mode measurements had incomplete outputs (see FAIL lines)\n";
    return kExitFailure;
  }
  return kExitOk;
#endif
}

} // namespace moefin::cmd
