// gemm::run_decode: (format, token tiles) as template parameters, and launch; the validation is
// host code (decode_select.cpp).

#include "core/ops/ranges.hpp"
#include "kernels/gemm/decode_kernels.cuh"
#include "kernels/gemm/gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

namespace moefin::gemm {

std::int64_t num_ctas(DecodeGemmParams const& p, Variant v, int ctas_per_sm) {
  if (v == Variant::kTiled)
    return num_ctas(p.gemm, ctas_per_sm);
  // Units are decided on the device; a resident wave is always enough (CTAs loop over units).
  return resident_grid(std::int64_t{1} << 30,
                       ctas_per_sm > 0 ? ctas_per_sm : DecodePolicy::kCtasPerSm);
}

void run_decode(DecodeGemmParams const& p, Variant v, DecodeOptions const& o, Stream stream) {
  validate(p, v, o);
  if (v == Variant::kTiled) {
    run(p.gemm, o.pdl, stream);
    return;
  }
  std::int64_t const wave = num_ctas(p, v, o.pdl.ctas_per_sm);
  if (o.grid_ctas > wave)
    throw InputError("decode gemm: grid_ctas " + std::to_string(o.grid_ctas) + " above the resident wave of " +
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
