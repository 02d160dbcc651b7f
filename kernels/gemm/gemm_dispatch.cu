// gemm::run: tile_m as a template parameter, and launch; the validation is host code
// (gemm_select.cpp).

#include "core/ops/ranges.hpp"
#include "kernels/gemm/gemm_kernels.cuh"

namespace moefin::gemm {

std::int64_t num_ctas(GroupedGemmParams const& p, int ctas_per_sm) {
  constexpr std::int64_t kWarps = Policy::kThreads / 32;
  std::int64_t const items = (p.n / Policy::kWarpCols) * (p.max_rows / p.tile_m);
  return resident_grid((items + kWarps - 1) / kWarps,
                       ctas_per_sm > 0 ? ctas_per_sm : Policy::kCtasPerSm);
}

void run(GroupedGemmParams const& p, PdlKnobs const& knobs, Stream stream) {
  validate(p);
  dim3 const grid(static_cast<unsigned>(num_ctas(p, knobs.ctas_per_sm)));
  PdlDevice const k = pdl_device(knobs, kDefaultTrigger);
  std::size_t const smem = Policy::smem_bytes(p.tile_m);
  auto launch = [&](auto kernel) {
    set_shared_memory(kernel, knobs.max_shared_carveout, smem);
    launch_kernel(kernel, grid, dim3(Policy::kThreads), smem, stream, knobs.pdl, p, k);
  };
  switch (p.tile_m) {
  case 16:
    launch(grouped_gemm_kernel<1>);
    break;
  case 32:
    launch(grouped_gemm_kernel<2>);
    break;
  case 64:
    launch(grouped_gemm_kernel<4>);
    break;
  default:
    launch(grouped_gemm_kernel<8>);
    break;
  }
}

namespace {

/// The fused kernels exist for the decode row tiles only: the larger tiles' instantiations would
/// double this unit's compile time for shapes the fused finalize is not for.
void check_fused_launch(GroupedGemmParams const& p, finalize::fused::FusedParams const& f) {
  validate(p);
  if (p.tile_m != 16 && p.tile_m != 32)
    throw InputError("gemm fused finalize: tile_m " + std::to_string(p.tile_m) +
                     " not one of {16, 32} (the decode row tiles it is built for)");
  ranges::check_multiple("gemm fused finalize hidden", f.fin.hidden, finalize::fused::kSliceCols);
  ranges::check_range<std::int64_t>("gemm fused finalize num_tokens", f.fin.num_tokens, 1, 1 << 20);
  if (!f.counters)
    throw InputError("gemm fused finalize: counters is null");
}

template <Epilogue kE>
void launch_fused(GroupedGemmParams const& p, PdlKnobs const& knobs,
                  finalize::fused::FusedParams const& f, Stream stream) {
  check_fused_launch(p, f);
  dim3 const grid(static_cast<unsigned>(num_ctas(p, knobs.ctas_per_sm)));
  PdlDevice const k = pdl_device(knobs, kDefaultTrigger);
  std::size_t const smem = Policy::smem_bytes(p.tile_m);
  auto go = [&](auto kernel) {
    set_shared_memory(kernel, knobs.max_shared_carveout, smem);
    launch_kernel(kernel, grid, dim3(Policy::kThreads), smem, stream, knobs.pdl, p, k, f);
  };
  if (p.tile_m == 16)
    go(grouped_gemm_fused_kernel<1, kE>);
  else
    go(grouped_gemm_fused_kernel<2, kE>);
}

} // namespace

void validate_fused(GroupedGemmParams const& p, finalize::fused::FusedParams const& f) {
  check_fused_launch(p, f);
  auto const& q = f.fin;
  if (q.gemm_out != p.c || q.hidden_padded != p.ldc || q.num_rows != p.max_rows || q.hidden != p.n)
    throw InputError("gemm fused finalize: fin.gemm_out, hidden_padded, num_rows and hidden must "
                     "be the GEMM's c, ldc, max_rows and n");
  ranges::check_range<std::int64_t>("gemm fused finalize top_k", q.top_k, 1,
                                    finalize::fused::kMaxTopK);
  if (!q.out || !q.expanded_to_permuted || !f.permuted_to_token ||
      (q.weight_type != finalize::WeightType::kNone && !q.expert_weights))
    throw InputError("gemm fused finalize: out, expanded_to_permuted, permuted_to_token or "
                     "expert_weights (unless weight_type none) is null");
  if (reinterpret_cast<std::uintptr_t>(q.out) % 16 != 0)
    throw InputError("gemm fused finalize: out must be 16-byte aligned");
}

void run_fused(GroupedGemmParams const& p, PdlKnobs const& knobs,
               finalize::fused::FusedParams const& f, Stream stream) {
  validate_fused(p, f);
  launch_fused<Epilogue::kFinalize>(p, knobs, f, stream);
}

void run_clearing(GroupedGemmParams const& p, PdlKnobs const& knobs,
                  finalize::fused::FusedParams const& f, Stream stream) {
  launch_fused<Epilogue::kClearCounters>(p, knobs, f, stream);
}

void fill_random_bf16(void* dst, std::int64_t n, std::uint64_t seed, float lo, float hi,
                      float scale, Stream stream) {
  if (n <= 0)
    return;
  std::int64_t const blocks = std::min<std::int64_t>((n + 255) / 256, 132 * 16);
  fill_random_bf16_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      static_cast<__nv_bfloat16*>(dst), n, seed, lo, hi, scale);
  MOEFIN_CUDA_CHECK_LAUNCH();
}

} // namespace moefin::gemm
