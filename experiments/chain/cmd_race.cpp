// moefin race: the race matrix. Every cell runs the same randomized routings with PDL on and
// compares every buffer of every iteration with PDL off (bitwise, on the GPU), and counts the
// iterations whose finalize read routing metadata before its wait that routing had not written
// yet (stale reads). Each row also holds the verdict of the happens-before verifier on the chain
// the cell ran (chain::verify_cell): a race observed in a chain it orders is a bug of one of them.

#include "core/ops/errors.hpp"
#include "core/pdl/chain.hpp"
#include "core/rng.hpp"
#include "experiments/chain/race_cells.hpp"
#include "experiments/chain/run.hpp"
#include "experiments/commands.hpp"
#include "experiments/harness/bench_state.hpp"
#include "experiments/report/chain_tables.hpp"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace moefin::cmd {

namespace {

/// Summary lines under the matrix: the benchmark cells, the presets that must not race, and the
/// verifier against what was seen. Returns the cells with a race seen in a chain it orders.
std::size_t print_summary(h5::Table const& t, h5::Provenance const& root, std::ostream& os) {
  std::int64_t bench_mis = 0, bench_it = 0;
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> preset_own; // mismatch, stale
  std::map<std::string, std::int64_t> preset_iters;
  for (std::size_t i = 0; i < t.rows; ++i)
    if (race::is_benchmark(race::row_config(t, i, root))) {
      bench_mis += t.ints.at("mismatches")[i];
      bench_it += t.ints.at("iterations")[i];
    }
  os << "benchmark cells (permute, gemm1, act, gemm2 trigger at entry; metadata before the wait; "
        ">= 20 us delay in routing between its trigger and its writes): "
     << bench_mis << "/" << bench_it << " iterations mismatch";
  if (bench_it)
    os << " (" << std::fixed << std::setprecision(1) << 100.0 * bench_mis / bench_it
       << "%, target >= 90%)";
  os << "\n";
  for (std::size_t i = 0; i < t.rows; ++i) {
    std::string const p = t.strings.at("preset")[i];
    preset_own[p].first += t.ints.at("mismatches")[i] > 0;
    preset_own[p].second += t.ints.at("stale_iterations")[i] > 0;
    preset_iters[p] += 1;
  }
  for (auto const& [p, v] : preset_own)
    os << "  " << p << ": " << v.first << " of " << preset_iters[p] << " cells with mismatches, "
       << v.second << " with stale reads\n";
  std::size_t race = 0, observed = 0, contradicted = 0;
  for (std::size_t i = 0; i < t.rows; ++i) {
    bool const v = t.strings.at("verifier")[i] == "race";
    bool const seen = t.ints.at("mismatches")[i] > 0 || t.ints.at("stale_iterations")[i] > 0;
    race += v;
    observed += seen;
    contradicted += seen && !v;
  }
  os << "verifier: " << race << " of " << t.rows << " cells race; " << observed
     << " cells showed a race on the GPU, " << contradicted
     << (contradicted ? " of them in chains the verifier orders (a bug: see ! above)\n"
                      : " of them in chains the verifier orders\n");
  return contradicted;
}

/// The cells of the matrix for every (shape, T): one unit and one row each, keyed
/// "<shape>,T=<T>,<cell key>" (as every /race_matrix so far); the cell's columns are its values.
bench::Benchmark race_benchmark(std::vector<chain::LayerShape> const& shapes,
                                std::vector<std::int64_t> const& tokens,
                                std::vector<race::Cell> const& cells) {
  bench::Benchmark b("race_matrix", chain_tables::race_columns(),
                     "race matrix: iterations with a bitwise mismatch vs PDL off and with stale "
                     "pre-wait reads in finalize, per PDL configuration; verifier = verdict of "
                     "the happens-before verifier on the chain the cell ran "
                     "(chain::verifier_chain)");
  std::vector<bench::Config> units;
  for (auto const& s : shapes)
    for (std::int64_t t : tokens)
      for (std::size_t i = 0; i < cells.size(); ++i) {
        race::Cell const& c = cells[i];
        bench::Config u;
        u.set("shape", s.name)
            .set("T", t)
            .set("preset", c.cfg.preset)
            .set("triggers", c.triggers)
            .set("meta", c.meta)
            .set("delay_ns", c.delay_ns)
            .set("delayed_kernel", c.delayed_kernel)
            .set("cell", static_cast<std::int64_t>(i));
        units.push_back(u);
      }
  b.units(std::move(units));
  b.key([&cells](bench::Config const& r) {
    return r.str("shape") + ",T=" + std::to_string(r.num("T")) + "," +
           cells.at(static_cast<std::size_t>(r.num("cell"))).key;
  });
  return b;
}

} // namespace

int race(cli::Args const& args) {
  namespace po = cli::po;
  po::options_description desc("race options");
  desc.add_options()("shapes", po::value<std::string>()->default_value("top-8"),
                     "layer shapes: top-8, top-22, top-16 or H<h>/I<i>/E<e>/top-<k>[/relu2]")(
      "tokens", po::value<std::string>()->default_value("4"), "token counts, 1..128")(
      "presets", po::value<std::string>()->default_value("seed-before,seed-after,all-early,safe"),
      "PDL presets")("triggers", po::value<std::string>()->default_value("sweep"),
                     "sweep: each kernel's placements one at a time plus all-entry and "
                     "all-after-wait; full: every combination of the four kernels")(
      "meta", po::value<std::string>()->default_value("before,after"),
      "finalize metadata placements")(
      "delay-ns", po::value<std::string>()->default_value("0,3000,25000"),
      "delays injected before the writes of --delay-kernels, 0..10^9 ns")(
      "delay-kernels", po::value<std::string>()->default_value("routing"),
      "kernels that receive the delay")(
      "finalize", po::value<std::string>()->default_value("new"),
      "finalize: new or previous (the dispatch rule with or without small_batch), or a finalize "
      "variant launched whatever the shape")("set", po::value<std::string>()->default_value(""),
                                             "overrides applied to every cell")(
      "iterations", po::value<int>()->default_value(200),
      "routings per cell (one CUDA graph replay), 2..4096")(
      "tile-m", po::value<std::int64_t>()->default_value(16), "GEMM row tile: 16, 32, 64, 128 (bf16-tiled), 8 or 16 (bf16, fp4)")(
      "launch", po::value<std::string>()->default_value("graph"),
      "graph: each cell's iterations in one CUDA graph replay; stream: plain stream launches")(
      "stamps", "record the timelines of the benchmark cells and of each preset's own cell")(
      "describe", "print each cell's chain (the JSON `moefin verify` reads) with the verifier's "
                  "verdict, and exit; no GPU needed")(
      "print", po::value<std::string>(), "print the /race_matrix table of FILE and exit")(
      "list", "print the cells (index, key) and exit; no GPU needed");
  chain_run::add_flavour_option(desc);
  chain_run::add_residency_options(desc, chain_run::Residency{});
  chain_run::add_weights_format_option(desc, "one per run (a file holds one: root attribute "
                                             "weights_format)");
  cli::add_result_options(desc, "race");
  po::variables_map vm;
  if (!cli::parse("race",
                  "[--shapes S] [--tokens T] [--presets P] [--triggers sweep|full] [--meta M] "
                  "[--delay-ns D] [--delay-kernels K] [--weights-format F] [--iterations N] "
                  "[--describe] [--list] "
                  "[--print FILE] [--out FILE]",
                  desc, args, vm))
    return kExitOk;
  if (vm.count("print")) {
    std::string const path = vm["print"].as<std::string>();
    h5::ResultReader reader(path);
    auto t = reader.read_table("race_matrix");
    if (t.rows == 0)
      throw FileError(path, "/race_matrix has no rows");
    std::size_t computed = 0;
    try { // a row the mapping cannot rebuild is a fault of the file, not of the command line
      computed = race::fill_verdicts(t, reader.provenance());
    } catch (InputError const& e) {
      throw FileError(path, e.what());
    }
    chain_run::print_flavour(reader.provenance(), std::cout);
    chain_tables::print_race_matrix(t, std::cout);
    print_summary(t, reader.provenance(), std::cout);
    if (computed)
      std::cout << "(" << computed << " verdicts computed from the rows: the file was written "
                << "before moefin race recorded them)\n";
    return kExitOk;
  }
  race::Axes axes;
  axes.flavour = chain_run::read_flavour_option(vm);
  axes.presets = chain::parse_presets(vm["presets"].as<std::string>(), "--presets");
  std::string const trig = vm["triggers"].as<std::string>();
  cli::check_choice("--triggers", trig, {"sweep", "full"});
  axes.full = trig == "full";
  axes.metas = chain::split_list(vm["meta"].as<std::string>(), "--meta");
  for (auto const& m : axes.metas)
    cli::check_choice("--meta", m, {"before", "after"});
  axes.delays = cli::parse_int_list("--delay-ns", vm["delay-ns"].as<std::string>(), 0, 1000000000);
  axes.delay_kernels =
      chain_run::parse_delay_kernels(vm["delay-kernels"].as<std::string>(), "--delay-kernels");
  chain::ChainConfig choice;
  chain::apply_overrides(choice, "finalize.variant=" + vm["finalize"].as<std::string>(),
                         "--finalize");
  axes.finalize = choice.finalize;
  axes.overrides = vm["set"].as<std::string>();
  std::vector<chain::LayerShape> const shapes =
      chain::parse_shapes(vm["shapes"].as<std::string>(), "--shapes");
  std::vector<std::int64_t> const tokens =
      cli::parse_int_list("--tokens", vm["tokens"].as<std::string>(), 1, 128);
  std::int64_t const tile_m = vm["tile-m"].as<std::int64_t>();
  std::vector<std::string> const formats = chain_run::read_weights_formats(vm);
  if (formats.size() != 1)
    throw InputError("--weights-format: race takes one format per run (its file holds one)");
  std::string const format = formats[0];
  chain::ChainFlavour const& flavour = *chain::flavour_for_format(format);
  for (auto const& shape : shapes) {
    for (std::int64_t T : tokens)
      chain::validate(shape, T, tile_m);
    chain_run::check_weights_format(format, shape, tile_m);
  }
  int const iterations = vm["iterations"].as<int>();
  cli::check_range("--iterations", iterations, 2, 4096);
  auto const cells = race::cells(axes);
  std::string const launch = vm["launch"].as<std::string>();
  cli::check_choice("--launch", launch, {"graph", "stream"});
  if (vm.count("describe")) {
    for (auto const& shape : shapes)
      for (std::int64_t T : tokens)
        for (auto const& c : cells) {
          finalize::FinalizeVariant const& variant =
              race::planned_finalize_variant(shape, T, c.cfg);
          chain::CellVerdict const v =
              chain::verify_cell(c.cfg, variant, launch == "graph", flavour);
          std::cout << "# " << shape.name << ",T=" << T << "," << c.key
                    << (c.benchmark ? " (benchmark)" : "") << ": finalize " << variant.name
                    << ", verifier " << pdl::verdict_name(v.chain) << " (" << v.races << " of "
                    << v.pairs << " pairs race)\n"
                    << chain::chain_json(c.cfg, variant, launch == "graph", flavour);
        }
    return kExitOk;
  }
  bench::Benchmark const bench = race_benchmark(shapes, tokens, cells);
  if (vm.count("list")) {
    bench.list(std::cout);
    return kExitOk;
  }
#ifdef MOEFIN_HAVE_CUDA
  chain_run::require_device("race");
  auto file = h5::ResultWriter::open(vm["out"].as<std::string>(), vm["resume"].as<std::string>(),
                                     vm["seed"].as<std::uint64_t>());
  std::uint64_t const seed = file.seed();
  bool const stamps = vm.count("stamps") > 0;
  chain_run::Residency const residency = chain_run::read_residency_options(vm);
  chain_run::record(residency, file);
  file.set_attr("/", "launch", launch); // a file holds one launch mode: keys do not name it
  auto const recorded = file.provenance().find("overrides");
  if (recorded != file.provenance().end() && recorded->second != axes.overrides)
    throw InputError("--set: '" + axes.overrides + "' differs from '" + recorded->second +
                     "', the overrides the rows of the resumed file ran with");
  file.set_attr("/", "overrides", axes.overrides); // race::row_config rebuilds the cells with it
  chain_run::record_flavour(axes.flavour, file);
  auto const recorded_format = file.provenance().find("weights_format");
  if (recorded_format != file.provenance().end() && recorded_format->second != format)
    throw InputError("--weights-format: '" + format + "' differs from '" + recorded_format->second +
                     "', the format the rows of the resumed file ran");
  file.set_attr("/", "weights_format", format); // keys do not name it: one format per file
  // One runner per (shape, T) at a time (units come grouped by them), its PDL-off batches per
  // metadata placement (delays do not change a PDL-off run).
  std::unique_ptr<chain::LayerWeights> weights;
  std::unique_ptr<chain::ChainRunner> runner;
  std::string runner_of;
  std::vector<std::uint64_t> seeds;
  std::map<std::string, chain::BatchResult> off;
  std::int64_t timelines = 0;
  auto body = [&](bench::Unit const& u, std::vector<bench::Config> const&, bench::Recorder& rec) {
    chain::LayerShape const& sh =
        *std::find_if(shapes.begin(), shapes.end(),
                      [&](chain::LayerShape const& x) { return x.name == u.config.str("shape"); });
    std::int64_t const t = u.config.num("T");
    race::Cell const& c = cells.at(static_cast<std::size_t>(u.config.num("cell")));
    std::string const key = bench.row_key(u.config);
    std::string const which = sh.name + ",T=" + std::to_string(t);
    if (runner_of != which) {
      runner.reset();
      if (!weights || weights->shape().name != sh.name)
        weights = std::make_unique<chain::LayerWeights>(sh, chain::weight_seed(seed, sh), format);
      chain::RunnerOptions ro;
      ro.tokens = t;
      ro.tile_m = tile_m;
      ro.iterations = iterations;
      ro.stamps = stamps;
      ro.stream_launch = launch == "stream";
      chain_run::apply(residency, ro);
      ro.hidden_seed = Rng::mix(chain::weight_seed(seed, sh), 3);
      runner = std::make_unique<chain::ChainRunner>(*weights, ro);
      seeds.assign(static_cast<std::size_t>(iterations), 0);
      for (int i = 0; i < iterations; ++i)
        seeds[static_cast<std::size_t>(i)] = chain::routing_seed(seed, sh, t, i);
      runner->set_routings(seeds);
      off.clear();
      runner_of = which;
    }
    if (!off.count(c.meta)) {
      chain::ChainConfig quiet = c.cfg;
      for (chain::Kernel k : chain::kAllKernels)
        quiet.at(k).delay_ns = 0;
      off[c.meta] = runner->run_batch(quiet, false);
    }
    finalize::FinalizeVariant const& variant = runner->finalize_variant(c.cfg);
    finalize::FinalizeVariant const& planned = race::planned_finalize_variant(sh, t, c.cfg);
    if (&variant != &planned)
      throw std::logic_error("race: finalize picked " + variant.name + " on the device but " +
                             planned.name + " in --describe's prediction for " + key);
    chain::CellVerdict const verdict =
        chain::verify_cell(c.cfg, variant, launch == "graph", flavour);
    auto const on = runner->run_batch(c.cfg, true);
    chain_run::Series s;
    chain_run::add_batch(s, on, off[c.meta], seeds);
    bench::Measurement m;
    m.columns.set("finalize", variant.name)
        .set("iterations", s.routings)
        .set("mismatches", s.mismatches)
        .set("stale_reads", s.stale)
        .set("stale_iterations", s.stale_iterations)
        .set("recorded_reads", s.recorded)
        .set("first_buffer",
             s.mismatches ? chain::buffer_name(static_cast<chain::Buffer>(s.first_buffer)) : "")
        .set("verifier", pdl::verdict_name(verdict.chain));
    rec.add(u.config, std::move(m));
    if (stamps &&
        (c.benchmark || (c.own && c.meta == "before" && c.delay_ns == axes.delays.back())))
      chain_run::write_timeline(file, "timeline_race_" + std::to_string(timelines++),
                                runner->timeline(), key);
    rec.summary(std::to_string(s.mismatches) + "/" + std::to_string(s.routings) + " mismatches, " +
                std::to_string(s.stale_iterations) + " stale iterations; verifier " +
                pdl::verdict_name(verdict.chain));
  };
  bench.run(file, bench::RunOptions{}, body);
  file.commit();
  h5::ResultReader reader(file.path());
  auto t = reader.read_table("race_matrix");
  race::fill_verdicts(t, reader.provenance()); // rows of a resumed file that predates the column
  chain_run::print_flavour(reader.provenance(), std::cout);
  chain_tables::print_race_matrix(t, std::cout);
  // A race in a chain the verifier orders is a failed check (of the verifier or of the mapping).
  return print_summary(t, reader.provenance(), std::cout) == 0 ? kExitOk : kExitFailure;
#else
  throw DeviceError("race needs a CUDA build (this moefin was built without CUDA)");
#endif
}

} // namespace moefin::cmd
