// Host half of the decode GEMM dispatcher: variant names, validation, the split the kernel takes
// and the chain's grid. No CUDA here, so that all of it is unit-tested on machines without a GPU.

#include "core/ops/ranges.hpp"
#include "kernels/gemm/decode.hpp"
#include "kernels/gemm/gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace moefin::gemm {

namespace {

[[noreturn]] void reject(std::string const& what) {
  throw InputError("decode gemm: " + what);
}

} // namespace

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

void validate(DecodeGemmParams const& p, Variant v, DecodeOptions const& o) {
  if (p.scale_layout != fp4::ScaleLayout::kRowMajor) {
    if (p.scale_layout != fp4::ScaleLayout::kTiled)
      reject("unknown scale layout " + std::to_string(static_cast<int>(p.scale_layout)));
    if (p.format != WeightFormat::kFp4 || v != Variant::kSplitK || o.deep || o.loads_only)
      reject("scale layout tiled is read by variant splitk with fp4 weights only, without deep "
             "or loads_only");
    if (reinterpret_cast<std::uintptr_t>(p.scales) % 16 != 0)
      reject("scale layout tiled needs scales aligned to 16 bytes (16-byte copies)");
  }
  if (p.value_layout != fp4::ValueLayout::kNibbles) {
    if (!fp4::known_value_layout(p.value_layout))
      reject("unknown value layout " + std::to_string(static_cast<int>(p.value_layout)));
    if (p.scale_layout != fp4::ScaleLayout::kTiled)
      reject(std::string("value layout ") + fp4::value_layout_name(p.value_layout) +
             " is read by the tiled-scale kernels only (scale layout tiled)");
  }
  if (o.wide && !fp4::packed_words(p.value_layout))
    reject("wide is built into the packed-value kernels only (value layout packed or tiles)");
  if (p.value_layout == fp4::ValueLayout::kTiles && !o.wide)
    reject("value layout tiles is read by the wide kernel only (DecodeOptions::wide)");
  if (o.lean && p.scale_layout != fp4::ScaleLayout::kTiled)
    reject("lean is built into the tiled-scale kernel only (scale layout tiled)");
  if (v == Variant::kTiled) {
    if (p.format != WeightFormat::kBf16)
      reject(std::string("variant tiled reads bf16 weights only, not ") +
             weight_format_name(p.format));
    if (o.weights_before_wait || o.split_k != 0 || o.loads_only || o.deep || o.grid_ctas != 0)
      reject("weights_before_wait, split_k, loads_only, deep and grid_ctas apply to variant "
             "splitk only");
    validate(p.gemm);
    return;
  }
  if (v != Variant::kSplitK)
    reject("unknown variant " + std::to_string(static_cast<int>(v)));
  if (p.format != WeightFormat::kBf16 && p.format != WeightFormat::kFp4)
    reject("unknown weight format " + std::to_string(static_cast<int>(p.format)));
  ranges::check_multiple("decode gemm n", p.gemm.n, DecodePolicy::kWarpRows);
  ranges::check_multiple(std::string("decode gemm k (") + weight_format_name(p.format) + ")",
                         p.gemm.k, DecodePolicy::step_k(p.format));
  if (p.gemm.tile_m != 8 && p.gemm.tile_m != 16)
    reject("tile_m " + std::to_string(p.gemm.tile_m) + " not one of {8, 16}");
  ranges::check_multiple("decode gemm max_rows (a multiple of tile_m)", p.gemm.max_rows,
                         p.gemm.tile_m);
  ranges::check_range<std::int64_t>("decode gemm ldc", p.gemm.ldc, p.gemm.n, 1 << 20);
  ranges::check_range<std::int64_t>("decode gemm num_local_experts", p.gemm.num_local_experts, 1,
                                    1 << 16);
  if (!p.gemm.a || !p.gemm.b || !p.gemm.c || !p.gemm.cta_to_expert || !p.gemm.total_padded_rows)
    reject("a buffer pointer is null");
  if (o.loads_only && p.gemm.tile_m != 16)
    reject("loads_only is built for tile_m 16 only");
  if (o.deep && (p.format != WeightFormat::kFp4 || p.gemm.tile_m != 16 || o.loads_only ||
                 o.pdl.ctas_per_sm > 1))
    reject("deep is built for fp4 weights at tile_m 16, with math, one CTA per SM");
  if (p.format == WeightFormat::kFp4 && (!p.scales || !p.global_scale))
    reject("fp4 weights need scales and global_scale");
  if (o.grid_ctas < 0)
    reject("grid_ctas " + std::to_string(o.grid_ctas) + " is negative");
  if (o.split_k != 0) {
    if (o.split_k != 1 && o.split_k != 2 && o.split_k != 4 && o.split_k != 8)
      reject("split_k " + std::to_string(o.split_k) + " not one of {0, 1, 2, 4, 8}");
    std::int64_t const steps = p.gemm.k / DecodePolicy::step_k(p.format);
    if (steps % o.split_k != 0)
      reject("split_k " + std::to_string(o.split_k) + " does not divide the " +
             std::to_string(steps) + " k steps of k = " + std::to_string(p.gemm.k));
  }
}

std::int64_t chain_grid(int sms, int ctas_per_sm) {
  std::int64_t const per_sm = ctas_per_sm > 0 ? ctas_per_sm : DecodePolicy::kCtasPerSm;
  if (ctas_per_sm == 1)
    return std::max<std::int64_t>(1, sms / 2);
  return std::max<std::int64_t>(1, std::int64_t{sms} * per_sm);
}

} // namespace moefin::gemm
