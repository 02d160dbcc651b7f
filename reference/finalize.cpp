#include "reference/finalize.hpp"

#include "core/bf16.hpp"
#include "core/fp8.hpp"
#include "core/ops/errors.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace moefin::reference {

namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;
using finalize::FinalizeParams;
using finalize::WeightType;

void require(bool ok, std::string const& what) {
  if (!ok)
    throw InputError("finalize params: " + what);
}

/// `writes`: the call stores into p.out (the exact oracles return their sums instead).
void check(FinalizeParams const& p, bool fp8, bool writes = true) {
  require(p.num_tokens >= 1, "num_tokens " + std::to_string(p.num_tokens) + " < 1");
  require(p.hidden >= 1, "hidden " + std::to_string(p.hidden) + " < 1");
  require(p.hidden_padded >= p.hidden, "hidden_padded " + std::to_string(p.hidden_padded) +
                                           " < hidden " + std::to_string(p.hidden));
  require(p.top_k >= 1 && p.top_k <= 64, "top_k " + std::to_string(p.top_k) + " outside [1, 64]");
  require(p.num_rows >= 0, "num_rows " + std::to_string(p.num_rows) + " < 0");
  require(p.gemm_out != nullptr || p.num_rows == 0, "gemm_out is null");
  require(p.expanded_to_permuted != nullptr, "expanded_to_permuted is null");
  require(!writes || p.out != nullptr, "out is null");
  require(p.weight_type == WeightType::kNone || p.expert_weights != nullptr,
          "expert_weights is null but weight_type is not none");
  if (fp8) {
    require(p.in_scales != nullptr || p.num_rows == 0, "in_scales is null");
    require(!writes || p.out_scales != nullptr, "out_scales is null");
  }
  for (std::int64_t e = 0; e < p.num_tokens * p.top_k; ++e) {
    std::int32_t const row = p.expanded_to_permuted[e];
    require(row >= -1 && row < p.num_rows, "expanded_to_permuted[" + std::to_string(e) +
                                               "] = " + std::to_string(row) + " outside [-1, " +
                                               std::to_string(p.num_rows) + ")");
  }
}

float weight_of(FinalizeParams const& p, std::int64_t e) {
  switch (p.weight_type) {
  case WeightType::kNone:
    return 1.0f;
  case WeightType::kBf16:
    return bf16_to_float(static_cast<bf16_bits const*>(p.expert_weights)[e]);
  case WeightType::kFp32:
    return static_cast<float const*>(p.expert_weights)[e];
  }
  return 0.0f;
}

/// The top-K sum of one output element in `Acc` arithmetic, k ascending (see finalize.hpp).
/// Acc = float is the specified fp32 order; Acc = double is the oracle.
template <class Acc>
Acc weighted_sum(FinalizeParams const& p, std::int64_t t, std::int64_t h, bool scaled) {
  auto const* in = static_cast<bf16_bits const*>(p.gemm_out);
  std::int64_t const scale_blocks = (p.hidden_padded + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
  Acc acc = 0;
  for (std::int64_t k = 0; k < p.top_k; ++k) {
    std::int64_t const e = t * p.top_k + k;
    std::int64_t const row = p.expanded_to_permuted[e];
    if (row < 0)
      continue;
    Acc x = static_cast<Acc>(bf16_to_float(in[row * p.hidden_padded + h]));
    if (scaled)
      x = static_cast<Acc>(p.in_scales[row * scale_blocks + h / kFp8ScaleBlock]) * x;
    acc = acc + static_cast<Acc>(weight_of(p, e)) * x;
  }
  return acc;
}

std::vector<double> exact(FinalizeParams const& p, bool scaled, char const* label) {
  std::vector<double> out(static_cast<std::size_t>(p.num_tokens * p.hidden));
  double* o = out.data();
  Kokkos::parallel_for(
      label, Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>({0, 0}, {p.num_tokens, p.hidden}),
      [=](std::int64_t t, std::int64_t h) {
        o[t * p.hidden + h] = weighted_sum<double>(p, t, h, scaled);
      });
  Kokkos::fence();
  return out;
}

} // namespace

void finalize(FinalizeParams const& p) {
  check(p, false);
  auto* out = static_cast<bf16_bits*>(p.out);
  Kokkos::parallel_for(
      "ref::finalize",
      Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>({0, 0}, {p.num_tokens, p.hidden}),
      [=](std::int64_t t, std::int64_t h) {
        out[t * p.hidden + h] = float_to_bf16(weighted_sum<float>(p, t, h, false));
      });
  Kokkos::fence();
}

std::vector<double> finalize_exact(FinalizeParams const& p) {
  check(p, false, false);
  return exact(p, false, "ref::finalize_exact");
}

void finalize_deepseek_fp8(FinalizeParams const& p) {
  check(p, true);
  auto* out = static_cast<fp8_bits*>(p.out);
  std::int64_t const blocks = (p.hidden + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
  Kokkos::parallel_for("ref::finalize_deepseek_fp8",
                       Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>({0, 0}, {p.num_tokens, blocks}),
                       [=](std::int64_t t, std::int64_t b) {
                         std::int64_t const h0 = b * kFp8ScaleBlock;
                         std::int64_t const n = std::min(kFp8ScaleBlock, p.hidden - h0);
                         float acc[kFp8ScaleBlock];
                         float amax = 0.0f;
                         for (std::int64_t i = 0; i < n; ++i) {
                           acc[i] = weighted_sum<float>(p, t, h0 + i, true);
                           amax = std::max(amax, std::fabs(acc[i]));
                         }
                         float const scale = e4m3_block_scale(amax);
                         p.out_scales[t * blocks + b] = scale;
                         for (std::int64_t i = 0; i < n; ++i)
                           out[t * p.hidden + h0 + i] = float_to_e4m3(acc[i] / scale);
                       });
  Kokkos::fence();
}

std::vector<double> finalize_deepseek_fp8_exact(FinalizeParams const& p) {
  check(p, true, false);
  return exact(p, true, "ref::finalize_deepseek_fp8_exact");
}

} // namespace moefin::reference
