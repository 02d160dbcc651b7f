#pragma once
// Seeded inputs of one finalize call over a routing layout, and the params struct that points
// at them. Shared by `moefin reference finalize`, the tests and the CUDA checks, so that a seed
// names the same tensors everywhere.

#include "core/bf16.hpp"
#include "core/layout.hpp"
#include "core/ops/finalize_params.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moefin {

struct FinalizeInputs {
  std::int64_t hidden = 0;
  std::int64_t hidden_padded = 0;
  std::int64_t num_rows = 0;       // the layout's total padded rows
  std::vector<bf16_bits> gemm_out; // [num_rows, hidden_padded]
  std::vector<float> in_scales;    // [num_rows, ceil(hidden_padded / 128)]; empty without scales
};

/// Checks hidden in [1, 65536] (--hidden), hidden_padded in [hidden, 65536 + 1024]
/// (--hidden-padded) and that gemm_out stays below 2^31 elements; throws InputError.
void validate_finalize_shape(std::int64_t hidden, std::int64_t hidden_padded, std::int64_t rows);

/// gemm_out: every row that holds a (token, expert) pair gets `hidden` seeded values from
/// random_bf16 (|x| in [0.05, 1], never zero; row r drawn from its own stream, so the values do
/// not depend on hidden_padded). Columns [hidden, hidden_padded) and padding rows hold
/// kBf16Poison (NaN): finalize must never read them. in_scales (with_scales): seeded in
/// [0.5, 2) on rows in use, NaN on padding rows.
FinalizeInputs make_finalize_inputs(RoutingLayout const& layout, std::int64_t hidden,
                                    std::int64_t hidden_padded, std::uint64_t seed,
                                    bool with_scales);

/// Host-pointer params of a finalize over `in`: the routing's weights of `weight_type` (nullptr
/// for kNone), the layout's expanded_to_permuted. `out` ([T, hidden] bf16, or E4M3 bytes) and
/// `out_scales` ([T, ceil(hidden / 128)], FP8 variant only) belong to the caller. The pointed-to
/// objects must outlive the params.
finalize::FinalizeParams finalize_params(Routing const& routing, RoutingLayout const& layout,
                                         FinalizeInputs const& in, finalize::WeightType weight_type,
                                         void* out, float* out_scales = nullptr);

/// The routing's weights as finalize reads them: bf16 bits, fp32, or nullptr for kNone.
void const* expert_weights_of(Routing const& routing, finalize::WeightType weight_type);

} // namespace moefin
