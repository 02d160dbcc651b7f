#pragma once
// Seeded inputs of one finalize call over a routing layout, and the params struct that points
// at them: the one builder `moefin reference finalize`, `check finalize`, `sweep finalize` and the
// tests share, so that a seed names the same tensors everywhere.

#include "core/bf16.hpp"
#include "core/layout.hpp"
#include "core/ops/finalize_params.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moefin {

/// Rows of seeded bf16 values for one (hidden, hidden_padded, seed): row r is
/// random_bf16(hidden, Rng::mix(seed, r)) (|x| in [0.05, 1], never zero, its own stream, so the
/// values do not depend on hidden_padded or on which rows were asked for before), columns past
/// `hidden` NaN. Rows are generated once and kept: experiments that build many cases of one
/// hidden size draw them from one pool.
class RowPool {
public:
  RowPool(std::int64_t hidden, std::int64_t hidden_padded, std::uint64_t seed);
  /// Pointer to rows [0, n) ([n, hidden_padded] bf16), valid until the next call.
  bf16_bits const* rows(std::int64_t n);
  std::int64_t hidden() const { return hidden_; }
  std::int64_t hidden_padded() const { return hidden_padded_; }

private:
  std::int64_t hidden_, hidden_padded_;
  std::uint64_t seed_;
  std::vector<bf16_bits> data_;
};

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

/// gemm_out: every row that holds a (token, expert) pair is row r of `pool`; columns
/// [hidden, hidden_padded) and padding rows hold kBf16Poison (NaN): finalize must never read
/// them. in_scales (with_scales): seeded by `scale_seed` in [0.5, 2) on rows in use, NaN on
/// padding rows.
FinalizeInputs make_finalize_inputs(RoutingLayout const& layout, RowPool& pool,
                                    std::uint64_t scale_seed, bool with_scales);
/// The same with a pool of its own seeded with `seed` (the scales too).
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
