// Host half of the grouped GEMM dispatcher: the validation of its params. No CUDA here, so that
// host code and unit tests link it without a GPU.

#include "core/ops/ranges.hpp"
#include "kernels/gemm/gemm.hpp"

#include <cstdint>
#include <string>

namespace moefin::gemm {

void validate(GroupedGemmParams const& p) {
  ranges::check_multiple("gemm n", p.n, Policy::kTileN);
  ranges::check_multiple("gemm k", p.k, Policy::kStepK);
  if (p.tile_m != 16 && p.tile_m != 32 && p.tile_m != 64 && p.tile_m != 128)
    throw InputError("gemm tile_m: value " + std::to_string(p.tile_m) +
                     " not one of {16, 32, 64, 128}");
  ranges::check_multiple("gemm max_rows (a multiple of tile_m)", p.max_rows, p.tile_m);
  ranges::check_range<std::int64_t>("gemm ldc", p.ldc, p.n, 1 << 20);
  ranges::check_multiple("gemm ldc", p.ldc, 2);
  ranges::check_range<std::int64_t>("gemm num_local_experts", p.num_local_experts, 1, 1 << 16);
  if (!p.a || !p.b || !p.c || !p.cta_to_expert || !p.total_padded_rows)
    throw InputError("gemm: a buffer pointer is null");
}

} // namespace moefin::gemm
