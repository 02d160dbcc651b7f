// Host half of the decode GEMM dispatcher: variant names and the split the kernel takes. No
// CUDA here, so that both are unit-tested on machines without a GPU.

#include "kernels/gemm/decode.hpp"

namespace moefin::gemm {

char const* variant_name(Variant v) {
  switch (v) {
  case Variant::kTiled:
    return "tiled";
  case Variant::kSplitK:
    return "splitk";
  }
  return "?";
}

bool parse_variant(std::string const& s, Variant* out) {
  for (Variant v : {Variant::kTiled, Variant::kSplitK})
    if (s == variant_name(v)) {
      if (out)
        *out = v;
      return true;
    }
  return false;
}

DecodeSplit split_of(DecodeGemmParams const& p, std::int64_t tiles, std::int64_t grid,
                     int split_k) {
  return plan_split(tiles, p.gemm.n, p.gemm.k, p.format, grid, split_k);
}

} // namespace moefin::gemm
