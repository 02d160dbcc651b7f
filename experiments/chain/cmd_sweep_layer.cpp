// moefin sweep layer: whole-layer time of the chain (CUDA graph of N layers, PDL on, interleaved
// rounds, medians) for the seed's shapes: new vs previous finalize, seed-after vs seed-before
// placements; prints the seed-format tables beside the published ones.

#include "core/ops/errors.hpp"
#include "core/ops/scale_layout.hpp"
#include "core/ops/value_layout.hpp"
#include "core/rng.hpp"
#include "core/stats.hpp"
#include "experiments/chain/run.hpp"
#include "experiments/commands.hpp"
#include "experiments/harness/bench_state.hpp"
#include "experiments/harness/timing_rounds.hpp"
#include "experiments/report/chain_tables.hpp"
#include "kernels/chain/chain.hpp"

#include <algorithm>
#include <array>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

namespace moefin::cmd {

namespace {

/// The chain of a row: its placement preset and its finalize ("new" and "previous": the dispatch
/// rule with and without small_batch; any other name: that variant, forced).
chain::ChainConfig placement_config(bench::Config const& row, std::string const& flavour) {
  chain::Preset p;
  if (!chain::parse_preset(row.str("placement"), &p))
    throw std::logic_error("sweep layer: placement " + row.str("placement"));
  chain::ChainConfig cfg = chain::preset_config(p);
  chain::apply_overrides(cfg, "finalize.variant=" + row.str("finalize"));
  chain::set_flavour(cfg, flavour);
  return cfg;
}

/// The finalize rows of --finalize: "all" is new, previous and the registry's chain-listed
/// variants; a list is those, with previous added (every row's speedup_finalize partner). A variant
/// that runs inside GEMM2 is left out of "all" and refused in a list (exit 2) when the flavour or
/// one of the weights formats cannot take it (chain::inside_gemm2_refusal).
std::vector<std::string> finalize_rows(std::string const& text, std::string const& flavour,
                                       std::vector<std::string> const& formats) {
  auto refusal = [&](finalize::FinalizeVariant const& v) {
    for (auto const& f : formats)
      if (std::string why = chain::inside_gemm2_refusal(flavour, v, *chain::flavour_for_format(f));
          !why.empty())
        return why;
    return std::string();
  };
  std::vector<std::string> out = {"new", "previous"};
  if (text == "all") {
    for (auto const* v : finalize::variants(finalize::kListChain))
      if (refusal(*v).empty())
        out.push_back(v->name);
    return out;
  }
  out = {"previous"};
  for (auto const& f : chain::split_list(text, "--finalize")) {
    chain::ChainConfig c;
    chain::apply_overrides(c, "finalize.variant=" + f, "--finalize"); // a known name, or exit 2
    if (c.finalize.forced)
      if (std::string const why = refusal(*c.finalize.forced); !why.empty())
        throw InputError(why);
    if (std::find(out.begin(), out.end(), f) == out.end())
      out.push_back(f);
  }
  return out;
}

/// The configurations: a unit per (shape, weights format, T), its rows every finalize of
/// finalize_rows x placement (seed-after, seed-before), keyed
/// "shape=..,T=..,finalize=..,placement=..[,weights_format=..]" (the format named only when it is
/// not bf16-tiled, the one every earlier file ran). speedup_finalize pairs a row with the
/// previous finalize at its placement, speedup_placement a seed-after row with seed-before.
bench::Benchmark layer_benchmark(std::vector<std::string> const& shapes,
                                 std::map<std::string, chain::LayerShape> const& shape_of,
                                 std::vector<std::string> const& formats,
                                 std::vector<std::int64_t> const& tokens,
                                 std::vector<std::string> const& finalizes, int rounds,
                                 int layers) {
  bench::Benchmark b("layer_sweep", chain_tables::layer_columns(),
                     "whole-layer time per layer (us), CUDA graph of `layers` layers on distinct "
                     "routings, PDL on, interleaved rounds; speedup_finalize = previous/this at "
                     "the same placement, speedup_placement = seed-before/this with the same "
                     "finalize (paired medians, 95% CI)");
  b.axis(bench::string_axis("shape", shapes));
  b.axis(bench::string_axis("weights_format", formats));
  b.axis(bench::int_axis("T", tokens));
  b.axis(bench::string_axis("finalize", finalizes, bench::Scope::kRow));
  b.axis(bench::string_axis("placement", {"seed-after", "seed-before"}, bench::Scope::kRow));
  b.key([](bench::Config const& r) {
    std::string const f = r.str("weights_format");
    return "shape=" + r.str("shape") + ",T=" + std::to_string(r.num("T")) +
           ",finalize=" + r.str("finalize") + ",placement=" + r.str("placement") +
           (f == chain::kDefaultWeightsFormat ? "" : ",weights_format=" + f);
  });
  b.timed();
  b.ratio({"speedup_finalize", "speedup_finalize_lo", "speedup_finalize_hi", "finalize",
           [](bench::Config const& r) {
             return r.str("finalize") == "previous" ? std::string() : std::string("previous");
           },
           true, 1.0});
  b.ratio({"speedup_placement", "speedup_placement_lo", "speedup_placement_hi", "placement",
           [](bench::Config const& r) {
             return r.str("placement") == "seed-after" ? std::string("seed-before") : std::string();
           },
           true, 1.0});
  b.cost([&shape_of, rounds, layers](bench::Config const& u, std::size_t rows) {
    chain::LayerShape const& s = shape_of.at(u.str("shape"));
    // Weights read once per layer at ~2.5 TB/s, plus ~30 us of the rest; graphs take ~1 s each.
    // fp4: 4.5 bits a weight.
    double const bytes_per_weight = u.str("weights_format") == "fp4" ? 0.5625 : 2.0;
    double const weight_bytes =
        bytes_per_weight *
        static_cast<double>(s.experts * (s.gemm1_n() * s.hidden + s.hidden * s.inter));
    double const layer_s = weight_bytes / 2.5e12 + 30e-6 * static_cast<double>(u.num("T") + 1);
    return static_cast<double>(rows) * (1.0 + static_cast<double>((rounds + 2) * layers) * layer_s);
  });
  return b;
}

} // namespace

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
      "tile-m", po::value<std::int64_t>()->default_value(16),
      "GEMM row tile: 16, 32, 64, 128 (bf16-tiled), 8 or 16 (bf16, fp4)")(
      "fp4-scales", po::value<std::string>()->default_value("tiled"),
      "where fp4 weights' scales lie for the GEMMs: tiled (16 x 128 tiles, the chain's default) "
      "or rowmajor (as before 2026-12-05); the same output bits, another speed. Recorded as the "
      "file attribute fp4_scales")(
      "fp4-values", po::value<std::string>(),
      "how fp4 weights' values lie for the GEMMs: packed (each 32-bit word bit-permuted, fewer "
      "instructions to dequantize; needs --fp4-scales tiled), tiles (packed, and each GEMM "
      "warp-stage's 2 KiB contiguous; needs --fp4-gemm wide) or nibbles (NVFP4's order, as "
      "before 2026-12-05); the same output bits. Unset: the chain's, tiles with tiled scales "
      "(packed with --fp4-gemm single) and nibbles with rowmajor. Recorded as the file "
      "attribute fp4_values")(
      "fp4-gemm", po::value<std::string>(),
      "how the fp4 GEMMs are launched: wide (two warp-stages per pipeline stage, the `wide` "
      "candidate of sweep gemm; needs packed or tiles values) or single (one, as before "
      "2026-12-05; not with tiles); the same output bits. Unset: the chain's, wide with packed "
      "or tiles values and single with nibbles. "
      "Recorded as the file attribute fp4_gemm")(
      "stamps", po::value<std::string>()->implicit_value("all"),
      "--stamps[=T,..]: after the timed rounds, replay the graph of each configuration (of these "
      "token counts; all when none are given) once more with per-CTA stamps and store its last "
      "layer's timeline (groups timeline_layer_N)")(
      "peers", po::value<std::string>(),
      "with --print: a file of the PyTorch layer peer (experiments/chain/peers_layer_torch.py), "
      "shown as columns of the per-format table")(
      "published", po::value<std::string>()->default_value(chain_tables::default_published_dir()),
      "folder of whole_op_speedup.csv and pdl_ordering_speedup.csv")(
      "print", po::value<std::string>(), "print the tables of FILE's /layer_sweep and exit")(
      "finalize", po::value<std::string>()->default_value("all"),
      "finalize rows timed in the same rounds: all (new, previous and the chain-listed variants; "
      "fused only with --flavour moefin and --weights-format bf16-tiled) or a list of new (the "
      "dispatch rule), previous (the rule before small_batch) and variant names, e.g. new,fused "
      "(fused: no finalize launch, the tiled GEMM2 reduces in its epilogue); previous is always "
      "timed (the speedup_finalize partner)")(
      "list", "print the configurations (index, estimated seconds, row keys) and exit; no GPU "
              "needed");
  // The kernels' own policies (two CTAs per SM) and the driver's carveout: the layer as it runs.
  chain_run::add_residency_options(desc, chain_run::Residency{2, false});
  chain_run::add_flavour_option(desc);
  chain_run::add_weights_format_option(desc, "a list is an axis of the sweep");
  cli::add_result_options(desc, "sweep layer");
  po::variables_map vm;
  if (!cli::parse("sweep layer",
                  "[--shapes S] [--tokens T] [--weights-format F] [--finalize L] [--rounds N] "
                  "[--layers N] [--ctas-per-sm N] [--carveout C] [--stamps[=T,..]] [--print FILE "
                  "[--peers FILE]] [--out FILE]",
                  desc, args, vm))
    return kExitOk;
  std::string const published = vm["published"].as<std::string>();
  if (vm.count("print")) {
    h5::ResultReader reader(vm["print"].as<std::string>());
    chain_run::print_flavour(reader.provenance(), std::cout);
    h5::Table peers;
    if (vm.count("peers"))
      peers = h5::ResultReader(vm["peers"].as<std::string>()).read_table("layer_sweep");
    chain_tables::print_layer_tables(reader.read_table("layer_sweep"), published,
                                     reader.provenance().at("gpu_name"), std::cout,
                                     vm.count("peers") ? &peers : nullptr);
    return kExitOk;
  }
  std::string const flavour = chain_run::read_flavour_option(vm);
  if (vm.count("peers"))
    throw InputError("--peers: only with --print FILE (a run writes moefin's rows only)");
  auto const shapes = chain::parse_shapes(vm["shapes"].as<std::string>(), "--shapes");
  auto const tokens = cli::parse_int_list("--tokens", vm["tokens"].as<std::string>(), 1, 128);
  int const rounds = vm["rounds"].as<int>();
  cli::check_range("--rounds", rounds, 3, 1000);
  int const layers = vm["layers"].as<int>();
  cli::check_range("--layers", layers, 1, 4096);
  std::int64_t const tile_m = vm["tile-m"].as<std::int64_t>();
  std::string const fp4_scales = vm["fp4-scales"].as<std::string>();
  std::optional<fp4::ScaleLayout> const layout = fp4::scale_layout_from_name(fp4_scales);
  if (!layout)
    throw InputError("--fp4-scales: value '" + fp4_scales + "' not one of {tiled, rowmajor}");
  fp4::ScaleLayout const scale_layout = *layout;
  fp4::ValueLayout value_layout = fp4::chain_value_layout(scale_layout);
  if (vm.count("fp4-values")) {
    std::string const fp4_values = vm["fp4-values"].as<std::string>();
    std::optional<fp4::ValueLayout> const vlayout = fp4::value_layout_from_name(fp4_values);
    if (!vlayout)
      throw InputError("--fp4-values: value '" + fp4_values +
                       "' not one of {packed, tiles, nibbles}");
    value_layout = *vlayout;
  }
  if (fp4::packed_words(value_layout) && scale_layout != fp4::ScaleLayout::kTiled)
    throw InputError(std::string("--fp4-values ") + fp4::value_layout_name(value_layout) +
                     ": read by the tiled-scale GEMM only, so it needs --fp4-scales tiled");
  bool wide_gemms = fp4::chain_wide_gemms(value_layout);
  if (vm.count("fp4-gemm")) {
    std::string const fp4_gemm = vm["fp4-gemm"].as<std::string>();
    if (fp4_gemm != "wide" && fp4_gemm != "single")
      throw InputError("--fp4-gemm: value '" + fp4_gemm + "' not one of {wide, single}");
    wide_gemms = fp4_gemm == "wide";
    // The single launch reads no tiled values: without --fp4-values it takes them packed, the
    // same words row-major.
    if (!wide_gemms && !vm.count("fp4-values") && value_layout == fp4::ValueLayout::kTiles)
      value_layout = fp4::ValueLayout::kPacked;
  }
  if (wide_gemms && !fp4::packed_words(value_layout))
    throw InputError("--fp4-gemm wide: built into the packed-value GEMMs only, so it needs "
                     "--fp4-values packed or tiles");
  if (!wide_gemms && value_layout == fp4::ValueLayout::kTiles)
    throw InputError("--fp4-values tiles: read by the GEMMs launched wide only, so it needs "
                     "--fp4-gemm wide");
  // Token counts whose configurations get a stamped replay.
  std::vector<std::int64_t> stamp_tokens;
  if (vm.count("stamps"))
    stamp_tokens = vm["stamps"].as<std::string>() == "all"
                       ? tokens
                       : cli::parse_int_list("--stamps", vm["stamps"].as<std::string>(), 1, 128);
  chain_run::Residency const residency = chain_run::read_residency_options(vm);
  std::vector<std::string> const formats = chain_run::read_weights_formats(vm);
  for (auto const& s : shapes) {
    for (auto T : tokens)
      chain::validate(s, T, tile_m);
    for (auto const& f : formats)
      chain_run::check_weights_format(f, s, tile_m);
  }
  chain_tables::read_published(published + "/whole_op_speedup.csv"); // fail early on a bad path
  std::map<std::string, chain::LayerShape> shape_of;
  std::vector<std::string> shape_names;
  for (auto const& s : shapes) {
    shape_of[s.name] = s;
    shape_names.push_back(s.name);
  }
  bench::Benchmark const bench = layer_benchmark(
      shape_names, shape_of, formats, tokens,
      finalize_rows(vm["finalize"].as<std::string>(), flavour, formats), rounds, layers);
  if (vm.count("list")) {
    bench.list(std::cout);
    return kExitOk;
  }
#ifdef MOEFIN_HAVE_CUDA
  chain_run::require_device("sweep layer");
  auto file = h5::ResultWriter::open(vm["out"].as<std::string>(), vm["resume"].as<std::string>(),
                                     vm["seed"].as<std::uint64_t>());
  std::uint64_t const seed = file.seed();
  chain_run::record(residency, file);
  chain_run::record_flavour(flavour, file);
  // A resumed file keeps its layouts (files from before the attributes: row-major, nibbles).
  file.keep_root_attr("fp4_scales", fp4::scale_layout_name(scale_layout), "rowmajor",
                      "--fp4-scales", "fp4 scale layout");
  file.keep_root_attr("fp4_values", fp4::value_layout_name(value_layout), "nibbles", "--fp4-values",
                      "fp4 value layout");
  file.keep_root_attr("fp4_gemm", wide_gemms ? "wide" : "single", "single", "--fp4-gemm",
                      "fp4 GEMM launch");
  // Numbered on from the timelines a resumed file already holds.
  std::int64_t timelines = 0;
  while (file.has_group("timeline_layer_" + std::to_string(timelines)))
    ++timelines;
  std::string weights_of; // the shape and format whose weights are on the device
  std::unique_ptr<chain::LayerWeights> weights;
  auto body = [&](bench::Unit const& u, std::vector<bench::Config> const& todo,
                  bench::Recorder& rec) {
    chain::LayerShape const& shape = shape_of.at(u.config.str("shape"));
    std::int64_t const T = u.config.num("T");
    std::string const format = u.config.str("weights_format");
    if (weights_of != shape.name + " " + format) {
      weights.reset();
      weights = std::make_unique<chain::LayerWeights>(shape, chain::weight_seed(seed, shape),
                                                      format, scale_layout, value_layout);
      weights_of = shape.name + " " + format;
    }
    chain::RunnerOptions ro;
    ro.tokens = T;
    ro.tile_m = tile_m;
    ro.iterations = layers;
    bool const stamps =
        std::find(stamp_tokens.begin(), stamp_tokens.end(), T) != stamp_tokens.end();
    ro.stamps = stamps;
    ro.wide_gemms = wide_gemms;
    chain_run::apply(residency, ro);
    ro.hidden_seed = Rng::mix(chain::weight_seed(seed, shape), 3);
    chain::ChainRunner runner(*weights, ro);
    std::vector<std::uint64_t> seeds(static_cast<std::size_t>(layers));
    for (int i = 0; i < layers; ++i)
      seeds[static_cast<std::size_t>(i)] = chain::routing_seed(seed, shape, T, i);
    runner.set_routings(seeds);
    // Every row of the unit, not only the missing ones: they are each other's ratio partners.
    std::vector<chain::ChainConfig> cfgs;
    for (auto const& row : u.rows) {
      cfgs.push_back(placement_config(row, flavour));
      runner.time_layers(cfgs.back(), true); // build the graph, warm the caches
      runner.time_layers(cfgs.back(), true);
    }
    auto const t = bench::interleaved_rounds(
        cfgs.size(), rounds, [&](std::size_t c) { return runner.time_layers(cfgs[c], true); });
    for (std::size_t c = 0; c < u.rows.size(); ++c) {
      bench::Measurement m;
      m.samples = t[c];
      m.columns.set("H", shape.hidden)
          .set("I", shape.inter)
          .set("E", shape.experts)
          .set("K", shape.top_k)
          .set("activation", activation::type_name(shape.act))
          .set("finalize_kernel", runner.finalize_variant(cfgs[c]).name)
          .set("tile_m", tile_m)
          .set("layers", layers)
          .set("rounds", rounds);
      rec.add(u.rows[c], std::move(m));
      bool const missing = std::any_of(todo.begin(), todo.end(), [&](bench::Config const& r) {
        return bench.row_key(r) == bench.row_key(u.rows[c]);
      });
      if (stamps && missing)
        chain_run::write_timeline(file, "timeline_layer_" + std::to_string(timelines++),
                                  runner.stamp_layers(cfgs[c], true), bench.row_key(u.rows[c]));
    }
    rec.summary(std::to_string(stats::median(t[0])) + " us/layer (" + bench.row_key(u.rows[0]) +
                ")");
  };
  bench.run(file, bench::RunOptions{}, body);
  file.commit();
  h5::ResultReader reader(file.path());
  chain_run::print_flavour(reader.provenance(), std::cout);
  chain_tables::print_layer_tables(reader.read_table("layer_sweep"), published,
                                   reader.provenance().at("gpu_name"), std::cout);
  return kExitOk;
#else
  throw DeviceError("sweep layer needs a CUDA build (this moefin was built without CUDA)");
#endif
}

} // namespace moefin::cmd
