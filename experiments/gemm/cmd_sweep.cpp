// moefin sweep gemm: the decode GEMMs of the seed's layer shapes alone — GEMM1 and GEMM2, bf16
// and fp4 weights, the tiled and the split-K variant — checked against the Kokkos reference,
// then timed against the copy bandwidth of the same run.
//
// Protocol: per (shape, T) every configuration (GEMM, weights, variant, mode) is one CUDA graph
// of N launches, each on its own routing (seeded router scores through the reference routing),
// so that consecutive launches read other experts' weights; N is the smallest count >= 2 whose
// weights add up to --min-mb (defeating the 60 MB L2 between replays). A warm-up replay of each
// graph, then R rounds in which every graph runs once (the first one rotating); per-launch time
// = replay time / N. Bytes of a launch = the weights (and fp4 scales) of its active experts,
// each read once. Modes: `isolated` (no PDL attribute: each launch starts after the previous
// one ends) and `pdl` (attribute on, trigger at entry, and for splitk the first stages of
// weights read before the wait, as in a chain whose expert map is final: the next launch streams
// weights while the previous one finishes).

#include "core/bf16.hpp"
#include "core/chain/presets.hpp"
#include "core/chain/shape.hpp"
#include "core/cli.hpp"
#include "core/store/h5store.hpp"
#include "core/ops/errors.hpp"
#include "core/rng.hpp"
#include "core/stats.hpp"
#include "experiments/chain/run.hpp"
#include "experiments/commands.hpp"
#include "experiments/harness/progress.hpp"
#include "experiments/harness/run_limit.hpp"
#include "experiments/report/gemm_tables.hpp"
#include "kernels/gemm/decode.hpp"
#include "kernels/gemm/decode_candidates.hpp"

#ifdef MOEFIN_HAVE_CUDA
#include "experiments/gemm/decode_problem.hpp"
#include "experiments/harness/graph_timing.hpp"
#include "kernels/common/bench_kernels.hpp"
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

namespace moefin::cmd {

namespace {

struct GemmAxis {
  int which = 1; // 1: gate/up (k = H), 2: down (k = I)
  std::int64_t n(chain::LayerShape const& s) const { return which == 1 ? s.gemm1_n() : s.hidden; }
  std::int64_t k(chain::LayerShape const& s) const { return which == 1 ? s.hidden : s.inter; }
  std::string name() const { return which == 1 ? "gemm1" : "gemm2"; }
};

struct Config {
  GemmAxis gemm;
  gemm::WeightFormat format;
  gemm::Variant variant;
  bool pdl;
  bool loads_only = false; // the splitk diagnostic without math (variant name splitk_loads)
  // A --candidates policy of splitk (its name is the variant column), or, with `read`, the
  // --read-floor reference: a plain streaming read of the same bytes per launch.
  bool candidate = false;
  gemm::DecodeCandidate cand;
  bool read = false;
  std::string mode() const { return pdl ? "pdl" : "isolated"; }
  std::string variant_name() const {
    if (read)
      return gemm_tables::kReadFloor;
    if (candidate)
      return cand.name;
    return loads_only ? gemm_tables::kSplitkLoads : gemm::variant_name(variant);
  }
  bool gemm_math() const { return !read && !loads_only && !(candidate && cand.loads_only); }
  /// Why this configuration does not run on `shape` (empty: it does).
  std::string skip_reason(chain::LayerShape const& shape, std::int64_t tile) const {
    return candidate ? gemm::candidate_skip_reason(cand, format, gemm.k(shape), tile) : "";
  }
};

std::string key_of(chain::LayerShape const& s, std::int64_t T, Config const& c) {
  return "shape=" + s.name + ",T=" + std::to_string(T) + ",gemm=" + c.gemm.name() +
         ",format=" + gemm::weight_format_name(c.format) + ",variant=" + c.variant_name() +
         ",mode=" + c.mode();
}

/// Expected distinct experts of T tokens choosing K of E uniformly (for the time estimate).
double expected_experts(std::int64_t T, std::int64_t E, std::int64_t K) {
  return static_cast<double>(E) *
         (1.0 -
          std::pow(1.0 - static_cast<double>(K) / static_cast<double>(E), static_cast<double>(T)));
}

std::uint64_t gemm_weight_seed(std::uint64_t base, chain::LayerShape const& s, int which,
                               gemm::WeightFormat f) {
  return Rng::mix(chain::weight_seed(base, s),
                  static_cast<std::uint64_t>(which * 16 + static_cast<int>(f)));
}

} // namespace

int sweep_gemm(cli::Args const& args) {
  namespace po = cli::po;
  po::options_description desc("sweep gemm options");
  desc.add_options()("shapes", po::value<std::string>()->default_value("top-8,top-22,top-16"),
                     "layer shapes: top-8, top-22, top-16 or H<h>/I<i>/E<e>/top-<k>[/relu2]")(
      "tokens", po::value<std::string>()->default_value("1:16"),
      "token counts, 1..64")("gemms", po::value<std::string>()->default_value("1,2"),
                             "1 (gate/up, k = H), 2 (down, k = I)")(
      "formats", po::value<std::string>()->default_value("bf16,fp4"), "weight formats: bf16, fp4")(
      "variants", po::value<std::string>()->default_value("tiled,splitk"),
      "GEMM variants: tiled (bf16 only), splitk")(
      "modes", po::value<std::string>()->default_value("isolated,pdl"),
      "isolated (no PDL attribute), pdl (attribute, trigger at entry, splitk weights before the "
      "wait)")("rounds", po::value<int>()->default_value(5), "interleaved rounds, 3..100")(
      "min-mb", po::value<int>()->default_value(128),
      "weights a graph replay reads at least (MB; the L2 is 60 MB), 16..4096")(
      "check-tokens", po::value<std::string>()->default_value("1,4"),
      "token counts whose GEMMs are checked against the Kokkos reference first ('none': none)")(
      "tile-m", po::value<std::int64_t>()->default_value(16), "routing tile (rows): 8 or 16")(
      "ctas-per-sm", po::value<int>()->default_value(0),
      "CTAs per SM of the GEMM grids, 0..4 (0: each variant's policy)")(
      "max-minutes", po::value<double>()->default_value(0.0),
      "stop cleanly between (shape, T) groups when the next would end past this; 0: no limit")(
      "candidates", po::value<std::string>()->default_value("none"),
      "splitk launch policies timed beside the variants: comma-separated '+'-joined knobs ks1, "
      "ks2, ks4, ks8 (forced split), cta2 (two CTAs per SM), deep (fp4: twice the stages in "
      "flight per warp), tscale (fp4 scales in 16 x 128 tiles, 16-byte copies), wpack (tscale "
      "and fp4 values bit-permuted: fewer instructions to dequantize), wide (wpack with two "
      "warp-stages per pipeline stage), tiles (wide on fp4 values whose warp-stages are "
      "contiguous), lean (with tscale, wpack, wide or tiles: leaner activation loads), loads (no "
      "math, isolated only), "
      "e.g. ks4,cta2+ks8; 'default' for kernels/gemm/decode_candidates.hpp's list; 'none'")(
      "read-floor", po::bool_switch(),
      "also time a plain streaming read of each launch's bytes (variant read, isolated): the "
      "time any kernel needs to read that much in this protocol")(
      "no-diagnose", po::bool_switch(),
      "leave out splitk_loads: splitk with every load and store but no dequantization or MMA "
      "(isolated mode, tile 16), whose time against splitk's says whether math or memory bounds "
      "it")("estimate", po::bool_switch(), "print the expected run time and exit")(
      "print", po::value<std::string>(), "print the tables of FILE and exit");
  cli::add_result_options(desc, "sweep gemm");
  po::variables_map vm;
  if (!cli::parse("sweep gemm",
                  "[--shapes S] [--tokens T] [--gemms G] [--formats F] [--variants V] [--modes M] "
                  "[--rounds R] [--min-mb MB] [--check-tokens T] [--candidates C] [--read-floor] "
                  "[--max-minutes M] [--estimate] "
                  "[--print FILE] [--out FILE]",
                  desc, args, vm))
    return kExitOk;
  if (vm.count("print")) {
    h5::ResultReader const reader(vm["print"].as<std::string>());
    std::cout << gemm_tables::gemm_print(reader);
    return kExitOk;
  }
  auto const shapes = chain::parse_shapes(vm["shapes"].as<std::string>(), "--shapes");
  auto const tokens = cli::parse_int_list("--tokens", vm["tokens"].as<std::string>(), 1, 64);
  std::vector<GemmAxis> gemms;
  for (auto g : cli::parse_int_list("--gemms", vm["gemms"].as<std::string>(), 1, 2))
    gemms.push_back(GemmAxis{static_cast<int>(g)});
  std::vector<gemm::WeightFormat> formats;
  for (auto const& f : chain::split_list(vm["formats"].as<std::string>(), "--formats")) {
    gemm::WeightFormat w{};
    if (!gemm::parse_weight_format(f, &w))
      throw InputError("--formats: '" + f + "' is not one of bf16, fp4");
    formats.push_back(w);
  }
  std::vector<gemm::Variant> variants;
  for (auto const& v : chain::split_list(vm["variants"].as<std::string>(), "--variants")) {
    gemm::Variant x{};
    if (!gemm::parse_variant(v, &x))
      throw InputError("--variants: '" + v + "' is not one of tiled, splitk");
    variants.push_back(x);
  }
  std::vector<bool> modes;
  for (auto const& m : chain::split_list(vm["modes"].as<std::string>(), "--modes")) {
    cli::check_choice("--modes", m, {"isolated", "pdl"});
    modes.push_back(m == "pdl");
  }
  int const rounds = vm["rounds"].as<int>();
  cli::check_range("--rounds", rounds, 3, 100);
  int const min_mb = vm["min-mb"].as<int>();
  cli::check_range("--min-mb", min_mb, 16, 4096);
  std::vector<std::int64_t> check_tokens;
  if (vm["check-tokens"].as<std::string>() != "none")
    check_tokens =
        cli::parse_int_list("--check-tokens", vm["check-tokens"].as<std::string>(), 1, 64);
  std::int64_t const tile = vm["tile-m"].as<std::int64_t>();
  if (tile != 8 && tile != 16)
    throw InputError("--tile-m: value " + std::to_string(tile) + " not one of {8, 16}");
  int const ctas_per_sm = vm["ctas-per-sm"].as<int>();
  cli::check_range("--ctas-per-sm", ctas_per_sm, 0, 4);
  double const max_minutes = vm["max-minutes"].as<double>();
  cli::check_range("--max-minutes", max_minutes, 0.0, 1e6);
  std::string const cand_list = vm["candidates"].as<std::string>();
  auto const candidates = gemm::parse_candidates(
      cand_list == "default" ? std::string(gemm::kDefaultCandidates) : cand_list, "--candidates");
  bool const has_splitk =
      std::find(variants.begin(), variants.end(), gemm::Variant::kSplitK) != variants.end();
  if (!candidates.empty() && !has_splitk)
    throw InputError("--candidates: candidates are policies of variant splitk, which --variants "
                     "leaves out");

  // Configurations of one (shape, T): tiled runs bf16 weights at tile 16 or more only.
  std::vector<Config> configs;
  for (GemmAxis g : gemms)
    for (auto f : formats)
      for (auto v : variants)
        for (bool pdl : modes) {
          if (v == gemm::Variant::kTiled && (f != gemm::WeightFormat::kBf16 || tile < 16))
            continue;
          configs.push_back(Config{g, f, v, pdl});
        }
  if (!vm["no-diagnose"].as<bool>() && tile == 16)
    for (GemmAxis g : gemms)
      for (auto f : formats)
        if (has_splitk)
          configs.push_back(Config{g, f, gemm::Variant::kSplitK, false, true});
  for (GemmAxis g : gemms)
    for (auto f : formats) {
      for (auto const& cand : candidates)
        for (bool pdl : modes) {
          if (cand.loads_only && pdl)
            continue; // a diagnostic: isolated, like splitk_loads
          Config c{g, f, gemm::Variant::kSplitK, pdl};
          c.candidate = true;
          c.cand = cand;
          configs.push_back(c);
        }
      if (vm["read-floor"].as<bool>()) {
        Config c{g, f, gemm::Variant::kSplitK, false};
        c.read = true;
        configs.push_back(c);
      }
    }
  if (configs.empty())
    throw InputError("--variants/--formats: no configuration left (tiled takes bf16 at tile 16)");
  for (auto const& s : shapes)
    for (auto T : tokens)
      chain::validate(s, T, 16);
  for (auto const& s : shapes)
    for (Config const& c : configs) {
      std::string const why = c.skip_reason(s, tile);
      if (!why.empty() && c.pdl == modes.front())
        std::printf("sweep gemm: %s %s %s on %s skipped: %s\n", c.gemm.name().c_str(),
                    gemm::weight_format_name(c.format), c.variant_name().c_str(), s.name.c_str(),
                    why.c_str());
    }

  // Bytes a group reads over its warm-up and rounds, at an assumed 3 TB/s, plus set-up.
  auto group_seconds = [&](chain::LayerShape const& s, std::int64_t T) {
    double const experts = expected_experts(T, s.experts, s.top_k);
    double bytes = 0;
    for (Config const& c : configs) {
      double const launch =
          experts *
          static_cast<double>(gemm::expert_weight_bytes(c.format, c.gemm.n(s), c.gemm.k(s)));
      bytes += std::max(2.0 * launch, min_mb * 1e6) * (rounds + 1);
    }
    return bytes / 3e12 + 0.2;
  };
  if (vm["estimate"].as<bool>()) {
    double total = 0;
    for (auto const& s : shapes) {
      total += 0.5; // weights generated on the device
      for (auto T : tokens)
        total += group_seconds(s, T);
    }
    std::printf("sweep gemm: %zu shapes x %zu token counts x %zu configurations, %d rounds: "
                "about %.1f s of GPU time (plus the host reference checks)\n",
                shapes.size(), tokens.size(), configs.size(), rounds, total);
    return kExitOk;
  }
#ifdef MOEFIN_HAVE_CUDA
  chain_run::require_device("sweep gemm");
  auto file = h5::ResultWriter::open(vm["out"].as<std::string>(), vm["resume"].as<std::string>(),
                                     vm["seed"].as<std::uint64_t>());
  std::uint64_t const seed = file.seed();
  file.set_attr("/", "tile_m", std::to_string(tile));
  file.set_attr("/", "ctas_per_sm", std::to_string(ctas_per_sm));
  file.set_attr("/", "carveout", "max-shared");
  dev::Stream s;
  dev::Event e0, e1;
  auto bw_table = file.table("copy_bandwidth", gemm_tables::bandwidth_columns(),
                             "device-to-device cudaMemcpy of 256 MiB, bytes read plus written, "
                             "at the start and the end of the run");
  auto rd_table = file.table("read_bandwidth", gemm_tables::bandwidth_columns(),
                             "a streaming 128-bit read of 1 GiB (bench::launch_read_stream)");
  auto measure_bandwidths = [&](std::string const& at) {
    dev::CopyBandwidth const c = dev::measure_copy_bandwidth(rounds, s, e0, e1);
    std::size_t const rbytes = std::size_t(1) << 30;
    dev::Buffer src(rbytes), sink(16);
    src.fill(0x5a, s.get());
    std::vector<dev::Graph> g;
    g.emplace_back(s.get(), [&] {
      bench::launch_read_stream(src.get(), rbytes, sink.get<unsigned>(), s.get());
    });
    auto const rus = dev::per_launch_us(dev::time_rounds(g, rounds, s, e0, e1)[0], 1);
    double const rgbps = static_cast<double>(rbytes) / (stats::median(rus) * 1e3);
    std::string const tag = ",at=" + at;
    auto add = [&](h5::TableWriter& t, std::size_t bytes, double gbps,
                   std::vector<double> const& us, int launches) {
      std::string const key = "bytes=" + std::to_string(bytes) + tag;
      if (t.has(key))
        return;
      h5::Row row;
      row.set("at", at)
          .set("bytes", static_cast<std::int64_t>(bytes))
          .set("gbps", gbps)
          .set("median_us", stats::median(us))
          .set("min_us", *std::min_element(us.begin(), us.end()))
          .set("rounds", rounds)
          .set("launches", launches);
      t.append(key, row, us);
    };
    add(bw_table, c.bytes, c.gbps, c.us, c.copies);
    add(rd_table, rbytes, rgbps, rus, 1);
    std::printf("copy bandwidth (%s): %.0f GB/s (read + write); read bandwidth: %.0f GB/s\n",
                at.c_str(), c.gbps, rgbps);
    return std::make_pair(c.gbps, rgbps);
  };
  auto const [copy_gbps, read_gbps] = measure_bandwidths("start");
  auto sweep = file.table("gemm_sweep", gemm_tables::gemm_sweep_columns(),
                          "decode GEMM per-launch time (us): CUDA graph of `launches` launches on "
                          "distinct routings, interleaved rounds; bytes = weights (+ fp4 scales) "
                          "of the active experts per launch; copy_fraction = gbps / the run's "
                          "copy bandwidth at the start; speedup_vs_tiled = paired median ratio "
                          "tiled/this (bf16, same GEMM and mode)");
  auto checks = file.table("gemm_check", gemm_tables::gemm_check_columns(),
                           "GEMM output vs the Kokkos reference on the first routing of a "
                           "(shape, T): max |out - exact| <= 2 max |naive fp32 - exact| + 1e-6 "
                           "peak, over the real rows");
  RunLimit const limit(max_minutes);
  Progress progress("sweep gemm", shapes.size() * tokens.size());
  bool any_fail = false, stopped = false;
  for (auto const& shape : shapes) {
    std::map<std::pair<int, int>, std::unique_ptr<decode_bench::ExpertWeights>> weights;
    auto weights_of = [&](Config const& c) -> decode_bench::ExpertWeights const& {
      auto& w = weights[{c.gemm.which, static_cast<int>(c.format)}];
      if (!w)
        w = std::make_unique<decode_bench::ExpertWeights>(
            c.format, shape.experts, c.gemm.n(shape), c.gemm.k(shape),
            gemm_weight_seed(seed, shape, c.gemm.which, c.format));
      return *w;
    };
    for (std::int64_t T : tokens) {
      std::string const group = shape.name + " T=" + std::to_string(T);
      bool done = true;
      for (Config const& c : configs)
        done = done && (sweep.has(key_of(shape, T, c)) || !c.skip_reason(shape, tile).empty());
      if (done) {
        progress.step(group, true);
        continue;
      }
      if (stopped || !limit.allows(group_seconds(shape, T))) {
        stopped = true;
        std::fprintf(stderr, "sweep gemm: --max-minutes reached before %s; --resume continues\n",
                     group.c_str());
        break;
      }
      // Routings of this (shape, T), made as the graphs need them.
      std::vector<std::unique_ptr<decode_bench::RoutedLayout>> layouts;
      auto layout = [&](std::size_t i) -> decode_bench::RoutedLayout const& {
        while (layouts.size() <= i)
          layouts.push_back(std::make_unique<decode_bench::RoutedLayout>(
              T, shape.experts, shape.top_k, tile,
              chain::routing_seed(seed, shape, T, static_cast<std::int64_t>(layouts.size()))));
        return *layouts[i];
      };
      std::int64_t const rows = layout(0).max_rows;
      std::uint64_t const act_seed = Rng::mix(chain::weight_seed(seed, shape), 100 + T);
      std::map<int, std::vector<std::uint16_t>> a_host;
      std::map<int, dev::Buffer> a_dev, c_dev;
      for (GemmAxis g : gemms) {
        std::int64_t const k = g.k(shape), n = g.n(shape);
        std::vector<std::uint16_t> a(static_cast<std::size_t>(rows * k));
        Rng rng(Rng::mix(act_seed, static_cast<std::uint64_t>(g.which)));
        for (auto& x : a) // every row, padding ones too: a kernel must not read them
          x = float_to_bf16(static_cast<float>(rng.next() & 1 ? -rng.uniform(0.05, 1.0)
                                                              : rng.uniform(0.05, 1.0)));
        a_dev[g.which].upload(a);
        a_host[g.which] = std::move(a);
        c_dev[g.which] = dev::Buffer(static_cast<std::size_t>(rows * n * 2));
      }
      auto options = [&](Config const& c) {
        gemm::DecodeOptions o;
        o.pdl.pdl = c.pdl;
        o.pdl.trigger = c.pdl ? Trigger::kEntry : Trigger::kDefault;
        o.pdl.ctas_per_sm = ctas_per_sm;
        o.pdl.max_shared_carveout = true; // room for two CTAs per SM (see decode_plan.hpp)
        o.weights_before_wait = c.pdl && c.variant == gemm::Variant::kSplitK;
        o.loads_only = c.loads_only;
        return c.candidate ? gemm::candidate_options(c.cand, o) : o;
      };
      auto params_of = [&](Config const& c, decode_bench::RoutedLayout const& l) {
        auto const& w = weights_of(c);
        return decode_bench::params(
            w, l, a_dev[c.gemm.which].get(), c_dev[c.gemm.which].get(), c.gemm.n(shape),
            c.candidate ? gemm::candidate_layout(c.cand) : fp4::ScaleLayout::kRowMajor,
            c.candidate ? gemm::candidate_value_layout(c.cand) : fp4::ValueLayout::kNibbles);
      };

      // Checks first: each (GEMM, weights, variant) on the first routing.
      std::map<std::string, std::string> verdict; // (gemm, format, variant) -> pass / fail
      auto vkey = [](Config const& c) {
        return c.gemm.name() + "/" + gemm::weight_format_name(c.format) + "/" + c.variant_name();
      };
      if (std::find(check_tokens.begin(), check_tokens.end(), T) != check_tokens.end()) {
        std::map<std::pair<int, int>, reference::GemmOracle> oracles;
        for (Config const& c : configs) {
          if (c.pdl || !c.gemm_math() || verdict.count(vkey(c)) ||
              !c.skip_reason(shape, tile).empty())
            continue;
          auto& o = oracles[{c.gemm.which, static_cast<int>(c.format)}];
          if (o.exact.empty())
            o = decode_bench::oracle(weights_of(c), layout(0), a_host[c.gemm.which]);
          auto const p = params_of(c, layout(0));
          c_dev[c.gemm.which].fill(0xff, s.get());
          gemm::DecodeOptions plain;
          plain.pdl.pdl = false;
          plain.pdl.ctas_per_sm = ctas_per_sm;
          if (c.candidate)
            plain = gemm::candidate_options(c.cand, plain);
          gemm::run_decode(p, c.variant, plain, s.get());
          auto const out = c_dev[c.gemm.which].download<std::uint16_t>(s.get());
          reference::GemmCheck const r =
              reference::check_gemm(out, c.gemm.n(shape), c.gemm.n(shape), o);
          int const ks = c.variant == gemm::Variant::kSplitK
                             ? gemm::split_of(p, layout(0).tiles(),
                                              gemm::num_ctas(p, c.variant, plain.pdl.ctas_per_sm),
                                              plain.split_k)
                                   .ks
                             : 0;
          verdict[vkey(c)] = r.pass ? "pass" : "fail";
          any_fail = any_fail || !r.pass;
          std::string const key =
              "shape=" + shape.name + ",T=" + std::to_string(T) + ",gemm=" + c.gemm.name() +
              ",format=" + gemm::weight_format_name(c.format) + ",variant=" + c.variant_name();
          if (!checks.has(key)) {
            h5::Row row;
            row.set("shape", shape.name)
                .set("T", T)
                .set("gemm", c.gemm.name())
                .set("format", gemm::weight_format_name(c.format))
                .set("variant", c.variant_name())
                .set("tile_m", tile)
                .set("ks", ks)
                .set("checked", r.checked)
                .set("max_err", r.max_err)
                .set("naive_err", r.naive_err)
                .set("tolerance", r.tolerance)
                .set("peak", r.peak)
                .set("worst", r.worst)
                .set("pass", r.pass ? 1 : 0);
            checks.append(key, row);
          }
          if (!r.pass)
            std::fprintf(stderr, "sweep gemm: CHECK FAILED %s T=%lld %s: max err %.4g > %.4g\n",
                         shape.name.c_str(), static_cast<long long>(T), vkey(c).c_str(), r.max_err,
                         r.tolerance);
        }
      }

      // One graph per configuration.
      struct Built {
        Config c;
        int launches = 0;
        double experts = 0, bytes = 0;
        gemm::DecodeSplit split;
        std::int64_t ctas = 0;
        dev::Graph graph;
        std::unique_ptr<dev::Buffer> stream_src; // read: the launches' slices, back to back
      };
      std::vector<Built> built;
      dev::Buffer sink(16);
      for (Config const& c : configs) {
        if (!c.skip_reason(shape, tile).empty())
          continue;
        Built b;
        b.c = c;
        auto const& w = weights_of(c);
        double const first = static_cast<double>(layout(0).active_experts().size()) *
                             static_cast<double>(w.bytes_per_expert());
        b.launches =
            static_cast<int>(std::clamp(std::ceil(min_mb * 1e6 / std::max(first, 1.0)), 2.0, 64.0));
        for (int i = 0; i < b.launches; ++i) {
          double const ex =
              static_cast<double>(layout(static_cast<std::size_t>(i)).active_experts().size());
          b.experts += ex / b.launches;
          b.bytes += ex * static_cast<double>(w.bytes_per_expert()) / b.launches;
        }
        gemm::DecodeOptions const o = options(c);
        if (c.read) {
          // The same mean bytes per launch, each launch on its own slice (no L2 reuse).
          std::size_t const slice = static_cast<std::size_t>(std::llround(b.bytes / 64.0)) * 64;
          b.stream_src = std::make_unique<dev::Buffer>(slice * b.launches);
          b.stream_src->fill(0x5a, s.get());
          b.graph = dev::Graph(s.get(), [&] {
            for (int i = 0; i < b.launches; ++i)
              bench::launch_read_stream(b.stream_src->get<std::uint8_t>() + slice * i, slice,
                                        sink.get<unsigned>(), s.get());
          });
          built.push_back(std::move(b));
          continue;
        }
        auto const p0 = params_of(c, layout(0));
        b.ctas = gemm::num_ctas(p0, c.variant, o.pdl.ctas_per_sm);
        if (c.variant == gemm::Variant::kSplitK)
          b.split = gemm::split_of(p0, layout(0).tiles(), b.ctas, o.split_k);
        b.graph = dev::Graph(
            s.get(),
            [&] {
              for (int i = 0; i < b.launches; ++i)
                gemm::run_decode(params_of(c, layout(static_cast<std::size_t>(i))), c.variant, o,
                                 s.get());
            },
            /*relaxed=*/true);
        built.push_back(std::move(b));
      }
      std::vector<dev::Graph> graphs;
      for (auto& b : built)
        graphs.push_back(std::move(b.graph));
      auto const ms = dev::time_rounds(graphs, rounds, s, e0, e1);
      std::vector<std::vector<double>> us(built.size());
      for (std::size_t i = 0; i < built.size(); ++i)
        us[i] = dev::per_launch_us(ms[i], built[i].launches);
      double best_gbps = 0;
      for (std::size_t i = 0; i < built.size(); ++i) {
        Built const& b = built[i];
        Config const& c = b.c;
        auto const st = stats::summarize(us[i]);
        double const gbps = b.bytes / (st.median * 1e3);
        if (c.gemm_math())
          best_gbps = std::max(best_gbps, gbps);
        stats::RatioEstimate sp{std::nan(""), std::nan(""), std::nan(""), 0};
        if (c.variant == gemm::Variant::kSplitK && c.gemm_math() &&
            c.format == gemm::WeightFormat::kBf16)
          for (std::size_t j = 0; j < built.size(); ++j) {
            Config const& o = built[j].c;
            if (o.variant == gemm::Variant::kTiled && o.gemm.which == c.gemm.which &&
                o.pdl == c.pdl)
              sp = stats::paired_ratio(us[j], us[i]);
          }
        auto const v = c.gemm_math() ? verdict.find(vkey(c)) : verdict.end();
        h5::Row row;
        row.set("shape", shape.name)
            .set("H", shape.hidden)
            .set("I", shape.inter)
            .set("E", shape.experts)
            .set("K", shape.top_k)
            .set("T", T)
            .set("gemm", c.gemm.name())
            .set("n", c.gemm.n(shape))
            .set("k", c.gemm.k(shape))
            .set("format", gemm::weight_format_name(c.format))
            .set("variant", c.variant_name())
            .set("mode", c.mode())
            .set("tile_m", tile)
            .set("ctas", b.ctas)
            .set("ks", b.split.ks)
            .set("units", b.split.units)
            .set("waves", b.split.waves)
            .set("launches", b.launches)
            .set("experts", b.experts)
            .set("bytes", static_cast<std::int64_t>(std::llround(b.bytes)))
            .set("rounds", rounds)
            .set("gbps", gbps)
            .set("gbps_best", b.bytes / (st.min * 1e3))
            .set("copy_fraction", gbps / copy_gbps)
            .set("read_fraction", gbps / read_gbps)
            .set("speedup_vs_tiled", sp.ratio)
            .set("speedup_lo", sp.lo)
            .set("speedup_hi", sp.hi)
            .set("check", v == verdict.end() ? std::string("none") : v->second);
        dev::set_times(row, st);
        sweep.append(key_of(shape, T, c), row, us[i]);
      }
      char line[160];
      std::snprintf(line, sizeof line, "%s: best %.0f GB/s (%.0f%% of copy)", group.c_str(),
                    best_gbps, 100.0 * best_gbps / copy_gbps);
      progress.step(line);
    }
    if (stopped)
      break;
  }
  progress.finish();
  measure_bandwidths(stopped ? "stopped" : "end");
  file.commit(); // a reader accepts only a complete file
  h5::ResultReader const reader(file.path());
  gemm_tables::print_gemm_tables(reader, std::cout);
  gemm_tables::print_copy_fraction_tables(reader, std::cout);
  if (any_fail) {
    std::fprintf(stderr, "sweep gemm: a GEMM check failed (table /gemm_check)\n");
    return kExitFailure;
  }
  return kExitOk;
#else
  throw DeviceError("sweep gemm needs a CUDA build (this moefin was built without CUDA)");
#endif
}

} // namespace moefin::cmd
