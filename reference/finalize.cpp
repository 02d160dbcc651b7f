#include "reference/finalize.hpp"

#include "core/bf16.hpp"

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace moefin::reference {

namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;

inline float weight_of(finalize::FinalizeParams const& p, std::int64_t e) {
  switch (p.weight_type) {
  case finalize::WeightType::kNone:
    return 1.0f;
  case finalize::WeightType::kBf16:
    return bf16_to_float(static_cast<bf16_bits const*>(p.expert_weights)[e]);
  case finalize::WeightType::kFp32:
    return static_cast<float const*>(p.expert_weights)[e];
  }
  return 0.0f;
}

} // namespace

void finalize(finalize::FinalizeParams const& p) {
  auto const* in = static_cast<bf16_bits const*>(p.gemm_out);
  auto* out = static_cast<bf16_bits*>(p.out);
  Kokkos::parallel_for("ref::finalize", Kokkos::RangePolicy<Exec>(0, p.num_tokens),
                       [=](std::int64_t t) {
                         for (std::int64_t h = 0; h < p.hidden; ++h) {
                           float acc = 0.0f;
                           for (std::int64_t k = 0; k < p.top_k; ++k) {
                             std::int64_t const e = t * p.top_k + k;
                             std::int32_t const row = p.expanded_to_permuted[e];
                             if (row < 0)
                               continue;
                             acc += weight_of(p, e) * bf16_to_float(in[row * p.hidden_padded + h]);
                           }
                           out[t * p.hidden + h] = float_to_bf16(acc);
                         }
                       });
  Kokkos::fence();
}

std::vector<double> finalize_exact(finalize::FinalizeParams const& p) {
  auto const* in = static_cast<bf16_bits const*>(p.gemm_out);
  std::vector<double> out(static_cast<std::size_t>(p.num_tokens * p.hidden));
  double* o = out.data();
  Kokkos::parallel_for(
      "ref::finalize_exact", Kokkos::RangePolicy<Exec>(0, p.num_tokens), [=](std::int64_t t) {
        for (std::int64_t h = 0; h < p.hidden; ++h) {
          double acc = 0.0;
          for (std::int64_t k = 0; k < p.top_k; ++k) {
            std::int64_t const e = t * p.top_k + k;
            std::int32_t const row = p.expanded_to_permuted[e];
            if (row >= 0)
              acc += static_cast<double>(weight_of(p, e)) *
                     static_cast<double>(bf16_to_float(in[row * p.hidden_padded + h]));
          }
          o[t * p.hidden + h] = acc;
        }
      });
  Kokkos::fence();
  return out;
}

} // namespace moefin::reference
