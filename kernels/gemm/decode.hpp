#pragma once
// gemm::run_decode — the grouped GEMM of a decode step, built to stream each active expert's
// weights once at close to the copy bandwidth, for bf16 and for 4-bit weights (core/fp4.hpp)
// dequantized inside the GEMM. Host-visible header: no CUDA includes.
//
// Variants (kernels/gemm/gemm.hpp is the tiled one, the one the layer chain runs today):
//   tiled   gemm::run: each warp owns (row tile, 16 columns) items over the whole k; bf16 only.
//   splitk  this file: weights are the MMA's A operand (mma.sync m16n8k16, 32 weight rows per
//           warp), the row tile's tokens its n8 tiles, so a decode tile of 1-2 tokens wastes an
//           n8 tile, not an m16 one. The 8 warps of a CTA take one unit (row tile, 32 x groups
//           weight rows) and split its k range `ks` ways (plan_split: chosen on the device from
//           the tile count, so that top-8 at T = 1, 8 experts, still fills every SM); their fp32
//           partials are added in shared memory in a fixed order. Weights stream through a
//           per-warp cp.async pipeline (4 stages of 2 KiB in flight, L1 bypassed, L2 evict-first:
//           read once); activations of the tile's real tokens (padding rows are neither read nor
//           written) come through L1 into registers one stage ahead; fp4 values become exact
//           bf16 (e2m1 * e4m3 * 2^-8) with integer bit operations and one bf16 multiply per pair,
//           the global scale and the 2^8 are applied to the fp32 sums.
// PDL: the knobs of kernels/common/pdl_stage.cuh; Trigger::kDefault = implicit at exit. Every
// read of the activations follows the wait. With `weights_before_wait` the expert map
// (total_padded_rows, cta_to_expert, row_token: routing output) and the first stages of weights
// are read before the wait: legal only when the map is final when the kernel starts (the caller
// orders routing before this launch, e.g. a kernel in between waits before it triggers).

#include "core/ops/pdl_knobs.hpp"
#include "kernels/gemm/decode_plan.hpp"

#include <cstdint>
#include <string>

struct CUstream_st;

namespace moefin::gemm {

using Stream = CUstream_st*;

enum class Variant : std::int32_t {
  kTiled = 0,  // gemm::run (bf16 weights only)
  kSplitK = 1, // run_decode's split-K kernel
};
char const* variant_name(Variant v); // "tiled", "splitk"
bool parse_variant(std::string const& s, Variant* out);

struct DecodeOptions {
  PdlKnobs pdl;
  bool weights_before_wait = false; // see the header comment
  int split_k = 0;                  // 0: plan_split's choice; 1, 2, 4 or 8: that ks (tests)
  // Diagnostic (tile 16 only): every load and store of the kernel but no dequantization or MMA,
  // so that its time against the full kernel's says whether the math or the memory bounds it.
  // The output is meaningless.
  bool loads_only = false;
  // kSplitK: CTAs launched, 1..num_ctas (0: num_ctas). The split stays planned for num_ctas's
  // grid (DecodeLaunch::plan_grid), so the output bits do not depend on it.
  std::int64_t grid_ctas = 0;
  // Candidate (kernels/gemm/decode_candidates.hpp; fp4 at tile 16, with math): a pipeline of
  // DecodePolicy::kDeepStages stages, twice the weight bytes in flight per warp, one CTA per SM.
  bool deep = false;
  // Candidate (with scale layout tiled only): the activations' address formed once per unit,
  // padding rows' lanes keeping stale registers instead of zeroing them, and the scales placed
  // as bf16 bits instead of converted (decode_kernels.cuh, kLean): fewer instructions per
  // stage, the same output bits.
  bool lean = false;
  // Candidate (with value layout kPacked or kTiles only; kTiles needs it): two warp-stages per
  // pipeline stage (DecodePolicy::kWideWidth, kWideStages), so that a stage's fixed work is paid
  // once per two; the same split and output bits.
  bool wide = false;
};

/// Throws InputError naming the field: the grouped GEMM's limits of gemm::validate for kTiled
/// (and bf16 weights); for kSplitK n a multiple of 32, k of step_k (32 bf16, 128 fp4), tile_m 8
/// or 16, max_rows a multiple of tile_m, ldc >= n, pointers set (scales and global_scale for
/// fp4), a forced split_k that divides the k steps, grid_ctas in 0..num_ctas (kTiled: 0), deep
/// only for fp4 at tile 16 with math and one CTA per SM; scale layout kTiled only for fp4 with
/// kSplitK, without deep or loads_only, scales aligned to 16 bytes; lean only with
/// scale layout kTiled; value layouts kPacked and kTiles only with scale layout kTiled; wide only
/// with value layout kPacked or kTiles, and kTiles only with wide.
void validate(DecodeGemmParams const& p, Variant v, DecodeOptions const& o = {});

/// CTAs of the launch: one resident wave of `ctas_per_sm` (0: the variant's policy) per SM.
std::int64_t num_ctas(DecodeGemmParams const& p, Variant v, int ctas_per_sm = 0);

/// CTAs of a kSplitK GEMM inside the layer chain at `ctas_per_sm` (PdlKnobs::ctas_per_sm) on `sms`
/// SMs. At 1 the chain promises one resident wave in which every kernel before finalize fits at
/// once, so that early triggers take effect; a CTA of this kernel holds half an SM's registers (256
/// threads x 125-128 registers = 32768 of 65536), so GEMM1's and GEMM2's CTAs beside permute's and
/// activation's (6144 + 10240 registers) fit only on distinct SMs: each GEMM takes half of them
/// (docs/design/decode-gemm.md, "In the race cell"). Every decode kernel a chain launches is held
/// to 128 registers for it (test_sass_stage_mix; 158 cost the race cell its stale reads). Otherwise
/// the wave of num_ctas.
std::int64_t chain_grid(int sms, int ctas_per_sm);

/// The split the kSplitK kernel takes for `tiles` row tiles on a grid of `grid` CTAs.
DecodeSplit split_of(DecodeGemmParams const& p, std::int64_t tiles, std::int64_t grid,
                     int split_k = 0);

/// Launches variant v; kTiled forwards to gemm::run(p.gemm, o.pdl) (weights_before_wait and
/// split_k do not apply to it and must be unset).
void run_decode(DecodeGemmParams const& p, Variant v, DecodeOptions const& o, Stream stream);

/// Fills 4-bit weights of `experts` matrices [n][k] on the device: the seeded quantizer of
/// core/fp4.hpp (the same bits as fp4::quantize_block on the host) with source weights bounded
/// by `scale`, values [experts][n][k/2] stored as `values_layout` says, scales [experts][n][k/16]
/// stored as `layout` says (kTiled: n a multiple of 16, k of 128; values kTiles: n of 32, k of
/// 128), global [experts]. Values or
/// scales may be null (not both): then only the other and the global scales are written.
void fill_fp4(void* values, void* scales, float* global, std::int64_t experts, std::int64_t n,
              std::int64_t k, std::uint64_t seed, float scale, Stream stream,
              fp4::ScaleLayout layout = fp4::ScaleLayout::kRowMajor,
              fp4::ValueLayout values_layout = fp4::ValueLayout::kNibbles);

} // namespace moefin::gemm
