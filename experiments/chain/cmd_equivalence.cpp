// moefin equivalence: randomized routings through the whole layer chain with PDL on and off,
// every buffer compared bitwise on the GPU (per-iteration hashes), the output also against the
// Kokkos reference; --replay SEED localizes a mismatch to a buffer and an index.

#include "core/ops/errors.hpp"
#include "core/rng.hpp"
#include "core/ops/layer_plan.hpp"
#include "experiments/chain/race_cells.hpp"
#include "experiments/chain/reference_chain.hpp"
#include "experiments/chain/run.hpp"
#include "experiments/commands.hpp"
#include "experiments/harness/bench_state.hpp"
#include "experiments/report/chain_tables.hpp"

#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

namespace moefin::cmd {

namespace {

struct EquivOptions {
  std::vector<chain::LayerShape> shapes;
  std::vector<std::string> formats = {chain::kDefaultWeightsFormat}; // --weights-format
  std::vector<std::int64_t> tokens;
  std::vector<chain::Preset> presets;
  std::string overrides;
  std::vector<std::int64_t> delays = {0};                               // --delay-ns
  std::vector<chain::Kernel> delay_kernels = {chain::Kernel::kRouting}; // --delay-kernels
  std::int64_t routings = 1000;
  int batch = 250;
  std::int64_t tile_m = 16;
  chain_run::Residency residency; // one resident wave, largest carveout: early triggers bite
  int ref_checks = 1;
  double tolerance = 1e-2;
  bool stamps = false;
  int replay_attempts = 20;
  std::string flavour = "moefin"; // --flavour
};

chain::ChainConfig config_of(chain::Preset p, EquivOptions const& o, std::int64_t delay_ns,
                             chain::Kernel delay_kernel) {
  chain::ChainConfig c = chain::preset_config(p);
  chain::apply_overrides(c, o.overrides);
  if (delay_ns > 0)
    c.at(delay_kernel).delay_ns = delay_ns;
  chain::set_flavour(c, o.flavour);
  return c;
}

/// Every (shape, weights format, T, preset, delay, delayed kernel) of the run (a zero delay once,
/// whatever the kernels): one unit and one row each, keyed
/// "shape=..,T=..,preset=..,delay=D@KERNEL[,set=OVERRIDES][,weights_format=F]" (as every
/// /equivalence so far; a zero delay names the first kernel of --delay-kernels; the format only
/// when it is not bf16-tiled).
bench::Benchmark equivalence_benchmark(EquivOptions const& o) {
  bench::Benchmark b("equivalence", chain_tables::equivalence_columns(),
                     "randomized routings through the layer chain, PDL on vs off, every buffer "
                     "hashed per iteration on the GPU; output vs the Kokkos reference "
                     "(max_rel_err relative to the output's peak)");
  std::vector<bench::Config> units;
  for (auto const& shape : o.shapes)
    for (auto const& format : o.formats)
      for (std::int64_t T : o.tokens)
        for (chain::Preset p : o.presets)
          for (std::int64_t d : o.delays)
            for (chain::Kernel k : o.delay_kernels) {
              if (d == 0 && k != o.delay_kernels.front())
                continue;
              bench::Config u;
              u.set("shape", shape.name)
                  .set("weights_format", format)
                  .set("T", T)
                  .set("preset", std::string(chain::preset_name(p)))
                  .set("overrides", o.overrides)
                  .set("delay_ns", d)
                  .set("delay_at", std::string(chain::kernel_name(k)))
                  .set("delayed_kernel", std::string(d ? chain::kernel_name(k) : "none"));
              units.push_back(u);
            }
  b.units(std::move(units));
  b.key([&o](bench::Config const& r) {
    return "shape=" + r.str("shape") + ",T=" + std::to_string(r.num("T")) +
           ",preset=" + r.str("preset") + ",delay=" + std::to_string(r.num("delay_ns")) + "@" +
           r.str("delay_at") + (o.overrides.empty() ? "" : ",set=" + o.overrides) +
           (r.str("weights_format") == chain::kDefaultWeightsFormat
                ? ""
                : ",weights_format=" + r.str("weights_format"));
  });
  b.cost([&o](bench::Config const&, std::size_t) {
    return 0.5 + 2e-3 * static_cast<double>(o.routings); // both PDL modes, hashing, the copies
  });
  return b;
}

#ifdef MOEFIN_HAVE_CUDA

int run_replay(EquivOptions const& o, std::uint64_t seed, std::uint64_t weight_seed) {
  if (o.shapes.size() != 1 || o.tokens.size() != 1 || o.presets.size() != 1 ||
      o.delays.size() != 1 || o.delay_kernels.size() != 1 || o.formats.size() != 1)
    throw InputError("--replay: give exactly one --shapes, --tokens, --presets, --delay-ns, "
                     "--delay-kernels and --weights-format value");
  chain::LayerWeights const w(o.shapes[0], weight_seed, o.formats[0]);
  chain::RunnerOptions ro;
  ro.tokens = o.tokens[0];
  ro.tile_m = o.tile_m;
  chain_run::apply(o.residency, ro);
  ro.hidden_seed = Rng::mix(weight_seed, 3);
  chain::ChainConfig const cfg = config_of(o.presets[0], o, o.delays[0], o.delay_kernels[0]);
  std::cout << "replay of routing " << seed << " after routing " << chain::replay_predecessor(seed)
            << ": " << o.shapes[0].name << " T=" << ro.tokens << " " << chain::describe(cfg)
            << "\n";
  auto const r = chain_run::replay(w, ro, cfg, seed, o.replay_attempts);
  if (!r.reproduced) {
    std::cout << "no difference between PDL on and off in " << r.attempts
              << " attempts (every buffer compared element by element)\n";
    return kExitOk;
  }
  std::cout << "first difference (attempt " << r.attempts << "): " << r.detail << "\n";
  return kExitFailure;
}

int run_equivalence(EquivOptions const& o, h5::ResultWriter& file, std::uint64_t seed) {
  bench::Benchmark const bench = equivalence_benchmark(o);
  int failures = 0;
  std::int64_t timelines = 0;
  std::map<std::string, chain::LayerShape> shape_of;
  for (auto const& s : o.shapes)
    shape_of[s.name] = s;
  // One set of weights and one runner at a time: units come grouped by shape, then T.
  std::unique_ptr<chain::LayerWeights> weights;
  std::unique_ptr<chain::ChainRunner> runner;
  std::string runner_of;
  std::map<std::uint64_t, std::vector<std::uint16_t>> refs; // shared by the presets of a T
  auto body = [&](bench::Unit const& u, std::vector<bench::Config> const&, bench::Recorder& rec) {
    chain::LayerShape const& shape = shape_of.at(u.config.str("shape"));
    std::int64_t const T = u.config.num("T");
    chain::Preset p;
    chain::parse_preset(u.config.str("preset"), &p);
    chain::Kernel delay_kernel = chain::Kernel::kRouting;
    chain::parse_kernel(u.config.str("delay_at"), &delay_kernel);
    chain::ChainConfig const cfg = config_of(p, o, u.config.num("delay_ns"), delay_kernel);
    std::string const key = bench.row_key(u.config);
    std::uint64_t const wseed = chain::weight_seed(seed, shape);
    int const batch = static_cast<int>(std::min<std::int64_t>(o.batch, o.routings));
    std::int64_t const batches = (o.routings + batch - 1) / batch;
    std::string const format = u.config.str("weights_format");
    std::string const which = shape.name + "," + format + ",T=" + std::to_string(T);
    if (runner_of != which) {
      runner.reset();
      refs.clear();
      if (weights && (weights->shape().name != shape.name || weights->format() != format))
        weights.reset();
      runner_of = which;
    }
    if (!weights)
      weights = std::make_unique<chain::LayerWeights>(shape, wseed, format);
    if (!runner) {
      chain::RunnerOptions ro;
      ro.tokens = T;
      ro.tile_m = o.tile_m;
      chain_run::apply(o.residency, ro);
      ro.iterations = batch;
      ro.stamps = o.stamps;
      ro.hidden_seed = Rng::mix(wseed, 3);
      runner = std::make_unique<chain::ChainRunner>(*weights, ro);
    }
    chain_run::Series series;
    double max_err = -1;
    int checks = 0;
    for (std::int64_t b = 0; b < batches; ++b) {
      std::vector<std::uint64_t> seeds(static_cast<std::size_t>(batch));
      for (int i = 0; i < batch; ++i)
        seeds[static_cast<std::size_t>(i)] = chain::routing_seed(seed, shape, T, b * batch + i);
      auto const t0 = std::chrono::steady_clock::now();
      runner->set_routings(seeds);
      auto const off = runner->run_batch(cfg, false);
      auto const on = runner->run_batch(cfg, true);
      series.seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      chain_run::add_batch(series, on, off, seeds);
      if (b < o.ref_checks) {
        // The last routing of the batch: its output is what the out buffer holds now.
        std::uint64_t const s = seeds.back();
        if (!refs.count(s))
          refs[s] = chain_run::reference_output(runner->plan(cfg), *weights, T, s,
                                                runner->hidden_states());
        auto const bytes = runner->download(chain::Buffer::kOut);
        auto const* gpu = reinterpret_cast<std::uint16_t const*>(bytes.data());
        max_err = std::max(max_err, chain_run::max_rel_err(gpu, refs[s].data(), refs[s].size()));
        ++checks;
      }
    }
    std::int64_t first_index = -1;
    std::string first_buffer;
    if (series.mismatches > 0) {
      first_buffer = chain::buffer_name(static_cast<chain::Buffer>(series.first_buffer));
      chain::RunnerOptions ro;
      ro.tokens = T;
      ro.tile_m = o.tile_m;
      chain_run::apply(o.residency, ro);
      ro.hidden_seed = Rng::mix(wseed, 3);
      auto const r = chain_run::replay(*weights, ro, cfg, series.first_seed, o.replay_attempts);
      if (r.reproduced) {
        first_buffer = chain::buffer_name(static_cast<chain::Buffer>(r.buffer));
        first_index = r.index;
        std::cerr << "  replay of " << series.first_seed << ": " << r.detail << "\n";
      }
    }
    bool const ref_ok = checks == 0 || max_err <= o.tolerance;
    failures += (series.mismatches > 0 || !ref_ok) ? 1 : 0;
    bench::Measurement m;
    m.columns.set("finalize", runner->finalize_variant(cfg).name)
        .set("tile_m", o.tile_m)
        .set("routings", series.routings)
        .set("mismatches", series.mismatches)
        .set("first_buffer", first_buffer)
        .set("first_index", first_index)
        .set("first_seed", series.mismatches ? std::to_string(series.first_seed) : "")
        .set("stale_reads", series.stale)
        .set("recorded_reads", series.recorded)
        .set("ref_checks", checks)
        .set("max_rel_err", max_err)
        .set("tolerance", o.tolerance)
        .set("routings_per_s", static_cast<double>(series.routings) / series.seconds);
    rec.add(u.config, std::move(m));
    if (o.stamps) {
      chain_run::write_timeline(file, "timeline_equivalence_" + std::to_string(timelines++),
                                runner->timeline(), key);
    }
    std::ostringstream what;
    what << series.mismatches << "/" << series.routings << " mismatches, " << series.stale
         << " stale reads, ref err " << (checks ? std::to_string(max_err) : std::string("-"))
         << ", " << static_cast<int>(static_cast<double>(series.routings) / series.seconds)
         << " routings/s";
    rec.summary(what.str());
  };
  bench.run(file, bench::RunOptions{}, body);
  file.commit();
  h5::ResultReader reader(file.path());
  chain_run::print_flavour(reader.provenance(), std::cout);
  chain_tables::print_equivalence(reader.read_table("equivalence"), std::cout);
  if (failures)
    std::cout << failures << " configuration(s) with mismatches or reference errors\n";
  return failures ? kExitFailure : kExitOk;
}

#endif

} // namespace

int equivalence(cli::Args const& args) {
  namespace po = cli::po;
  po::options_description desc("equivalence options");
  desc.add_options()("shapes", po::value<std::string>()->default_value("top-8,top-22"),
                     "layer shapes: top-8, top-22, top-16 or H<h>/I<i>/E<e>/top-<k>[/relu2]")(
      "tokens", po::value<std::string>()->default_value("1,2,4,8,16"), "token counts, 1..128")(
      "presets", po::value<std::string>()->default_value("seed-before,seed-after,safe"),
      "PDL presets: seed-before, seed-after, all-early, safe")(
      "set", po::value<std::string>()->default_value(""),
      "overrides for every preset: <kernel>.trigger|delay_ns|pdl=V, finalize.meta=before|after, "
      "finalize.variant=new|previous (comma-separated)")(
      "delay-ns", po::value<std::string>()->default_value("0"),
      "delays injected before the writes of --delay-kernels, 0..10^9 ns")(
      "delay-kernels", po::value<std::string>()->default_value("routing"),
      "kernels that receive the delay")(
      "routings", po::value<std::int64_t>()->default_value(1000),
      "randomized routings per (shape, T, preset), rounded up to whole batches, 1..10^7")(
      "batch", po::value<int>()->default_value(250), "layers per CUDA graph replay, 1..4096")(
      "tile-m", po::value<std::int64_t>()->default_value(16), "GEMM row tile: 16, 32, 64, 128 (bf16-tiled), 8 or 16 (bf16, fp4)")(
      "ref-checks", po::value<int>()->default_value(1),
      "batches per (shape, T) whose last routing is checked against the Kokkos reference")(
      "tolerance", po::value<double>()->default_value(1e-2),
      "max error vs the reference, relative to the output's peak")(
      "stamps", "record per-CTA stamps of each row's last iteration (timeline groups)")(
      "replay", po::value<std::string>()->notifier([](std::string const& v) {
        chain_run::parse_seed("--replay", v);
      }),
      "replay routing SEED (one shape, T, preset) and print the first differing buffer/index")(
      "replay-attempts", po::value<int>()->default_value(20), "attempts of --replay, 1..10000")(
      "print", po::value<std::string>(), "print the /equivalence table of FILE and exit")(
      "list", "print the configurations (index, estimated seconds, key) and exit; no GPU needed");
  chain_run::add_flavour_option(desc);
  chain_run::add_residency_options(desc, chain_run::Residency{});
  chain_run::add_weights_format_option(desc, "a list is an axis of the run");
  cli::add_result_options(desc, "equivalence");
  po::variables_map vm;
  if (!cli::parse("equivalence",
                  "[--shapes S] [--tokens T] [--weights-format F] [--presets P] [--set K=V,..] "
                  "[--delay-ns D] [--delay-kernels K] "
                  "[--routings N] [--replay SEED] [--print FILE] [--out FILE]",
                  desc, args, vm))
    return kExitOk;
  if (vm.count("print")) {
    h5::ResultReader reader(vm["print"].as<std::string>());
    chain_run::print_flavour(reader.provenance(), std::cout);
    chain_tables::print_equivalence(reader.read_table("equivalence"), std::cout);
    return kExitOk;
  }
  EquivOptions o;
  o.flavour = chain_run::read_flavour_option(vm);
  o.shapes = chain::parse_shapes(vm["shapes"].as<std::string>(), "--shapes");
  o.tokens = cli::parse_int_list("--tokens", vm["tokens"].as<std::string>(), 1, 128);
  o.presets = chain::parse_presets(vm["presets"].as<std::string>(), "--presets");
  o.overrides = vm["set"].as<std::string>();
  o.delays = cli::parse_int_list("--delay-ns", vm["delay-ns"].as<std::string>(), 0, 1000000000);
  o.delay_kernels =
      chain_run::parse_delay_kernels(vm["delay-kernels"].as<std::string>(), "--delay-kernels");
  o.routings = vm["routings"].as<std::int64_t>();
  cli::check_range<std::int64_t>("--routings", o.routings, 1, 10000000);
  o.batch = vm["batch"].as<int>();
  cli::check_range("--batch", o.batch, 1, 4096);
  o.tile_m = vm["tile-m"].as<std::int64_t>();
  o.residency = chain_run::read_residency_options(vm);
  o.ref_checks = vm["ref-checks"].as<int>();
  cli::check_range("--ref-checks", o.ref_checks, 0, 1000);
  o.tolerance = vm["tolerance"].as<double>();
  cli::check_range("--tolerance", o.tolerance, 1e-6, 1.0);
  o.stamps = vm.count("stamps") > 0;
  o.replay_attempts = vm["replay-attempts"].as<int>();
  cli::check_range("--replay-attempts", o.replay_attempts, 1, 10000);
  o.formats = chain_run::read_weights_formats(vm);
  for (auto const& s : o.shapes) {
    for (auto T : o.tokens)
      chain::validate(s, T, o.tile_m);
    for (auto const& f : o.formats)
      chain_run::check_weights_format(f, s, o.tile_m);
  }
  chain::ChainConfig probe = chain::preset_config(o.presets[0]);
  chain::apply_overrides(probe, o.overrides); // bad overrides fail before any GPU work
  // ... and so do knobs the flavour's kernels lack (a delay in a released kernel) and a flavour
  // over GEMMs it cannot run with.
  for (chain::Preset p : o.presets)
    for (std::int64_t d : o.delays)
      for (chain::Kernel k : o.delay_kernels)
        for (auto const& f : o.formats) {
          chain::ChainConfig const c = config_of(p, o, d, k);
          (void)chain::make_layer_plan(c,
                                       race::planned_finalize_variant(o.shapes[0], o.tokens[0], c),
                                       *chain::flavour_for_format(f));
        }
  if (vm.count("list")) {
    equivalence_benchmark(o).list(std::cout);
    return kExitOk;
  }
#ifdef MOEFIN_HAVE_CUDA
  chain_run::require_device("equivalence");
  std::uint64_t const seed = vm["seed"].as<std::uint64_t>();
  if (vm.count("replay")) {
    std::uint64_t const weight_seed = chain::weight_seed(seed, o.shapes[0]);
    return run_replay(o, chain_run::parse_seed("--replay", vm["replay"].as<std::string>()),
                      weight_seed);
  }
  auto file =
      h5::ResultWriter::open(vm["out"].as<std::string>(), vm["resume"].as<std::string>(), seed);
  chain_run::record(o.residency, file);
  chain_run::record_flavour(o.flavour, file);
  return run_equivalence(o, file, file.seed());
#else
  throw DeviceError("equivalence needs a CUDA build (this moefin was built without CUDA)");
#endif
}

} // namespace moefin::cmd
