#include "experiments/chain/run.hpp"

#include "core/bf16.hpp"
#include "core/chain/released_kernels.hpp"
#include "core/device_info.hpp"
#include "core/ops/errors.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>

namespace moefin::chain_run {

int first_difference(chain::BatchResult const& a, chain::BatchResult const& b, int it) {
  for (int x = 0; x < chain::kNumBuffers; ++x)
    if (a.slot(it, static_cast<chain::Buffer>(x)) != b.slot(it, static_cast<chain::Buffer>(x)))
      return x;
  return -1;
}

void add_batch(Series& s, chain::BatchResult const& on, chain::BatchResult const& off,
               std::vector<std::uint64_t> const& seeds) {
  for (std::size_t it = 0; it < seeds.size(); ++it) {
    int const b = first_difference(on, off, static_cast<int>(it));
    if (b >= 0) {
      if (s.mismatches == 0) {
        s.first_buffer = b;
        s.first_seed = seeds[it];
      }
      ++s.mismatches;
    }
    s.stale += on.stale[it];
    s.recorded += on.recorded[it];
    s.stale_iterations += on.stale[it] > 0;
  }
  s.routings += static_cast<std::int64_t>(seeds.size());
}

void write_timeline(h5::ResultWriter& file, std::string const& group, chain::Timeline const& t,
                    std::string const& key) {
  std::vector<std::size_t> const dims = {t.kernel.size()};
  file.write_array(group, "kernel", t.kernel, dims);
  file.write_array(group, "cta", t.cta, dims);
  file.write_array(group, "start_ns", t.start_ns, dims);
  file.write_array(group, "wait_ns", t.wait_ns, dims);
  file.write_array(group, "trigger_ns", t.trigger_ns, dims);
  file.write_array(group, "end_ns", t.end_ns, dims);
  std::string names;
  for (auto const& k : t.kernels)
    names += (names.empty() ? "" : ",") + k;
  file.set_attr(group, "kernels", names);
  file.set_attr(group, "key", key);
}

std::vector<chain::Kernel> parse_delay_kernels(std::string const& text, std::string const& flag) {
  std::vector<chain::Kernel> out;
  for (auto const& k : chain::split_list(text, flag)) {
    chain::Kernel kk;
    if (!chain::parse_kernel(k, &kk))
      throw InputError(flag + ": value '" + k +
                       "' not one of {routing, permute, gemm1, act, gemm2, finalize}");
    out.push_back(kk);
  }
  return out;
}

void require_device(std::string const& what) {
  DeviceInfo const d = query_device();
  if (!d.present)
    throw DeviceError(what + " needs a CUDA device: " + d.reason);
}

std::uint64_t parse_seed(std::string const& flag, std::string const& text) {
  std::size_t used = 0;
  std::uint64_t v = 0;
  try {
    v = std::stoull(text, &used, 0);
  } catch (std::exception const&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || text[0] == '-')
    throw InputError(flag + ": '" + text + "' is not a seed (decimal or 0x-hex, 64 bits)");
  return v;
}

double max_rel_err(std::uint16_t const* a, std::uint16_t const* b, std::size_t n) {
  double peak = 0, err = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double const x = bf16_to_float(a[i]), y = bf16_to_float(b[i]);
    if (std::isnan(x) || std::isnan(y))
      return std::numeric_limits<double>::infinity();
    peak = std::max(peak, std::fabs(y));
    err = std::max(err, std::fabs(x - y));
  }
  return peak > 0 ? err / peak : err;
}

#ifdef MOEFIN_HAVE_CUDA

Replay replay(chain::LayerWeights const& w, chain::RunnerOptions opt, chain::ChainConfig const& cfg,
              std::uint64_t seed, int attempts) {
  opt.iterations = 2;
  opt.stamps = false;
  chain::ChainRunner runner(w, opt);
  runner.set_routings({chain::replay_predecessor(seed), seed});
  Replay r;
  for (r.attempts = 1; r.attempts <= attempts; ++r.attempts) {
    std::vector<std::vector<std::uint8_t>> on, off;
    runner.run_batch(cfg, true);
    for (int b = 0; b < chain::kNumBuffers; ++b)
      on.push_back(runner.download(static_cast<chain::Buffer>(b)));
    runner.run_batch(cfg, false);
    for (int b = 0; b < chain::kNumBuffers; ++b)
      off.push_back(runner.download(static_cast<chain::Buffer>(b)));
    for (int b = 0; b < chain::kNumBuffers && !r.reproduced; ++b) {
      int const eb = chain::buffer_element_bytes(static_cast<chain::Buffer>(b));
      std::size_t const n = on[b].size() / static_cast<std::size_t>(eb);
      for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t x = 0, y = 0;
        std::memcpy(&x, on[b].data() + i * eb, static_cast<std::size_t>(eb));
        std::memcpy(&y, off[b].data() + i * eb, static_cast<std::size_t>(eb));
        if (x == y)
          continue;
        r.reproduced = true;
        r.buffer = b;
        r.index = static_cast<std::int64_t>(i);
        std::ostringstream os;
        os << chain::buffer_name(static_cast<chain::Buffer>(b)) << "[" << i << "]: PDL on 0x"
           << std::hex << x << ", PDL off 0x" << y;
        r.detail = os.str();
        break;
      }
    }
    if (r.reproduced)
      break;
  }
  if (!r.reproduced)
    r.attempts = attempts;
  return r;
}

#else

Replay replay(chain::LayerWeights const&, chain::RunnerOptions, chain::ChainConfig const&,
              std::uint64_t, int) {
  throw DeviceError("replay needs a CUDA build");
}

#endif

void add_flavour_option(cli::po::options_description& desc) {
  desc.add_options()("flavour", cli::choice("--flavour", {"moefin", "released"}, "moefin"),
                     "kernels of the chain: moefin (its own) or released (the released FlashInfer "
                     "routing, permute and activation around moefin's GEMMs; "
                     "docs/design/released.md, \"The released chain flavour\")");
}

std::string read_flavour_option(cli::po::variables_map const& vm) {
  std::string const f = vm["flavour"].as<std::string>();
  cli::check_choice("--flavour", f, {"moefin", "released"});
  if (f == "released")
    chain::require_released_kernels("--flavour released");
  return f;
}

void record_flavour(std::string const& flavour, h5::ResultWriter& file) {
  // A resumed file without the attribute predates the flavours: its rows are moefin's.
  file.keep_root_attr("flavour", flavour, "moefin", "--flavour", "flavour");
}

void print_flavour(h5::Provenance const& root, std::ostream& out) {
  auto const f = root.find("flavour");
  out << "chain flavour: " << (f == root.end() ? std::string("moefin") : f->second) << "\n";
}

void add_weights_format_option(cli::po::options_description& desc, std::string const& what) {
  desc.add_options()("weights-format",
                     cli::po::value<std::string>()->default_value(chain::kDefaultWeightsFormat),
                     ("weight formats of GEMM1 and GEMM2: bf16-tiled (the tiled grouped GEMM), "
                      "bf16 or fp4 (the split-K decode GEMM on bf16 or 4-bit NVFP4-like "
                      "weights); " +
                      what)
                         .c_str());
}

std::vector<std::string> read_weights_formats(cli::po::variables_map const& vm) {
  std::vector<std::string> out;
  for (auto const& f :
       chain::split_list(vm["weights-format"].as<std::string>(), "--weights-format")) {
    cli::check_choice("--weights-format", f, chain::weights_format_names());
    if (std::find(out.begin(), out.end(), f) != out.end())
      throw InputError("--weights-format: '" + f + "' given twice");
    out.push_back(f);
  }
  return out;
}

void check_weights_format(std::string const& format, chain::LayerShape const& shape,
                          std::int64_t tile_m) {
  if (format == chain::kDefaultWeightsFormat) {
    if (tile_m % 16 != 0)
      throw InputError("--tile-m: " + std::to_string(tile_m) + " with --weights-format " + format +
                       ": the tiled GEMM takes a row tile of 16, 32, 64 or 128");
    return;
  }
  if (tile_m != 8 && tile_m != 16)
    throw InputError("--tile-m: " + std::to_string(tile_m) + " with --weights-format " + format +
                     ": the decode GEMM takes a row tile of 8 or 16");
  if (format == "fp4" && (shape.hidden % 128 != 0 || shape.inter % 128 != 0))
    throw InputError("--shapes: " + shape.name + " with --weights-format fp4: hidden and " +
                     "intermediate sizes must be multiples of 128");
}

void add_residency_options(cli::po::options_description& desc, Residency const& defaults) {
  namespace po = cli::po;
  // Checked while parsing (cli::ranged, cli::choice): before any command opens the device.
  desc.add_options()("ctas-per-sm", cli::ranged("--ctas-per-sm", defaults.ctas_per_sm, 1, 8),
                     "CTAs per SM of the GEMM, permute and activation grids, 1..8 (1: every "
                     "kernel of the chain fits on the GPU at once, so early triggers take effect; "
                     "each decode GEMM then takes half the SMs)")(
      "carveout",
      cli::choice("--carveout", {"default", "max-shared"},
                  defaults.max_shared_carveout ? "max-shared" : "default"),
      "shared-memory carveout of the routing, permute, GEMM and activation kernels: max-shared "
      "(finalize, which needs shared memory, can then start beside them) or default (the "
      "driver's)");
}

Residency read_residency_options(cli::po::variables_map const& vm) {
  Residency r;
  r.ctas_per_sm = vm["ctas-per-sm"].as<int>();
  cli::check_range("--ctas-per-sm", r.ctas_per_sm, 1, 8);
  std::string const carveout = vm["carveout"].as<std::string>();
  cli::check_choice("--carveout", carveout, {"default", "max-shared"});
  r.max_shared_carveout = carveout == "max-shared";
  return r;
}

void apply(Residency const& r, chain::RunnerOptions& ro) {
  ro.ctas_per_sm = r.ctas_per_sm;
  ro.max_shared_carveout = r.max_shared_carveout;
}

void record(Residency const& r, h5::ResultWriter& file) {
  file.set_attr("/", "ctas_per_sm", std::to_string(r.ctas_per_sm));
  file.set_attr("/", "carveout", r.max_shared_carveout ? "max-shared" : "default");
}

} // namespace moefin::chain_run
