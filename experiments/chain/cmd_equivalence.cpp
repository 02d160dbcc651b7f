// moefin equivalence: randomized routings through the whole layer chain with PDL on and off,
// every buffer compared bitwise on the GPU (per-iteration hashes), the output also against the
// Kokkos reference; --replay SEED localizes a mismatch to a buffer and an index.

#include "core/ops/errors.hpp"
#include "core/rng.hpp"
#include "experiments/chain/reference_chain.hpp"
#include "experiments/chain/run.hpp"
#include "experiments/commands.hpp"
#include "experiments/harness/progress.hpp"
#include "experiments/results/chain_tables.hpp"

#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

namespace moefin::cmd {

namespace {

struct EquivOptions {
  std::vector<chain::LayerShape> shapes;
  std::vector<std::int64_t> tokens;
  std::vector<chain::Preset> presets;
  std::string overrides;
  std::int64_t delay_ns = 0;
  chain::Kernel delay_kernel = chain::Kernel::kRouting;
  std::int64_t routings = 1000;
  int batch = 250;
  std::int64_t tile_m = 16;
  chain_run::Residency residency; // one resident wave, largest carveout: early triggers bite
  int ref_checks = 1;
  double tolerance = 1e-2;
  bool stamps = false;
  int replay_attempts = 20;
};

chain::ChainConfig config_of(chain::Preset p, EquivOptions const& o) {
  chain::ChainConfig c = chain::preset_config(p);
  chain::apply_overrides(c, o.overrides);
  if (o.delay_ns > 0)
    c.at(o.delay_kernel).delay_ns = o.delay_ns;
  return c;
}

#ifdef MOEFIN_HAVE_CUDA

int run_replay(EquivOptions const& o, std::uint64_t seed, std::uint64_t weight_seed) {
  if (o.shapes.size() != 1 || o.tokens.size() != 1 || o.presets.size() != 1)
    throw InputError("--replay: give exactly one --shapes, --tokens and --presets value");
  chain::LayerWeights const w(o.shapes[0], weight_seed);
  chain::RunnerOptions ro;
  ro.tokens = o.tokens[0];
  ro.tile_m = o.tile_m;
  chain_run::apply(o.residency, ro);
  ro.hidden_seed = Rng::mix(weight_seed, 3);
  chain::ChainConfig const cfg = config_of(o.presets[0], o);
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
  auto table = file.table("equivalence", chain_tables::equivalence_columns(),
                          "randomized routings through the layer chain, PDL on vs off, every "
                          "buffer hashed per iteration on the GPU; output vs the Kokkos "
                          "reference (max_rel_err relative to the output's peak)");
  std::size_t const total = o.shapes.size() * o.tokens.size() * o.presets.size();
  Progress progress("equivalence", total);
  int failures = 0;
  std::int64_t timelines = 0;
  for (auto const& shape : o.shapes) {
    std::uint64_t const wseed = chain::weight_seed(seed, shape);
    std::unique_ptr<chain::LayerWeights> weights;
    for (std::int64_t T : o.tokens) {
      chain::validate(shape, T, o.tile_m);
      int const batch = static_cast<int>(std::min<std::int64_t>(o.batch, o.routings));
      std::int64_t const batches = (o.routings + batch - 1) / batch;
      std::unique_ptr<chain::ChainRunner> runner;
      std::map<std::uint64_t, std::vector<std::uint16_t>> refs; // shared by the presets
      for (chain::Preset p : o.presets) {
        chain::ChainConfig const cfg = config_of(p, o);
        std::string const key =
            "shape=" + shape.name + ",T=" + std::to_string(T) + ",preset=" + chain::preset_name(p) +
            ",delay=" + std::to_string(o.delay_ns) + "@" + chain::kernel_name(o.delay_kernel) +
            (o.overrides.empty() ? "" : ",set=" + o.overrides);
        if (table.has(key)) {
          progress.step(key, true);
          continue;
        }
        if (!weights)
          weights = std::make_unique<chain::LayerWeights>(shape, wseed);
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
            max_err =
                std::max(max_err, chain_run::max_rel_err(gpu, refs[s].data(), refs[s].size()));
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
        h5::Row row;
        row.set("shape", shape.name)
            .set("T", T)
            .set("preset", chain::preset_name(p))
            .set("overrides", o.overrides)
            .set("delay_ns", o.delay_ns)
            .set("delayed_kernel", o.delay_ns ? chain::kernel_name(o.delay_kernel) : "none")
            .set("finalize", runner->finalize_variant(cfg).name)
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
        table.append(key, row);
        if (o.stamps) {
          chain_run::write_timeline(file, "timeline_equivalence_" + std::to_string(timelines++),
                                    runner->timeline(), key);
        }
        std::ostringstream what;
        what << key << ": " << series.mismatches << "/" << series.routings << " mismatches, "
             << series.stale << " stale reads, ref err "
             << (checks ? std::to_string(max_err) : std::string("-")) << ", "
             << static_cast<int>(static_cast<double>(series.routings) / series.seconds)
             << " routings/s";
        progress.step(what.str());
      }
    }
  }
  progress.finish();
  h5::ResultReader reader(file.path());
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
      "delay-ns", po::value<std::int64_t>()->default_value(0),
      "delay injected before the writes of --delay-kernel, 0..10^9 ns")(
      "delay-kernel", po::value<std::string>()->default_value("routing"),
      "kernel that --delay-ns delays")(
      "routings", po::value<std::int64_t>()->default_value(1000),
      "randomized routings per (shape, T, preset), rounded up to whole batches, 1..10^7")(
      "batch", po::value<int>()->default_value(250), "layers per CUDA graph replay, 1..4096")(
      "tile-m", po::value<std::int64_t>()->default_value(16), "GEMM row tile: 16, 32, 64, 128")(
      "ref-checks", po::value<int>()->default_value(1),
      "batches per (shape, T) whose last routing is checked against the Kokkos reference")(
      "tolerance", po::value<double>()->default_value(1e-2),
      "max error vs the reference, relative to the output's peak")(
      "stamps", "record per-CTA stamps of each row's last iteration (timeline groups)")(
      "replay", po::value<std::string>(),
      "replay routing SEED (one shape, T, preset) and print the first differing buffer/index")(
      "replay-attempts", po::value<int>()->default_value(20), "attempts of --replay, 1..10000")(
      "print", po::value<std::string>(), "print the /equivalence table of FILE and exit");
  chain_run::add_residency_options(desc, chain_run::Residency{});
  cli::add_output_options(desc, "equivalence.h5");
  po::variables_map vm;
  if (!cli::parse("equivalence",
                  "[--shapes S] [--tokens T] [--presets P] [--set K=V,..] [--delay-ns N] "
                  "[--routings N] [--replay SEED] [--print FILE] [--out FILE]",
                  desc, args, vm))
    return kExitOk;
  if (vm.count("print")) {
    h5::ResultReader reader(vm["print"].as<std::string>());
    chain_tables::print_equivalence(reader.read_table("equivalence"), std::cout);
    return kExitOk;
  }
  EquivOptions o;
  o.shapes = chain::parse_shapes(vm["shapes"].as<std::string>(), "--shapes");
  o.tokens = cli::parse_int_list("--tokens", vm["tokens"].as<std::string>(), 1, 128);
  o.presets = chain::parse_presets(vm["presets"].as<std::string>(), "--presets");
  o.overrides = vm["set"].as<std::string>();
  o.delay_ns = vm["delay-ns"].as<std::int64_t>();
  cli::check_range<std::int64_t>("--delay-ns", o.delay_ns, 0, 1000000000);
  if (!chain::parse_kernel(vm["delay-kernel"].as<std::string>(), &o.delay_kernel))
    throw InputError("--delay-kernel: value '" + vm["delay-kernel"].as<std::string>() +
                     "' not one of {routing, permute, gemm1, act, gemm2, finalize}");
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
  for (auto const& s : o.shapes)
    for (auto T : o.tokens)
      chain::validate(s, T, o.tile_m);
  chain::ChainConfig probe = chain::preset_config(o.presets[0]);
  chain::apply_overrides(probe, o.overrides); // bad overrides fail before any GPU work
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
  return run_equivalence(o, file, file.seed());
#else
  throw DeviceError("equivalence needs a CUDA build (this moefin was built without CUDA)");
#endif
}

} // namespace moefin::cmd
