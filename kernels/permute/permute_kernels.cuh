#pragma once
// Permute kernel: a resident grid striding over the permuted rows, 128-bit copies.

#include "kernels/common/pdl_stage.cuh"
#include "kernels/permute/permute.hpp"

#include <cstdint>

namespace moefin::permute {

__global__ void permute_kernel(PermuteParams p, PdlDevice k) {
  pdl_enter(k);
  pdl_wait_point(k);
  std::int64_t const total = *p.total_padded_rows;
  std::int64_t const vec = p.hidden / 8; // uint4 per row
  auto const* src = static_cast<uint4 const*>(p.hidden_states);
  auto* dst = static_cast<uint4*>(p.permuted);
  std::int64_t const rows = std::min<std::int64_t>(total, p.max_rows);
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    std::int32_t const token = p.permuted_to_token[row];
    for (std::int64_t c = threadIdx.x; c < vec; c += blockDim.x)
      dst[row * vec + c] = token >= 0 ? src[token * vec + c] : make_uint4(0, 0, 0, 0);
  }
  pdl_exit(k);
}

} // namespace moefin::permute
