#include "core/finalize_inputs.hpp"

#include "core/cli.hpp"
#include "core/fp8.hpp"
#include "core/rng.hpp"
#include "core/routing.hpp"

#include <limits>

namespace moefin {

void validate_finalize_shape(std::int64_t hidden, std::int64_t hidden_padded, std::int64_t rows) {
  cli::check_range<std::int64_t>("--hidden", hidden, 1, 1 << 16);
  cli::check_range<std::int64_t>("--hidden-padded", hidden_padded, hidden, (1 << 16) + 1024);
  constexpr std::int64_t kMaxElements = std::int64_t(1) << 31;
  if (rows * hidden_padded >= kMaxElements)
    throw InputError("gemm_out: " + std::to_string(rows) + " rows x " +
                     std::to_string(hidden_padded) + " columns exceed 2^31 elements (lower " +
                     "--tokens, --top-k or --hidden)");
}

RowPool::RowPool(std::int64_t hidden, std::int64_t hidden_padded, std::uint64_t seed)
    : hidden_(hidden), hidden_padded_(hidden_padded), seed_(seed) {}

bf16_bits const* RowPool::rows(std::int64_t n) {
  auto const have = static_cast<std::int64_t>(data_.size()) / hidden_padded_;
  if (n > have) {
    data_.resize(static_cast<std::size_t>(n * hidden_padded_), kBf16Poison);
    for (std::int64_t r = have; r < n; ++r) {
      auto const row = random_bf16(static_cast<std::size_t>(hidden_),
                                   Rng::mix(seed_, static_cast<std::uint64_t>(r)));
      std::copy(row.begin(), row.end(), data_.begin() + r * hidden_padded_);
    }
  }
  return data_.data();
}

FinalizeInputs make_finalize_inputs(RoutingLayout const& layout, RowPool& pool,
                                    std::uint64_t scale_seed, bool with_scales) {
  std::int64_t const hidden = pool.hidden(), hidden_padded = pool.hidden_padded();
  validate_finalize_shape(hidden, hidden_padded, layout.total_padded_rows);
  FinalizeInputs in;
  in.hidden = hidden;
  in.hidden_padded = hidden_padded;
  in.num_rows = layout.total_padded_rows;
  auto const rows = static_cast<std::size_t>(in.num_rows);
  auto const hp = static_cast<std::size_t>(hidden_padded);
  in.gemm_out.assign(rows * hp, kBf16Poison);
  bf16_bits const* src = pool.rows(in.num_rows);
  for (std::size_t r = 0; r < rows; ++r)
    if (layout.permuted_to_token[r] >= 0)
      std::copy(src + r * hp, src + (r + 1) * hp,
                in.gemm_out.begin() + static_cast<std::ptrdiff_t>(r * hp));
  if (with_scales) {
    auto const blocks =
        static_cast<std::size_t>((hidden_padded + kFp8ScaleBlock - 1) / kFp8ScaleBlock);
    in.in_scales.assign(rows * blocks, std::numeric_limits<float>::quiet_NaN());
    Rng rng(Rng::mix(scale_seed, ~std::uint64_t(0)));
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t b = 0; b < blocks; ++b) {
        float const s = static_cast<float>(rng.uniform(0.5, 2.0));
        if (layout.permuted_to_token[r] >= 0)
          in.in_scales[r * blocks + b] = s;
      }
  }
  return in;
}

FinalizeInputs make_finalize_inputs(RoutingLayout const& layout, std::int64_t hidden,
                                    std::int64_t hidden_padded, std::uint64_t seed,
                                    bool with_scales) {
  validate_finalize_shape(hidden, hidden_padded, layout.total_padded_rows);
  RowPool pool(hidden, hidden_padded, seed);
  return make_finalize_inputs(layout, pool, seed, with_scales);
}

finalize::FinalizeParams finalize_params(Routing const& routing, RoutingLayout const& layout,
                                         FinalizeInputs const& in, finalize::WeightType weight_type,
                                         void* out, float* out_scales) {
  finalize::FinalizeParams p;
  p.gemm_out = in.gemm_out.data();
  p.expert_weights = expert_weights_of(routing, weight_type);
  p.expanded_to_permuted = layout.expanded_to_permuted.data();
  p.out = out;
  p.in_scales = in.in_scales.empty() ? nullptr : in.in_scales.data();
  p.out_scales = out_scales;
  p.num_tokens = layout.num_tokens;
  p.hidden = in.hidden;
  p.hidden_padded = in.hidden_padded;
  p.top_k = layout.top_k;
  p.num_rows = in.num_rows;
  p.weight_type = weight_type;
  return p;
}

void const* expert_weights_of(Routing const& routing, finalize::WeightType weight_type) {
  switch (weight_type) {
  case finalize::WeightType::kNone:
    return nullptr;
  case finalize::WeightType::kBf16:
    return routing.weights_bf16.data();
  case finalize::WeightType::kFp32:
    return routing.weights.data();
  }
  return nullptr;
}

} // namespace moefin
