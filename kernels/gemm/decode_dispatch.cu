// gemm::run_decode: validation, (format, token tiles) as template parameters, and launch.

#include "core/ops/ranges.hpp"
#include "kernels/gemm/decode_kernels.cuh"
#include "kernels/gemm/gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

namespace moefin::gemm {

namespace {

[[noreturn]] void reject(std::string const& what) {
  throw InputError("decode gemm: " + what);
}

} // namespace

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

std::int64_t num_ctas(DecodeGemmParams const& p, Variant v, int ctas_per_sm) {
  if (v == Variant::kTiled)
    return num_ctas(p.gemm, ctas_per_sm);
  // Units are decided on the device; a resident wave is always enough (CTAs loop over units).
  return resident_grid(std::int64_t{1} << 30,
                       ctas_per_sm > 0 ? ctas_per_sm : DecodePolicy::kCtasPerSm);
}

std::int64_t chain_grid(int sms, int ctas_per_sm) {
  std::int64_t const per_sm = ctas_per_sm > 0 ? ctas_per_sm : DecodePolicy::kCtasPerSm;
  if (ctas_per_sm == 1)
    return std::max<std::int64_t>(1, sms / 2);
  return std::max<std::int64_t>(1, std::int64_t{sms} * per_sm);
}

void run_decode(DecodeGemmParams const& p, Variant v, DecodeOptions const& o, Stream stream) {
  validate(p, v, o);
  if (v == Variant::kTiled) {
    run(p.gemm, o.pdl, stream);
    return;
  }
  std::int64_t const wave = num_ctas(p, v, o.pdl.ctas_per_sm);
  if (o.grid_ctas > wave)
    reject("grid_ctas " + std::to_string(o.grid_ctas) + " above the resident wave of " +
           std::to_string(wave) + " CTAs");
  dim3 const grid(static_cast<unsigned>(o.grid_ctas > 0 ? o.grid_ctas : wave));
  PdlDevice const k = pdl_device(o.pdl, kDefaultTrigger);
  std::size_t const smem =
      DecodePolicy::smem_bytes(p.format, p.gemm.tile_m,
                               o.deep   ? DecodePolicy::kDeepStages
                               : o.wide ? DecodePolicy::wide_stages(o.pdl.ctas_per_sm)
                                        : 0,
                               o.wide ? DecodePolicy::kWideWidth : 1);
  auto launch = [&](auto kernel) {
    set_shared_memory(kernel, o.pdl.max_shared_carveout, smem);
    DecodeLaunch const args{o.split_k, o.weights_before_wait ? 1 : 0,
                            static_cast<std::int32_t>(wave)};
    launch_kernel(kernel, grid, dim3(DecodePolicy::kThreads), smem, stream, o.pdl.pdl, p, args, k);
  };
  bool const fp4 = p.format == WeightFormat::kFp4;
  bool const packed = p.value_layout == fp4::ValueLayout::kPacked;
  // The wide kernel with the stages of its residency (DecodePolicy::wide_stages: the two-CTA
  // pipeline or the one-CTA one), at the tile and lean of the launch.
  // The tiles kernel where the values' warp-stages are contiguous (the same stages).
  bool const tiles = p.value_layout == fp4::ValueLayout::kTiles;
  auto launch_wide = [&](auto stages) {
    constexpr int kS = decltype(stages)::value;
    if (tiles)
      o.lean ? (p.gemm.tile_m == 8 ? launch(decode_gemm_tiles_kernel<1, true, kS>)
                                   : launch(decode_gemm_tiles_kernel<2, true, kS>))
             : (p.gemm.tile_m == 8 ? launch(decode_gemm_tiles_kernel<1, false, kS>)
                                   : launch(decode_gemm_tiles_kernel<2, false, kS>));
    else
      o.lean ? (p.gemm.tile_m == 8 ? launch(decode_gemm_wide_kernel<1, true, kS>)
                                   : launch(decode_gemm_wide_kernel<2, true, kS>))
             : (p.gemm.tile_m == 8 ? launch(decode_gemm_wide_kernel<1, false, kS>)
                                   : launch(decode_gemm_wide_kernel<2, false, kS>));
  };
  constexpr int kTwoCtaStages = DecodePolicy::wide_stages(2);
  constexpr int kOneCtaStages = DecodePolicy::wide_stages(1);
  if (o.wide && DecodePolicy::wide_stages(o.pdl.ctas_per_sm) == kTwoCtaStages)
    launch_wide(std::integral_constant<int, kTwoCtaStages>{});
  else if (o.wide)
    launch_wide(std::integral_constant<int, kOneCtaStages>{});
  else if (packed && o.lean)
    p.gemm.tile_m == 8 ? launch(decode_gemm_wpack_kernel<1, true>)
                       : launch(decode_gemm_wpack_kernel<2, true>);
  else if (packed)
    p.gemm.tile_m == 8 ? launch(decode_gemm_wpack_kernel<1, false>)
                       : launch(decode_gemm_wpack_kernel<2, false>);
  else if (p.scale_layout == fp4::ScaleLayout::kTiled && o.lean)
    p.gemm.tile_m == 8 ? launch(decode_gemm_tscale_kernel<1, true>)
                       : launch(decode_gemm_tscale_kernel<2, true>);
  else if (p.scale_layout == fp4::ScaleLayout::kTiled)
    p.gemm.tile_m == 8 ? launch(decode_gemm_tscale_kernel<1, false>)
                       : launch(decode_gemm_tscale_kernel<2, false>);
  else if (o.deep)
    launch(decode_gemm_deep_kernel);
  else if (o.loads_only)
    fp4 ? launch(decode_gemm_kernel<WeightFormat::kFp4, 2, false>)
        : launch(decode_gemm_kernel<WeightFormat::kBf16, 2, false>);
  else if (p.gemm.tile_m == 8)
    fp4 ? launch(decode_gemm_kernel<WeightFormat::kFp4, 1>)
        : launch(decode_gemm_kernel<WeightFormat::kBf16, 1>);
  else
    fp4 ? launch(decode_gemm_kernel<WeightFormat::kFp4, 2>)
        : launch(decode_gemm_kernel<WeightFormat::kBf16, 2>);
}

void fill_fp4(void* values, void* scales, float* global, std::int64_t experts, std::int64_t n,
              std::int64_t k, std::uint64_t seed, float scale, Stream stream,
              fp4::ScaleLayout layout, fp4::ValueLayout values_layout) {
  ranges::check_multiple("fill_fp4 k", k, fp4::kBlock);
  if (values == nullptr && scales == nullptr)
    throw InputError("fill_fp4: neither values nor scales to write");
  if (!fp4::known_value_layout(values_layout))
    throw InputError("fill_fp4: unknown value layout " +
                     std::to_string(static_cast<int>(values_layout)));
  if (values != nullptr && values_layout == fp4::ValueLayout::kTiles) {
    ranges::check_multiple("fill_fp4 k (tiled values)", k, fp4::kStageK);
    ranges::check_multiple("fill_fp4 n (tiled values)", n, fp4::kStageRows);
  }
  if (layout == fp4::ScaleLayout::kTiled) {
    ranges::check_multiple("fill_fp4 k (tiled scales)", k, fp4::kTileK);
    ranges::check_multiple("fill_fp4 n (tiled scales)", n, fp4::kTileRows);
  } else if (layout != fp4::ScaleLayout::kRowMajor) {
    throw InputError("fill_fp4: unknown scale layout " + std::to_string(static_cast<int>(layout)));
  }
  std::int64_t const blocks = experts * n * (k / fp4::kBlock);
  if (blocks <= 0)
    return;
  std::int64_t const ctas = std::min<std::int64_t>((blocks + 255) / 256, 132 * 16);
  fill_fp4_kernel<<<static_cast<unsigned>(ctas), 256, 0, stream>>>(
      static_cast<std::uint8_t*>(values), static_cast<std::uint8_t*>(scales), global, experts,
      blocks, k, layout, values_layout, seed, scale);
  MOEFIN_CUDA_CHECK_LAUNCH();
}

} // namespace moefin::gemm
