// moefin sweep layer: whole-layer time of the chain (CUDA graph of N layers, PDL on, interleaved
// rounds, medians) for the seed's shapes: new vs previous finalize, seed-after vs seed-before
// placements; prints the seed-format tables beside the published ones.

#include "core/ops/errors.hpp"
#include "core/rng.hpp"
#include "core/stats.hpp"
#include "experiments/chain/run.hpp"
#include "experiments/commands.hpp"
#include "experiments/harness/progress.hpp"
#include "experiments/harness/timing_rounds.hpp"
#include "experiments/results/chain_tables.hpp"
#include "kernels/chain/chain.hpp"

#include <algorithm>
#include <array>
#include <iostream>

namespace moefin::cmd {

int sweep_layer(cli::Args const& args) {
  namespace po = cli::po;
  po::options_description desc("sweep layer options");
  desc.add_options()("shapes", po::value<std::string>()->default_value("top-8,top-22,top-16"),
                     "layer shapes: top-8, top-22, top-16 or H<h>/I<i>/E<e>/top-<k>[/relu2]")(
      "tokens", po::value<std::string>()->default_value("1,8,16,32,64,128"),
      "token counts, 1..128")("rounds", po::value<int>()->default_value(9),
                              "interleaved rounds, 3..1000")(
      "layers", po::value<int>()->default_value(16),
      "layers per CUDA graph (each on its own routing), 1..4096")(
      "tile-m", po::value<std::int64_t>()->default_value(16), "GEMM row tile")(
      "stamps", po::value<std::string>()->implicit_value("all"),
      "--stamps[=T,..]: after the timed rounds, replay the graph of each configuration (of these "
      "token counts; all when none are given) once more with per-CTA stamps and store its last "
      "layer's timeline (groups timeline_layer_N)")(
      "published", po::value<std::string>()->default_value(chain_tables::default_published_dir()),
      "folder of whole_op_speedup.csv and pdl_ordering_speedup.csv")(
      "print", po::value<std::string>(), "print the tables of FILE's /layer_sweep and exit");
  // The kernels' own policies (two CTAs per SM) and the driver's carveout: the layer as it runs.
  chain_run::add_residency_options(desc, chain_run::Residency{2, false});
  cli::add_output_options(desc, "layer_sweep.h5");
  po::variables_map vm;
  if (!cli::parse("sweep layer",
                  "[--shapes S] [--tokens T] [--rounds N] [--layers N] [--ctas-per-sm N] "
                  "[--carveout C] [--stamps[=T,..]] [--print FILE] [--out FILE]",
                  desc, args, vm))
    return kExitOk;
  std::string const published = vm["published"].as<std::string>();
  if (vm.count("print")) {
    h5::ResultReader reader(vm["print"].as<std::string>());
    chain_tables::print_layer_tables(reader.read_table("layer_sweep"), published,
                                     reader.provenance().at("gpu_name"), std::cout);
    return kExitOk;
  }
  auto const shapes = chain::parse_shapes(vm["shapes"].as<std::string>(), "--shapes");
  auto const tokens = cli::parse_int_list("--tokens", vm["tokens"].as<std::string>(), 1, 128);
  int const rounds = vm["rounds"].as<int>();
  cli::check_range("--rounds", rounds, 3, 1000);
  int const layers = vm["layers"].as<int>();
  cli::check_range("--layers", layers, 1, 4096);
  std::int64_t const tile_m = vm["tile-m"].as<std::int64_t>();
  // Token counts whose configurations get a stamped replay.
  std::vector<std::int64_t> stamp_tokens;
  if (vm.count("stamps"))
    stamp_tokens = vm["stamps"].as<std::string>() == "all"
                       ? tokens
                       : cli::parse_int_list("--stamps", vm["stamps"].as<std::string>(), 1, 128);
  chain_run::Residency const residency = chain_run::read_residency_options(vm);
  for (auto const& s : shapes)
    for (auto T : tokens)
      chain::validate(s, T, tile_m);
  chain_tables::read_published(published + "/whole_op_speedup.csv"); // fail early on a bad path
#ifdef MOEFIN_HAVE_CUDA
  chain_run::require_device("sweep layer");
  auto file = h5::ResultWriter::open(vm["out"].as<std::string>(), vm["resume"].as<std::string>(),
                                     vm["seed"].as<std::uint64_t>());
  std::uint64_t const seed = file.seed();
  chain_run::record(residency, file);
  auto table = file.table("layer_sweep", chain_tables::layer_columns(),
                          "whole-layer time per layer (us), CUDA graph of `layers` layers on "
                          "distinct routings, PDL on, interleaved rounds; speedup_finalize = "
                          "previous/this at the same placement, speedup_placement = "
                          "seed-before/this with the same finalize (paired medians, 95% CI)");
  struct Config {
    chain::FinalizeChoice fin;
    chain::Preset placement;
  };
  std::array<Config, 4> const configs = {
      Config{chain::FinalizeChoice::dispatch_new(), chain::Preset::kSeedAfter},
      Config{chain::FinalizeChoice::dispatch_previous(), chain::Preset::kSeedAfter},
      Config{chain::FinalizeChoice::dispatch_new(), chain::Preset::kSeedBefore},
      Config{chain::FinalizeChoice::dispatch_previous(), chain::Preset::kSeedBefore}};
  auto key_of = [](chain::LayerShape const& s, std::int64_t T, Config const& c) {
    return "shape=" + s.name + ",T=" + std::to_string(T) + ",finalize=" + c.fin.name() +
           ",placement=" + chain::preset_name(c.placement);
  };
  // Numbered on from the timelines a resumed file already holds.
  std::int64_t timelines = 0;
  {
    h5::ResultReader const before(file.path());
    while (before.has_group("timeline_layer_" + std::to_string(timelines)))
      ++timelines;
  }
  Progress progress("sweep layer", shapes.size() * tokens.size());
  for (auto const& shape : shapes) {
    std::unique_ptr<chain::LayerWeights> weights;
    for (std::int64_t T : tokens) {
      bool done = true;
      for (auto const& c : configs)
        done = done && table.has(key_of(shape, T, c));
      if (done) {
        progress.step(shape.name + " T=" + std::to_string(T), true);
        continue;
      }
      if (!weights)
        weights = std::make_unique<chain::LayerWeights>(shape, chain::weight_seed(seed, shape));
      chain::RunnerOptions ro;
      ro.tokens = T;
      ro.tile_m = tile_m;
      ro.iterations = layers;
      bool const stamps =
          std::find(stamp_tokens.begin(), stamp_tokens.end(), T) != stamp_tokens.end();
      ro.stamps = stamps;
      chain_run::apply(residency, ro);
      ro.hidden_seed = Rng::mix(chain::weight_seed(seed, shape), 3);
      chain::ChainRunner runner(*weights, ro);
      std::vector<std::uint64_t> seeds(static_cast<std::size_t>(layers));
      for (int i = 0; i < layers; ++i)
        seeds[static_cast<std::size_t>(i)] = chain::routing_seed(seed, shape, T, i);
      runner.set_routings(seeds);
      std::array<chain::ChainConfig, 4> cfgs;
      for (std::size_t c = 0; c < configs.size(); ++c) {
        cfgs[c] = chain::preset_config(configs[c].placement);
        cfgs[c].finalize = configs[c].fin;
        runner.time_layers(cfgs[c], true); // build the graph, warm the caches
        runner.time_layers(cfgs[c], true);
      }
      auto const t = bench::interleaved_rounds(
          configs.size(), rounds, [&](std::size_t c) { return runner.time_layers(cfgs[c], true); });
      for (std::size_t c = 0; c < configs.size(); ++c) {
        auto const s = stats::summarize(t[c]);
        // Partner rows: same placement other finalize (c ^ 1), same finalize other placement (c ^
        // 2).
        bool const is_new = !configs[c].fin.previous;
        bool const is_after = configs[c].placement == chain::Preset::kSeedAfter;
        stats::RatioEstimate one{1.0, 1.0, 1.0, t[c].size()};
        auto const rf = is_new ? stats::paired_ratio(t[c ^ 1], t[c]) : one;
        auto const rp = is_after ? stats::paired_ratio(t[c ^ 2], t[c]) : one;
        h5::Row row;
        row.set("shape", shape.name)
            .set("H", shape.hidden)
            .set("I", shape.inter)
            .set("E", shape.experts)
            .set("K", shape.top_k)
            .set("activation", activation::type_name(shape.act))
            .set("T", T)
            .set("finalize", configs[c].fin.name())
            .set("placement", chain::preset_name(configs[c].placement))
            .set("finalize_kernel", runner.finalize_variant(cfgs[c]).name)
            .set("tile_m", tile_m)
            .set("layers", layers)
            .set("median_us", s.median)
            .set("min_us", s.min)
            .set("q1_us", s.q1)
            .set("q3_us", s.q3)
            .set("max_us", s.max)
            .set("rounds", rounds)
            .set("speedup_finalize", rf.ratio)
            .set("speedup_finalize_lo", rf.lo)
            .set("speedup_finalize_hi", rf.hi)
            .set("speedup_placement", rp.ratio)
            .set("speedup_placement_lo", rp.lo)
            .set("speedup_placement_hi", rp.hi);
        table.append(key_of(shape, T, configs[c]), row, t[c]);
        if (stamps)
          chain_run::write_timeline(file, "timeline_layer_" + std::to_string(timelines++),
                                    runner.stamp_layers(cfgs[c], true),
                                    key_of(shape, T, configs[c]));
      }
      progress.step(shape.name + " T=" + std::to_string(T) + ": " +
                    std::to_string(stats::median(t[0])) + " us/layer (new, seed-after)");
    }
  }
  progress.finish();
  h5::ResultReader reader(file.path());
  chain_tables::print_layer_tables(reader.read_table("layer_sweep"), published,
                                   reader.provenance().at("gpu_name"), std::cout);
  return kExitOk;
#else
  throw DeviceError("sweep layer needs a CUDA build (this moefin was built without CUDA)");
#endif
}

} // namespace moefin::cmd
