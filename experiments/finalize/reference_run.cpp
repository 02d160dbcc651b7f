#include "experiments/finalize/reference_run.hpp"

#include "core/rng.hpp"
#include "reference/finalize.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace moefin::cmd {

std::uint64_t finalize_input_seed(std::uint64_t seed) {
  return Rng::mix(seed, 0xf1a1);
}

ReferenceFinalizeRun run_reference_finalize(Routing routing, RoutingLayout layout,
                                            std::int64_t hidden, std::int64_t hidden_padded,
                                            finalize::WeightType weights, bool fp8,
                                            std::uint64_t input_seed) {
  ReferenceFinalizeRun run;
  run.routing = std::move(routing);
  run.layout = std::move(layout);
  run.weights = weights;
  run.fp8 = fp8;
  run.input_seed = input_seed;
  run.inputs = make_finalize_inputs(run.layout, hidden, hidden_padded, input_seed, fp8);
  auto const n = static_cast<std::size_t>(run.layout.num_tokens * hidden);
  void* out = nullptr;
  float* out_scales = nullptr;
  if (fp8) {
    run.out_fp8.assign(n, kFp8Poison);
    run.out_scales.assign(
        static_cast<std::size_t>(run.layout.num_tokens *
                                 ((hidden + kFp8ScaleBlock - 1) / kFp8ScaleBlock)),
        std::numeric_limits<float>::quiet_NaN());
    out = run.out_fp8.data();
    out_scales = run.out_scales.data();
  } else {
    run.out_bf16.assign(n, kBf16Poison);
    out = run.out_bf16.data();
  }
  finalize::FinalizeParams const p =
      finalize_params(run.routing, run.layout, run.inputs, weights, out, out_scales);

  auto const t0 = std::chrono::steady_clock::now();
  if (fp8)
    reference::finalize_deepseek_fp8(p);
  else
    reference::finalize(p);
  auto const t1 = std::chrono::steady_clock::now();
  run.reference_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  run.exact = fp8 ? reference::finalize_deepseek_fp8_exact(p) : reference::finalize_exact(p);

  std::size_t nan = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double const v = decoded_output(run, i);
    if (std::isnan(v)) {
      ++nan;
      continue;
    }
    run.max_abs_out = std::max(run.max_abs_out, std::fabs(v));
    run.peak = std::max(run.peak, std::fabs(run.exact[i]));
    run.max_abs_err = std::max(run.max_abs_err, std::fabs(v - run.exact[i]));
  }
  if (nan)
    throw std::runtime_error("reference finalize left " + std::to_string(nan) + " of " +
                             std::to_string(n) + " outputs NaN (a poisoned input was read)");
  return run;
}

double decoded_output(ReferenceFinalizeRun const& run, std::size_t i) {
  if (!run.fp8)
    return bf16_to_float(run.out_bf16[i]);
  auto const H = static_cast<std::size_t>(run.inputs.hidden);
  auto const blocks = (H + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
  float const scale = run.out_scales[i / H * blocks + i % H / kFp8ScaleBlock];
  return static_cast<double>(e4m3_to_float(run.out_fp8[i])) * static_cast<double>(scale);
}

std::string summary_line(ReferenceFinalizeRun const& run) {
  char buf[512];
  std::snprintf(
      buf, sizeof(buf),
      "reference finalize (%s out, %s weights): [%lld x %lld] from %lld rows x %lld "
      "(K=%lld) in %.3f ms; max |out| %.4g, max |out - exact| %.3g (%.2e of the peak); "
      "%lld of %lld entries dropped",
      run.fp8 ? "E4M3" : "bf16", weight_type_name(run.weights),
      static_cast<long long>(run.layout.num_tokens), static_cast<long long>(run.inputs.hidden),
      static_cast<long long>(run.inputs.num_rows), static_cast<long long>(run.inputs.hidden_padded),
      static_cast<long long>(run.layout.top_k), run.reference_ms, run.max_abs_out, run.max_abs_err,
      run.peak > 0 ? run.max_abs_err / run.peak : 0.0,
      static_cast<long long>(dropped_entries(run.layout)),
      static_cast<long long>(run.layout.num_tokens * run.layout.top_k));
  return buf;
}

void write_finalize(h5::ResultWriter& file, std::string const& g, ReferenceFinalizeRun const& run) {
  auto const T = static_cast<std::size_t>(run.layout.num_tokens);
  auto const H = static_cast<std::size_t>(run.inputs.hidden);
  auto const rows = static_cast<std::size_t>(run.inputs.num_rows);
  auto const hp = static_cast<std::size_t>(run.inputs.hidden_padded);
  file.write_array(g, "gemm_out", run.inputs.gemm_out, {rows, hp});
  file.write_array(g, "out_exact", run.exact, {T, H});
  if (run.fp8) {
    auto const in_blocks = (hp + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
    auto const out_blocks = (H + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
    file.write_array(g, "in_scales", run.inputs.in_scales, {rows, in_blocks});
    file.write_array(g, "out", run.out_fp8, {T, H});
    file.write_array(g, "out_scales", run.out_scales, {T, out_blocks});
  } else {
    file.write_array(g, "out", run.out_bf16, {T, H});
  }
  auto real = [](double v) {
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
  };
  std::map<std::string, std::string> const attrs{
      {"variant", run.fp8 ? "deepseek_fp8" : "bf16"},
      {"tokens", std::to_string(T)},
      {"hidden", std::to_string(H)},
      {"hidden_padded", std::to_string(hp)},
      {"top_k", std::to_string(run.layout.top_k)},
      {"rows", std::to_string(rows)},
      {"weights", weight_type_name(run.weights)},
      {"input_seed", std::to_string(run.input_seed)},
      {"dropped_entries", std::to_string(dropped_entries(run.layout))},
      {"reference_ms", real(run.reference_ms)},
      {"max_abs_out", real(run.max_abs_out)},
      {"peak", real(run.peak)},
      {"max_abs_err", real(run.max_abs_err)},
      {"order", run.fp8 ? "acc += w * (in_scale * x) in fp32, k ascending; scale = amax/448 "
                          "(1 if amax = 0); out = e4m3_rne_satfinite(acc / scale)"
                        : "acc += w * x in fp32, k ascending, no fma; out = bf16_rne(acc)"},
  };
  for (auto const& kv : attrs)
    file.set_attr(g, kv.first, kv.second);
}

} // namespace moefin::cmd
