// moefin sweep routing: the routing implementations of experiments/routing/impls.cpp side by
// side on the seed's shapes at decode token counts — checked first (every array of moefin's
// layout against the Kokkos reference, and bitwise against the block kernel), then timed.
//
// Protocol: per (shape, T) every implementation is one CUDA graph of N launches without the PDL
// attribute, launch i routing its own router scores (seeded, as the chain's), so that no launch
// finds its inputs or outputs as the previous one left them; an empty kernel launched the same
// way gives the launch floor. A warm-up replay, then R interleaved rounds; per-launch time =
// replay time / N; ratio_vs_block = the paired median ratio block/this (above 1: faster).

#include "core/chain/presets.hpp"
#include "core/chain/shape.hpp"
#include "core/cli.hpp"
#include "core/ops/errors.hpp"
#include "core/store/h5store.hpp"
#include "core/stats.hpp"
#include "experiments/chain/run.hpp"
#include "experiments/commands.hpp"
#include "experiments/report/gemm_tables.hpp"
#include "experiments/harness/progress.hpp"
#include "experiments/routing/arrays.hpp"
#include "experiments/routing/impls.hpp"

#ifdef MOEFIN_HAVE_CUDA
#include "core/bf16.hpp"
#include "experiments/harness/graph_timing.hpp"
#include "kernels/common/bench_kernels.hpp"
#include "reference/routing.hpp"
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>

namespace moefin::cmd {

int sweep_routing(cli::Args const& args) {
  namespace po = cli::po;
  po::options_description desc("sweep routing options");
  desc.add_options()("shapes", po::value<std::string>()->default_value("top-8,top-22,top-16"),
                     "layer shapes: top-8, top-22, top-16 or H<h>/I<i>/E<e>/top-<k>[/relu2]")(
      "tokens", po::value<std::string>()->default_value("1:16"), "token counts, 1..128")(
      "impls", po::value<std::string>()->default_value("all"),
      "routing implementations (experiments/routing/impls.cpp), comma-separated, or all")(
      "rounds", po::value<int>()->default_value(5),
      "interleaved rounds, 3..1000")("launches", po::value<int>()->default_value(32),
                                     "launches per graph replay, each on its own routing, 2..1024")(
      "checks", po::value<int>()->default_value(8),
      "routings per (shape, T) checked against the reference first, 0..1024")(
      "tile", po::value<std::int64_t>()->default_value(16),
      "GEMM tile rows of the layout, 1..1024")("print", po::value<std::string>(),
                                               "print the tables of FILE and exit");
  cli::add_result_options(desc, "sweep routing");
  po::variables_map vm;
  if (!cli::parse("sweep routing",
                  "[--shapes S] [--tokens T] [--impls I] [--rounds R] [--launches N] "
                  "[--checks N] [--tile N] [--print FILE] [--out FILE]",
                  desc, args, vm))
    return kExitOk;
  if (vm.count("print")) {
    h5::ResultReader const reader(vm["print"].as<std::string>());
    std::cout << gemm_tables::routing_print(reader);
    return kExitOk;
  }
  auto const shapes = chain::parse_shapes(vm["shapes"].as<std::string>(), "--shapes");
  auto const tokens = cli::parse_int_list("--tokens", vm["tokens"].as<std::string>(), 1, 128);
  auto const impls = routing_bench::select_routing_impls(vm["impls"].as<std::string>(), "--impls");
  int const rounds = vm["rounds"].as<int>();
  cli::check_range("--rounds", rounds, 3, 1000);
  int const launches = vm["launches"].as<int>();
  cli::check_range("--launches", launches, 2, 1024);
  int const nchecks = vm["checks"].as<int>();
  cli::check_range("--checks", nchecks, 0, 1024);
  std::int64_t const tile = vm["tile"].as<std::int64_t>();
  cli::check_range<std::int64_t>("--tile", tile, 1, 1024);
#ifdef MOEFIN_HAVE_CUDA
  chain_run::require_device("sweep routing");
  auto file = h5::ResultWriter::open(vm["out"].as<std::string>(), vm["resume"].as<std::string>(),
                                     vm["seed"].as<std::uint64_t>());
  std::uint64_t const seed = file.seed();
  auto sweep = file.table("routing_sweep", gemm_tables::routing_sweep_columns(),
                          "routing per-launch time (us): CUDA graph of `launches` launches on "
                          "distinct router scores, no PDL attribute, interleaved rounds; impl "
                          "'empty' is an empty kernel launched the same way (the launch floor); "
                          "ratio_vs_block = paired median ratio block/impl; "
                          "ratio_vs_released = released/impl (NaN without the released kernels)");
  std::string const released_note = routing_bench::released_routing_note();
  if (!released_note.empty())
    std::fprintf(stderr, "%s\n", released_note.c_str());
  auto checks = file.table("routing_check", gemm_tables::routing_check_columns(),
                           "per (shape, T, impl): routings whose every layout array equals the "
                           "Kokkos reference's and whose weights are within one bf16 step; "
                           "bitwise_block: every array (weights too) equals the block kernel's");
  dev::Stream s;
  dev::Event e0, e1;
  Progress progress("sweep routing", shapes.size() * tokens.size());
  bool any_fail = false;
  for (auto const& shape : shapes)
    for (std::int64_t T : tokens) {
      routing::RoutingParams const shp =
          routing_arrays::shape(T, shape.experts, shape.top_k, tile, 0, shape.experts);
      std::int64_t const routed = T * shape.top_k;
      std::string const group = shape.name + " T=" + std::to_string(T);
      auto key_of = [&](std::string const& impl) {
        return "shape=" + shape.name + ",T=" + std::to_string(T) + ",tile=" + std::to_string(tile) +
               ",impl=" + impl;
      };
      bool done = sweep.has(key_of("empty"));
      for (auto const& r : impls)
        done = done && (!r.supports(shp) || sweep.has(key_of(r.name)));
      if (done) {
        progress.step(group, true);
        continue;
      }
      // Router scores of every launch, in one buffer.
      std::size_t const per = static_cast<std::size_t>(T * shape.experts);
      std::vector<float> scores(per * static_cast<std::size_t>(launches));
      for (int i = 0; i < launches; ++i) {
        auto const one =
            chain::router_scores(chain::routing_seed(seed, shape, T, i), T, shape.experts);
        std::copy(one.begin(), one.end(), scores.begin() + static_cast<std::ptrdiff_t>(per * i));
      }
      dev::Buffer d_scores;
      d_scores.upload(scores);
      routing_arrays::DeviceRouting out(shp);
      PdlKnobs off;
      off.pdl = false;

      // Checks: the reference of each checked routing, then every implementation on it.
      std::vector<std::vector<std::vector<std::int32_t>>> block_arrays;
      std::vector<std::vector<std::uint16_t>> block_weights;
      // The block kernel is the bitwise reference of the others: checked first even where
      // --impls leaves it out (its check row then stands without a timing row).
      auto checked = impls;
      bool const has_block = std::any_of(impls.begin(), impls.end(),
                                         [](auto const& r) { return r.name == "block"; });
      if (!has_block)
        checked.insert(checked.begin(),
                       routing_bench::select_routing_impls("block", "--impls").front());
      for (auto const& impl : checked) {
        if (!impl.supports(shp) || !impl.moefin_layout || nchecks == 0)
          continue;
        std::int64_t bad_layouts = 0, steps = 0;
        bool bitwise = true;
        int const n = std::min(nchecks, launches);
        for (int i = 0; i < n; ++i) {
          routing_arrays::HostRouting ref(shp, scores.data() + per * static_cast<std::size_t>(i));
          reference::routing(ref.p);
          routing::RoutingParams p = out.p;
          p.scores = d_scores.get<float>() + per * static_cast<std::size_t>(i);
          out.poison(s.get());
          impl.launch(p, off, s.get());
          auto const got = out.arrays(s.get());
          auto const gw = out.weights.download<std::uint16_t>(s.get());
          auto const& w = ref.weights;
          bool const same = got == ref.arrays();
          bad_layouts += !same;
          for (std::size_t e = 0; e < static_cast<std::size_t>(routed); ++e) {
            double const a = bf16_to_float(gw[e]), b = bf16_to_float(w[e]);
            int exp2 = 0;
            std::frexp(b, &exp2); // |b| in [2^(exp2-1), 2^exp2): a bf16 step there is 2^(exp2-8)
            double const step = b == 0 ? 0x1p-133 : std::ldexp(1.0, exp2 - 8);
            steps = std::max<std::int64_t>(
                steps, std::isfinite(a)
                           ? static_cast<std::int64_t>(std::llround(std::fabs(a - b) / step))
                           : 1 << 20);
          }
          if (impl.name == "block") {
            block_arrays.push_back(got);
            block_weights.push_back(std::vector<std::uint16_t>(
                gw.begin(), gw.begin() + static_cast<std::ptrdiff_t>(routed)));
          } else if (static_cast<std::size_t>(i) < block_arrays.size()) {
            bitwise = bitwise && got == block_arrays[static_cast<std::size_t>(i)] &&
                      std::vector<std::uint16_t>(
                          gw.begin(), gw.begin() + static_cast<std::ptrdiff_t>(routed)) ==
                          block_weights[static_cast<std::size_t>(i)];
          } else {
            bitwise = false;
          }
        }
        bool const pass = bad_layouts == 0 && steps <= 1 && (impl.name == "block" || bitwise);
        any_fail = any_fail || !pass;
        if (!checks.has(key_of(impl.name))) {
          h5::Row row;
          row.set("shape", shape.name)
              .set("T", T)
              .set("tile", tile)
              .set("impl", impl.name)
              .set("routings", static_cast<std::int64_t>(n))
              .set("layout_mismatches", bad_layouts)
              .set("weight_steps", steps)
              .set("bitwise_block", impl.name == "block" || bitwise ? 1 : 0)
              .set("pass", pass ? 1 : 0);
          checks.append(key_of(impl.name), row);
        }
        if (!pass)
          std::fprintf(stderr, "sweep routing: CHECK FAILED %s %s\n", group.c_str(),
                       impl.name.c_str());
      }

      // Timing: the implementations and the empty kernel, interleaved.
      std::vector<std::string> names;
      std::vector<int> threads;
      std::vector<dev::Graph> graphs;
      for (auto const& impl : impls) {
        if (!impl.supports(shp))
          continue;
        names.push_back(impl.name);
        threads.push_back(impl.threads ? impl.threads(shp) : 0);
        routing::RoutingParams first = out.p;
        first.scores = d_scores.get<float>();
        impl.launch(first, off, s.get()); // function attributes set outside the capture
        graphs.emplace_back(
            s.get(),
            [&] {
              for (int i = 0; i < launches; ++i) {
                routing::RoutingParams p = out.p;
                p.scores = d_scores.get<float>() + per * static_cast<std::size_t>(i);
                impl.launch(p, off, s.get());
              }
            },
            /*relaxed=*/true);
      }
      names.push_back("empty");
      threads.push_back(32);
      graphs.emplace_back(s.get(), [&] {
        for (int i = 0; i < launches; ++i)
          bench::launch_empty(s.get(), false);
      });
      auto const ms = dev::time_rounds(graphs, rounds, s, e0, e1);
      std::vector<std::vector<double>> us;
      for (auto const& m : ms)
        us.push_back(dev::per_launch_us(m, launches));
      std::string line = group + ":";
      for (std::size_t i = 0; i < names.size(); ++i) {
        auto const st = stats::summarize(us[i]);
        stats::RatioEstimate r{std::nan(""), std::nan(""), std::nan(""), 0};
        if (names[i] != "empty" && names[0] == "block")
          r = stats::paired_ratio(us[0], us[i]);
        stats::RatioEstimate rr{std::nan(""), std::nan(""), std::nan(""), 0};
        auto const rel = std::find(names.begin(), names.end(), routing_bench::kReleasedRouting);
        if (names[i] != "empty" && rel != names.end())
          rr = stats::paired_ratio(us[static_cast<std::size_t>(rel - names.begin())], us[i]);
        h5::Row row;
        row.set("shape", shape.name)
            .set("E", shape.experts)
            .set("K", shape.top_k)
            .set("T", T)
            .set("tile", tile)
            .set("impl", names[i])
            .set("threads", threads[i])
            .set("launches", launches)
            .set("rounds", rounds)
            .set("ratio_vs_block", r.ratio)
            .set("ratio_lo", r.lo)
            .set("ratio_hi", r.hi)
            .set("ratio_vs_released", rr.ratio)
            .set("released_lo", rr.lo)
            .set("released_hi", rr.hi);
        dev::set_times(row, st);
        if (!sweep.has(key_of(names[i])))
          sweep.append(key_of(names[i]), row, us[i]);
        char buf[64];
        std::snprintf(buf, sizeof buf, " %s %.2f us", names[i].c_str(), st.median);
        line += buf;
      }
      progress.step(line);
    }
  progress.finish();
  file.commit(); // a reader accepts only a complete file
  h5::ResultReader const reader(file.path());
  gemm_tables::print_routing_tables(reader, std::cout);
  if (any_fail) {
    std::fprintf(stderr, "sweep routing: a routing check failed (table /routing_check)\n");
    return kExitFailure;
  }
  return kExitOk;
#else
  throw DeviceError("sweep routing needs a CUDA build (this moefin was built without CUDA)");
#endif
}

} // namespace moefin::cmd
