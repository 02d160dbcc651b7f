#pragma once
// One reference finalize over a routing: seeded inputs, poisoned outputs, the Kokkos reference,
// the double oracle and a one-line summary. Used by `moefin reference finalize` and `moefin demo`.

#include "core/finalize_inputs.hpp"
#include "core/fp8.hpp"
#include "core/store/h5store.hpp"
#include "core/layout.hpp"

#include <string>
#include <vector>

namespace moefin::cmd {

struct ReferenceFinalizeRun {
  Routing routing;
  RoutingLayout layout;
  FinalizeInputs inputs;
  finalize::WeightType weights = finalize::WeightType::kBf16;
  bool fp8 = false;
  std::uint64_t input_seed = 0;

  std::vector<bf16_bits> out_bf16; // [T, H] (bf16 variant)
  std::vector<fp8_bits> out_fp8;   // [T, H] (FP8 variant)
  std::vector<float> out_scales;   // [T, ceil(H / 128)] (FP8 variant)
  std::vector<double> exact;       // [T, H] the double oracle, before rounding or quantization

  double reference_ms = 0; // wall time of the reference call alone
  double max_abs_out = 0;  // of the decoded output (FP8: value times its block scale)
  double peak = 0;         // max |exact|
  double max_abs_err = 0;  // max |decoded output - exact|
};

/// The seed of the GEMM-output tensor (and scales) a run with this command-line seed uses.
std::uint64_t finalize_input_seed(std::uint64_t seed);

/// Generates the inputs (seed `input_seed`), runs the reference on poisoned outputs and the
/// oracle. Throws std::runtime_error when an output is still NaN afterwards (the reference read
/// a poisoned element or skipped one).
ReferenceFinalizeRun run_reference_finalize(Routing routing, RoutingLayout layout,
                                            std::int64_t hidden, std::int64_t hidden_padded,
                                            finalize::WeightType weights, bool fp8,
                                            std::uint64_t input_seed);

/// The output value at index i as a float (bf16 decoded, or E4M3 decoded times its block scale).
double decoded_output(ReferenceFinalizeRun const& run, std::size_t i);

/// Shape, time and checksum-free facts (max |out|, error against the oracle, rows dropped).
std::string summary_line(ReferenceFinalizeRun const& run);

/// Writes inputs, outputs and the oracle into `group` (docs/reference/experiment-tables.md, group
/// /finalize).
void write_finalize(h5::ResultWriter& file, std::string const& group,
                    ReferenceFinalizeRun const& run);

} // namespace moefin::cmd
