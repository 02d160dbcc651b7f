#include "reference/gemm.hpp"

#include "core/bf16.hpp"
#include "core/ops/errors.hpp"

#include <Kokkos_Core.hpp>

#include <string>

namespace moefin::reference {

void grouped_gemm(gemm::GroupedGemmParams const& p) {
  auto require = [](bool ok, std::string const& what) {
    if (!ok)
      throw InputError("grouped GEMM params: " + what);
  };
  require(p.a && p.b && p.c && p.cta_to_expert && p.total_padded_rows, "a pointer is null");
  require(p.n >= 1 && p.k >= 1 && p.ldc >= p.n && p.tile_m >= 1,
          "need n >= 1, k >= 1, ldc >= n, tile_m >= 1");
  std::int64_t const rows = *p.total_padded_rows;
  require(rows >= 0 && rows <= p.max_rows && rows % p.tile_m == 0,
          "total_padded_rows " + std::to_string(rows) + " not a multiple of tile_m " +
              std::to_string(p.tile_m) + " in [0, max_rows " + std::to_string(p.max_rows) + "]");
  for (std::int64_t i = 0; i < rows / p.tile_m; ++i)
    require(p.cta_to_expert[i] >= -1 && p.cta_to_expert[i] < p.num_local_experts,
            "cta_to_expert[" + std::to_string(i) + "] = " + std::to_string(p.cta_to_expert[i]) +
                " outside [-1, num_local_experts)");

  auto const* a = static_cast<bf16_bits const*>(p.a);
  auto const* b = static_cast<bf16_bits const*>(p.b);
  auto* c = static_cast<bf16_bits*>(p.c);
  std::int64_t const N = p.n, K = p.k;
  Kokkos::parallel_for(
      "ref::grouped_gemm",
      Kokkos::MDRangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::Rank<2>>({0, 0}, {rows, N}),
      [=](std::int64_t r, std::int64_t j) {
        std::int32_t const x = p.cta_to_expert[r / p.tile_m];
        if (x < 0)
          return;
        if (p.row_token != nullptr && p.row_token[r] < 0) { // padding: a zero row, unread
          c[r * p.ldc + j] = float_to_bf16(0.0f);
          return;
        }
        bf16_bits const* arow = a + r * K;
        bf16_bits const* brow = b + (x * N + j) * K;
        double acc = 0.0;
        for (std::int64_t i = 0; i < K; ++i)
          acc += static_cast<double>(bf16_to_float(arow[i])) *
                 static_cast<double>(bf16_to_float(brow[i]));
        c[r * p.ldc + j] = float_to_bf16(static_cast<float>(acc));
      });
  Kokkos::fence();
}

} // namespace moefin::reference
