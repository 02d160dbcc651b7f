#pragma once
// The split-K decode GEMM kernel (kernels/gemm/decode.hpp) and the fp4 weight generator.
//
// Operand layout. The MMA's A operand is 16 weight rows x 16 k, B is 16 k x 8 tokens. Inside
// one pipeline stage the k order is permuted identically for A and B (the sum does not change),
// so that lane (g, q) (g = lane / 4, q = lane % 4) reads only contiguous bytes: 16 bytes of
// each of its weight rows g, g + 8 (of both m16 tiles) at k = kq q .. kq q + kq - 1 (kq = 8 for
// bf16, 32 for fp4) and the same k of token g's activations.
//   bf16: 8 k per lane = words w0..w3; MMA step s takes a0/a2 = words 2s, 2s + 1 of row g (a1/a3
//         of row g + 8) and b0/b1 = words 2s, 2s + 1 of the activations.
//   fp4:  32 k per lane = 4 words of 8 nibbles. Word j becomes 4 bf16 pairs r_i = (nibble i,
//         nibble i + 4), i = 0..3 (both halves of a pair need the same shifts); its two MMA
//         steps take a0/a2 = r0/r1 and r2/r3, and b0/b1 = activations (k0, k4)/(k1, k5) and
//         (k2, k6)/(k3, k7) of the word's 8 k, paired with one byte permute each. Packed values
//         (fp4::ValueLayout::kPacked) hold the same word bit-permuted: the same pairs, fewer
//         instructions (fp4::packed_pair_bits).
// fp4 values: bits (e1 e0 m) of a nibble placed at bf16 bits 8..6 and its sign at bit 15 give
// exactly e2m1 * 2^-126 (code 1, 0.5, as a bf16 subnormal); one bf16 multiply by
// e4m3 * 2^118 (below bf16's largest value for every e4m3) makes it e2m1 * e4m3 * 2^-8, exact
// (2 + 4 significant bits); the fp32 sums get global * 2^8.

#include "core/fp4.hpp"
#include "kernels/common/pdl_stage.cuh"
#include "kernels/gemm/decode.hpp"
#include "kernels/gemm/mma.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace moefin::gemm {

namespace decode {

inline constexpr std::uint32_t kNegZeroPair = 0x80008000u;

/// a * b + (-0) on bf16 pairs: the product rounded once (exact for the dequantization).
__device__ __forceinline__ std::uint32_t bf16x2_mul(std::uint32_t a, std::uint32_t b) {
  std::uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(kNegZeroPair));
  return d;
}

/// The two e4m3 scale bytes in the low half of `pair` (low byte first) as bf16 pairs
/// (s * 2^118, s * 2^118): every e4m3 value is exact in fp16, and times 2^118 in bf16.
__device__ __forceinline__ void scale_pairs(std::uint32_t pair, std::uint32_t& s0,
                                            std::uint32_t& s1) {
  __half2 const h(
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xFFFFu), __NV_E4M3));
  float2 const f = __half22float2(h);
  __nv_bfloat162 const b = __floats2bfloat162_rn(f.x * 0x1p118f, f.y * 0x1p118f);
  std::uint32_t const u = *reinterpret_cast<std::uint32_t const*>(&b);
  s0 = __byte_perm(u, 0, 0x1010);
  s1 = __byte_perm(u, 0, 0x3232);
}

/// scale_pairs with integer placement and two exact multiplies (fp4::e4m3x2_bits: both bytes at
/// once), then the halves duplicated; the same bits for every positive scale byte, in 6
/// instructions instead of 8.
__device__ __forceinline__ void scale_pairs_lean(std::uint32_t pair, std::uint32_t& s0,
                                                 std::uint32_t& s1) {
  std::uint32_t const u =
      bf16x2_mul(bf16x2_mul(fp4::e4m3x2_bits(pair), fp4::kBf16Pair2p119), fp4::kBf16Pair2p119);
  s0 = __byte_perm(u, 0, 0x1010);
  s1 = __byte_perm(u, 0, 0x3232);
}

/// One warp's shared memory of one stage: the weight copies [m16][row half][lane], then the fp4
/// scale words [m16][lane].
template <WeightFormat kF> struct Stage {
  static constexpr int kU4 = DecodePolicy::stage_bytes(kF) / 16;
};

} // namespace decode

namespace decode {

/// The kernel body: kNT n8 token tiles per row tile (tile_m = 8 kNT), kS pipeline stages per
/// warp. See decode.hpp for the work division and the top of this file for the operand layout.
/// kMath false is the diagnostic that makes every load and store but no dequantization or MMA
/// (DecodeOptions::loads_only). kScales: where fp4 scales are read from (ScaleStaging). kLean
/// (DecodeOptions::lean, built with kScales kTiled only): the activations' row
/// address is formed once per unit, each stage adds its k offset and loads at immediate offsets
/// from one 64-bit address, and a lane whose token row is padding skips its load and keeps its
/// old registers (zeros at first) instead of zeroing them: column n of an MMA's output depends
/// on column n of B only, and a padding token's columns are never stored. The scale pairs come
/// from scale_pairs_lean. kValues kPacked (built with kScales kTiled only): the fp4 words are
/// stored bit-permuted (fp4::pack_word) and become the same pairs in 8 integer instructions
/// instead of 13 (fp4::packed_pair_bits).
/// kW (DecodeOptions::wide, built with kValues kPacked only): kW warp-stages of kStep k in one
/// pipeline stage, so that the per-stage work (its copies' bookkeeping, the metadata ring, the
/// activation look-ahead, the wait and the loop) is paid once per kW warp-stages. The k split is
/// plan_split's as for kW 1, so the sums run in the same order and the output bits are the same;
/// a k slice of an odd number of warp-stages ends in a stage whose second half is not loaded
/// (its copies read nothing) and not computed (`tail`).
/// The "stage-mix: unit" comments mark the code that runs once per unit, not once per stage
/// (begin, end, or one line): tools/sass/sass_stage_mix.py counts the main loop's instructions
/// outside them as the cost of one pipeline stage.
template <WeightFormat kF, int kNT, bool kMath, int kS,
          fp4::ScaleLayout kScales = fp4::ScaleLayout::kRowMajor, bool kLean = false,
          fp4::ValueLayout kValues = fp4::ValueLayout::kNibbles, int kW = 1>
__device__ __forceinline__ void gemm_body(DecodeGemmParams const& p, DecodeLaunch launch,
                                          PdlDevice const& k) {
  int const forced_ks = launch.forced_ks;
  int const weights_before_wait = launch.weights_before_wait;
  constexpr bool kFp4 = kF == WeightFormat::kFp4;
  constexpr int kM = DecodePolicy::kM16;
  constexpr int kTile = 8 * kNT;
  constexpr int kStep = DecodePolicy::step_k(kF);
  constexpr int kLaneK = kStep / 4;     // k of one lane per row and stage
  constexpr int kChunks = kFp4 ? 4 : 1; // 16-byte activation chunks per lane and n8 tile
  static_assert(kW == 1 || (kW == 2 && fp4::packed_words(kValues)),
                "two warp-stages per stage are built into the packed-value kernels only");
  static_assert(kValues != fp4::ValueLayout::kTiles || kW == 2,
                "tiled values are read by the wide kernel only");
  // kTiles: a warp-stage's copies are one contiguous fp4::kStageBytes, copy (m, h) of it
  // kCopyBytes further per 2 m + h; row-major values are row_bytes apart per row.
  constexpr bool kTiles = kValues == fp4::ValueLayout::kTiles;
  constexpr int kCopyBytes = 32 * 16;
  static_assert(!kTiles ||
                    (kFp4 && kStep == fp4::kStageK && DecodePolicy::kWarpRows == fp4::kStageRows),
                "a warp-stage is a kTiles stage");
  constexpr int kSubU4 = decode::Stage<kF>::kU4; // one warp-stage's shared memory
  constexpr int kStageU4 = kW * kSubU4;
  constexpr int kAcc = kM * kNT * 4;
  constexpr std::int64_t kValueBytesPerK2 = kFp4 ? 1 : 4; // bytes of 2 k of one row

  extern __shared__ uint4 smem[];
  int const lane = threadIdx.x & 31;
  int const warp = threadIdx.x >> 5;
  int const g = lane >> 2, q = lane & 3;
  uint4* const stages = smem + warp * (kS * kStageU4);
  std::int32_t* const ring =
      reinterpret_cast<std::int32_t*>(smem + DecodePolicy::kWarps * kS * kStageU4) +
      warp * (kS * 32) + lane;
  float* const red =
      reinterpret_cast<float*>(ring - (warp * (kS * 32) + lane) + DecodePolicy::kWarps * kS * 32);

  pdl_enter(k);
  if (!weights_before_wait)
    pdl_wait_point(k);

  // The split of this launch, from the tile count routing wrote (the same on every CTA).
  std::int64_t const total = min(
      max(static_cast<std::int64_t>(*p.gemm.total_padded_rows), std::int64_t{0}), p.gemm.max_rows);
  std::int64_t const tiles = total / kTile;
  DecodeSplit const split =
      plan_split(tiles, p.gemm.n, p.gemm.k, kF, launch.plan_grid > 0 ? launch.plan_grid : gridDim.x,
                 forced_ks);
  int const ks = split.ks > 0 ? split.ks : 1;
  int const rgroup = warp / ks, kslice = warp % ks;
  // Units, rows and k fit in 32 bits (validate: n, k < 2^20, rows < 2^31); byte offsets of the
  // weights do not, and are formed in 64 bits once per unit.
  int const kslice_len = static_cast<int>(p.gemm.k) / ks;
  int const sub_spu = kslice_len / kStep;       // warp-stages per unit
  int const spu = (sub_spu + kW - 1) / kW;      // pipeline stages per unit
  bool const odd = kW > 1 && sub_spu % kW != 0; // the unit's last stage holds one warp-stage
  int const units = split.ks > 0 ? static_cast<int>(split.units) : 0;
  int const row_blocks = static_cast<int>(split.row_blocks);
  int const grid = static_cast<int>(gridDim.x);
  int const cta = static_cast<int>(blockIdx.x);
  int const my_units = cta < units ? (units - 1 - cta) / grid + 1 : 0;
  int const loads = my_units * spu;
  int const group_rows = split.groups * DecodePolicy::kWarpRows;
  int const row_bytes = static_cast<int>(p.gemm.k / 2 * kValueBytesPerK2);
  int const n = static_cast<int>(p.gemm.n);
  auto const* values = static_cast<std::uint8_t const*>(p.gemm.b);
  std::uint64_t const policy = l2_evict_first();

  auto tile_of = [&](int u) { return u / row_blocks; };
  auto rowbase_of = [&](int u) {
    return (u % row_blocks) * group_rows + rgroup * DecodePolicy::kWarpRows;
  };
  auto expert_at = [&](int u) {
    std::int32_t const e = p.gemm.cta_to_expert[tile_of(u)];
    return e >= 0 && e < p.gemm.num_local_experts ? e : -1;
  };
  auto row_token_at = [&](int u, int nt) {
    return p.gemm.row_token == nullptr ? 0 : p.gemm.row_token[tile_of(u) * kTile + 8 * nt + g];
  };

  // ---- Issue side: load `iss_l` of this warp's stream (unit iss_u, stage iss_step of its k
  // slice). The expert and token rows of the next unit are fetched one unit ahead, so that
  // starting a unit never waits for a load.
  int iss_u = cta, iss_l = 0, iss_step = 0, iss_stage = 0;
  std::uint8_t const* wsrc = values; // row g of the first m16 tile, at this k slice
  bool won = false;
  std::uint8_t const* ssrc = p.scales; // fp4: this lane's scale copy of stage 0 (ScaleStaging)
  std::int32_t meta = -1;              // (expert << 8) | token-row bits, or -1: no expert
  std::int32_t nx_e = -1;
  std::int32_t nx_rt[kNT];
  auto fetch_next_unit = [&](int u) {
    bool const in = u < units;
    nx_e = in ? expert_at(u) : -1;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
      nx_rt[nt] = in ? row_token_at(u, nt) : -1;
  };
  auto begin_unit = [&](int u) { // stage-mix: unit begin
    int const rowbase = rowbase_of(u);
    won = nx_e >= 0 && rowbase < n;
    std::int64_t const row = static_cast<std::int64_t>(won ? nx_e : 0) * n + rowbase + g;
    int const k0 = kslice * kslice_len;
    if constexpr (kTiles)
      wsrc = values + fp4::value_chunk_offset(kValues, row - g, k0 / 32, p.gemm.k) + 16 * lane;
    else
      wsrc = values + row * row_bytes + k0 / 2 * kValueBytesPerK2 + 16 * q;
    if constexpr (kFp4) {
      // kW 2: lanes 16..31 copy the second warp-stage's scales, a tile further in k.
      ssrc =
          p.scales + (kScales == fp4::ScaleLayout::kTiled
                          ? (kW == 1 ? ScaleStaging::tiled_src(row - g, k0, p.gemm.k, lane)
                                     : ScaleStaging::tiled_src(row - g, k0, p.gemm.k, lane & 15) +
                                           (lane >> 4) * fp4::kTileBytes)
                          : ScaleStaging::rowmajor_src(row, k0, p.gemm.k, q));
    }
    int bits = 0;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
      bits |= (nx_rt[nt] >= 0 ? 1 : 0) << nt;
    meta = nx_e >= 0 ? (nx_e << 8) | bits : -1;
    fetch_next_unit(u + grid);
  }; // stage-mix: unit end
  auto issue_next = [&]() {
    if (iss_l < loads) {
      if (iss_step == 0 && iss_l > 0)
        begin_unit(iss_u);
      uint4* const st = stages + iss_stage * kStageU4;
      // Bytes from one warp-stage's copies to the next one's.
      constexpr int kSubBytes =
          kTiles ? fp4::kStageBytes : (kStep / 2) * static_cast<int>(kValueBytesPerK2);
      int const koff = iss_step * kW * kSubBytes;
      // kW 2: the second warp-stage of a unit's odd last stage reads nothing.
      bool const tail = odd && iss_step + 1 == spu;
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int w = 0; w < kW; ++w)
            cp_async16_hint(st + w * kSubU4 + (2 * m + h) * 32 + lane,
                            wsrc +
                                (kTiles ? (2 * m + h) * kCopyBytes : (16 * m + 8 * h) * row_bytes) +
                                koff + w * kSubBytes,
                            won && (w == 0 || !tail), policy);
      if constexpr (kFp4 && kScales == fp4::ScaleLayout::kTiled && kW == 2) {
        static_assert(2 * ScaleStaging::kTiledLanes == 32, "a lane per scale chunk of two stages");
        cp_async16_hint(st + (lane >> 4) * kSubU4 + 4 * 32 + (lane & 15),
                        ssrc + iss_step * 2 * ScaleStaging::stage_advance(kScales),
                        won && (lane < 16 || !tail), policy);
      } else if constexpr (kFp4 && kScales == fp4::ScaleLayout::kTiled) {
        if (lane < ScaleStaging::kTiledLanes)
          cp_async16_hint(st + 4 * 32 + lane,
                          ssrc + iss_step * ScaleStaging::stage_advance(kScales), won, policy);
      } else if constexpr (kFp4) {
        auto* const sst = reinterpret_cast<std::uint32_t*>(st + 4 * 32);
#pragma unroll
        for (int m = 0; m < kM; ++m)
          cp_async4_hint(sst + m * 32 + lane,
                         ssrc + 16 * m * (p.gemm.k / 16) +
                             iss_step * ScaleStaging::stage_advance(kScales),
                         won, policy);
      }
      ring[iss_stage * 32] = meta;
      ++iss_l;
      if (++iss_step == spu) {
        iss_step = 0;
        iss_u += grid;
      }
      iss_stage = iss_stage + 1 == kS ? 0 : iss_stage + 1;
    }
    cp_async_commit(); // empty past the end: the wait below counts groups uniformly
  };

  if (loads > 0) {
    fetch_next_unit(blockIdx.x);
    begin_unit(blockIdx.x);
  }
#pragma unroll
  for (int s = 0; s < kS - 1; ++s)
    issue_next();
  if (weights_before_wait)
    pdl_wait_point(k);

  // ---- Compute side. Activations of the next stage are loaded chunk by chunk as the current
  // stage's chunks are consumed (one register set, a stage of latency hidden).
  auto const* a = static_cast<std::uint8_t const*>(p.gemm.a);
  int const a_row_bytes = static_cast<int>(p.gemm.k) * 2;
  // n8 tiles whose activations are loaded a stage ahead; fp4's second one (a tile with more than
  // 8 tokens, rare at decode sizes) is read when used, which keeps 16 registers free.
  constexpr int kPre = kFp4 ? 1 : kNT;
  uint4 act[kPre][kChunks];
  if constexpr (kLean)
#pragma unroll
    for (int nt = 0; nt < kPre; ++nt)
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
        act[nt][c] = make_uint4(0, 0, 0, 0);
  std::uint32_t okmask[kNT]; // ballot of the lanes whose token row is real (per n8 tile)
  std::uint32_t nx_mask[kNT];
  std::uint8_t const* nx_ptr = a; // token g of the next load's first n8 tile, at its k
  std::uint8_t const* nx_row = a; // kLean: the same at the first k of the unit's slice
  unsigned nx_ok = 0;             // bit nt: this lane's token row of n8 tile nt is real
  std::int32_t cur_meta = -1, nxt_meta = -1;
  float nx_gscale = 0.0f; // fp4: global scale * 2^8 of the next load's unit, when it starts one
  // Reads load l's metadata from the ring and points the activation loads at its rows (row
  // tile `tile`; the division that finds it runs once per unit, not per stage).
  auto look_ahead = [&](int l, int tile, int step, int slot) {
    nxt_meta = l < loads ? ring[slot * 32] : -1;
    if constexpr (kFp4)
      if (step == 0 && nxt_meta >= 0)                                 // stage-mix: unit begin
        nx_gscale = __ldg(p.global_scale + (nxt_meta >> 8)) * 256.0f; // stage-mix: unit end
    if constexpr (kLean) {
      if (step == 0) // stage-mix: unit begin
        nx_row = a + static_cast<std::int64_t>(tile * kTile + g) * a_row_bytes +
                 (kslice * kslice_len + kLaneK * q) * 2; // stage-mix: unit end
      nx_ptr = nx_row + step * (kW * kStep * 2);
    } else {
      int const k0 = kslice * kslice_len + step * kW * kStep;
      nx_ptr =
          a + static_cast<std::int64_t>(tile * kTile + g) * a_row_bytes + (k0 + kLaneK * q) * 2;
    }
    nx_ok = nxt_meta >= 0 ? static_cast<unsigned>(nxt_meta) & ((1u << kNT) - 1u) : 0u;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
      nx_mask[nt] = __ballot_sync(0xffffffffu, (nx_ok >> nt) & 1u);
  };
  auto chunk_at = [&](std::uint8_t const* ptr, unsigned ok, int nt, int c) {
    return (ok >> nt) & 1u ? __ldg(reinterpret_cast<uint4 const*>(ptr + 8 * nt * a_row_bytes) + c)
                           : make_uint4(0, 0, 0, 0);
  };
  // Chunk c of n8 tile nt at `ptr` (rows `ok`) into the look-ahead registers.
  auto load_chunk_from = [&](std::uint8_t const* ptr, unsigned ok, int nt, int c) {
    if constexpr (kLean) {
      if (nt < kPre && ((ok >> nt) & 1u))
        act[nt < kPre ? nt : 0][c] =
            __ldg(reinterpret_cast<uint4 const*>(ptr + 8 * nt * a_row_bytes) + c);
    } else if (nt < kPre) {
      act[nt < kPre ? nt : 0][c] = chunk_at(ptr, ok, nt, c);
    }
  };
  auto load_chunk = [&](int nt, int c) { load_chunk_from(nx_ptr, nx_ok, nt, c); };

  int cu = cta, cstep = 0, cstage = 0;
  int ctile = loads > 0 ? tile_of(cu) : 0; // row tile of unit cu
  if (loads > 0) {
    look_ahead(0, ctile, 0, 0);
#pragma unroll
    for (int nt = 0; nt < kPre; ++nt)
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
        load_chunk(nt, c);
  }
  float acc[kM][kNT][4];
  float gscale = 1.0f;
  for (int l = 0; l < loads; ++l) {
    if constexpr (kFp4)
      __syncwarp(); // every lane is done reading the scale words of the slot refilled next
    issue_next();
    cp_async_wait<kS - 1>(); // load l has landed
    if constexpr (kFp4)
      __syncwarp(); // and so have the scale words the lane pairs copied
    cur_meta = nxt_meta;
    float const unit_gscale = nx_gscale;
    std::uint8_t const* const cur_ptr = nx_ptr;
    unsigned const cur_ok = nx_ok;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
      okmask[nt] = nx_mask[nt];
    bool const last = cstep + 1 == spu; // of this unit
    int const ntile =
        last ? (l + 1 < loads ? tile_of(cu + grid) : 0) : ctile; // stage-mix: unit line
    int const nslot = cstage + 1 == kS ? 0 : cstage + 1;
    look_ahead(l + 1, ntile, last ? 0 : cstep + 1, nslot);
    if (cstep == 0) { // stage-mix: unit begin
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            acc[m][nt][i] = 0.0f;
      gscale = unit_gscale;
    } // stage-mix: unit end

    uint4 const* const st = stages + cstage * kStageU4;
    if constexpr (!kMath) {
      // Consume what was loaded (so that no load is dropped) into a value that is stored.
      std::uint32_t x = st[lane].x ^ st[3 * 32 + lane].w;
#pragma unroll
      for (int nt = 0; nt < kPre; ++nt)
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          x ^= act[nt][c].x ^ act[nt][c].y ^ act[nt][c].z ^ act[nt][c].w;
          load_chunk(nt, c);
        }
      acc[0][0][0] += __uint_as_float(x & 0x007fffffu); // a subnormal: the sums stay tiny
    } else if constexpr (kFp4) {
      // kW 2: warp-stage 0's activations are consumed while warp-stage 1's are loaded into the
      // same registers, then those while the next stage's are (the next stage's at once when
      // this one is a unit's odd last: `tail`).
      bool const tail = odd && last;
      std::uint8_t const* const after0 = kW == 1 || tail ? nx_ptr : cur_ptr + kStep * 2;
      unsigned const after0_ok = kW == 1 || tail ? nx_ok : cur_ok;
#pragma unroll
      for (int w = 0; w < kW; ++w) {
        if (w > 0 && tail)
          break;
        std::uint8_t const* const next_ptr = w + 1 < kW ? after0 : nx_ptr;
        unsigned const next_ok = w + 1 < kW ? after0_ok : nx_ok;
        std::uint8_t const* const sub_ptr = cur_ptr + w * (kStep * 2);
        // Word j of each weight copy is read when its k comes up (4 registers live, not 16).
        auto const* stw = reinterpret_cast<std::uint32_t const*>(st + w * kSubU4) + lane * 4;
        auto const* sst = reinterpret_cast<std::uint32_t const*>(st + w * kSubU4 + 4 * 32);
        std::uint32_t sc[kM][2][2]; // [m16][row half][block]: (s, s) bf16 pairs
#pragma unroll
        for (int m = 0; m < kM; ++m)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            std::uint32_t const w = sst[m * 32 + g * 4 + (q & 2) + h];
            if constexpr (kLean)
              decode::scale_pairs_lean(w >> (16 * (q & 1)), sc[m][h][0], sc[m][h][1]);
            else
              decode::scale_pairs(w >> (16 * (q & 1)), sc[m][h][0], sc[m][h][1]);
          }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          std::uint32_t bfr[kNT][2][2];
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt) {
            if (nt >= kPre && okmask[nt] == 0)
              continue;
            uint4 const c =
                nt < kPre ? act[nt < kPre ? nt : 0][j] : chunk_at(sub_ptr, cur_ok, nt, j);
            bfr[nt][0][0] = __byte_perm(c.x, c.z, 0x5410);
            bfr[nt][0][1] = __byte_perm(c.x, c.z, 0x7632);
            bfr[nt][1][0] = __byte_perm(c.y, c.w, 0x5410);
            bfr[nt][1][1] = __byte_perm(c.y, c.w, 0x7632);
            // The next warp-stage's chunk j into the registers just consumed.
            load_chunk_from(next_ptr, next_ok, nt, j);
          }
#pragma unroll
          for (int m = 0; m < kM; ++m) {
            std::uint32_t r[2][4];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              std::uint32_t const w = stw[(2 * m + h) * 128 + j];
              std::uint32_t const s = sc[m][h][j >> 1];
              if constexpr (fp4::packed_words(kValues)) {
                r[h][0] = decode::bf16x2_mul(fp4::packed_pair_bits<0>(w), s);
                r[h][1] = decode::bf16x2_mul(fp4::packed_pair_bits<1>(w), s);
                r[h][2] = decode::bf16x2_mul(fp4::packed_pair_bits<2>(w), s);
                r[h][3] = decode::bf16x2_mul(fp4::packed_pair_bits<3>(w), s);
              } else {
                std::uint32_t const w2 = w >> 8;
                r[h][0] = decode::bf16x2_mul(fp4::e2m1_pair_bits<0>(w), s);
                r[h][1] = decode::bf16x2_mul(fp4::e2m1_pair_bits<1>(w), s);
                r[h][2] = decode::bf16x2_mul(fp4::e2m1_pair_bits<0>(w2), s);
                r[h][3] = decode::bf16x2_mul(fp4::e2m1_pair_bits<1>(w2), s);
              }
            }
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) {
              if (okmask[nt] == 0)
                continue;
              mma_bf16(acc[m][nt], r[0][0], r[1][0], r[0][1], r[1][1], bfr[nt][0][0],
                       bfr[nt][0][1]);
              mma_bf16(acc[m][nt], r[0][2], r[1][2], r[0][3], r[1][3], bfr[nt][1][0],
                       bfr[nt][1][1]);
            }
          }
        }
      }
    } else {
      uint4 wv[kM][2];
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          wv[m][h] = st[(2 * m + h) * 32 + lane];
      uint4 b[kNT];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        b[nt] = act[nt < kPre ? nt : 0][0];
        load_chunk(nt, 0);
      }
#pragma unroll
      for (int s = 0; s < 2; ++s)
#pragma unroll
        for (int m = 0; m < kM; ++m)
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt) {
            if (okmask[nt] == 0)
              continue;
            mma_bf16(acc[m][nt], word(wv[m][0], 2 * s), word(wv[m][1], 2 * s),
                     word(wv[m][0], 2 * s + 1), word(wv[m][1], 2 * s + 1), word(b[nt], 2 * s),
                     word(b[nt], 2 * s + 1));
          }
    }

    if (last) { // stage-mix: unit begin
      // The unit's last stage: the k slices of each row group are added in slice order, then
      // slice 0 stores the real token rows of a valid expert.
      if (ks > 1) {
        float4* const mine = reinterpret_cast<float4*>(red + (warp * 32 + lane) * kAcc);
#pragma unroll
        for (int m = 0; m < kM; ++m)
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt)
            mine[m * kNT + nt] =
                make_float4(acc[m][nt][0], acc[m][nt][1], acc[m][nt][2], acc[m][nt][3]);
        __syncthreads();
        if (kslice == 0)
          for (int j = 1; j < ks; ++j) {
            float4 const* other =
                reinterpret_cast<float4 const*>(red + ((warp + j) * 32 + lane) * kAcc);
#pragma unroll
            for (int m = 0; m < kM; ++m)
#pragma unroll
              for (int nt = 0; nt < kNT; ++nt) {
                float4 const o = other[m * kNT + nt];
                acc[m][nt][0] += o.x;
                acc[m][nt][1] += o.y;
                acc[m][nt][2] += o.z;
                acc[m][nt][3] += o.w;
              }
          }
      }
      int const rowbase = rowbase_of(cu);
      if (kslice == 0 && cur_meta >= 0 && rowbase < n) {
        auto* c = static_cast<__nv_bfloat16*>(p.gemm.c);
        std::int64_t const row0 = static_cast<std::int64_t>(ctile) * kTile;
        float const scale = kFp4 ? gscale : 1.0f;
#pragma unroll
        for (int m = 0; m < kM; ++m)
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
            for (int i = 0; i < 2; ++i) {
              int const token = 8 * nt + 2 * q + i;
              if (!((okmask[nt] >> (4 * (2 * q + i))) & 1u))
                continue;
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                int const col = rowbase + 16 * m + 8 * h + g;
                c[(row0 + token) * p.gemm.ldc + col] =
                    __float2bfloat16_rn(acc[m][nt][2 * h + i] * scale);
              }
            }
      }
      if (ks > 1)
        __syncthreads(); // the partials may be overwritten by the next unit
      cu += grid;
      ctile = ntile;
      cstep = 0;
    } else { // stage-mix: unit end
      ++cstep;
    }
    cstage = cstage + 1 == kS ? 0 : cstage + 1;
  }
  cp_async_wait<0>();
  pdl_exit(k);
}

} // namespace decode

/// The split-K decode GEMM at the default depth, two CTAs per SM possible (the chain's kernel).
template <WeightFormat kF, int kNT, bool kMath = true>
__global__ void __launch_bounds__(DecodePolicy::kThreads, 2)
    decode_gemm_kernel(DecodeGemmParams p, DecodeLaunch launch, PdlDevice k) {
  decode::gemm_body<kF, kNT, kMath, DecodePolicy::stages(kF)>(p, launch, k);
}

/// DecodeOptions::deep: fp4 at tile 16 with DecodePolicy::kDeepStages stages (one CTA per SM,
/// so the register limit of two CTAs does not apply).
__global__ void __launch_bounds__(DecodePolicy::kThreads, 1)
    decode_gemm_deep_kernel(DecodeGemmParams p, DecodeLaunch launch, PdlDevice k) {
  decode::gemm_body<WeightFormat::kFp4, 2, true, DecodePolicy::kDeepStages>(p, launch, k);
}

/// DecodeGemmParams::scale_layout kTiled (the `tscale` candidate): fp4 at tile 8 (kNT 1) or 16,
/// with math, the default depth; kLean: DecodeOptions::lean (the `lean` knob). Its
/// own name, so that the chain's kernels keep theirs.
template <int kNT, bool kLean>
__global__ void __launch_bounds__(DecodePolicy::kThreads, 2)
    decode_gemm_tscale_kernel(DecodeGemmParams p, DecodeLaunch launch, PdlDevice k) {
  decode::gemm_body<WeightFormat::kFp4, kNT, true, DecodePolicy::stages(WeightFormat::kFp4),
                    fp4::ScaleLayout::kTiled, kLean>(p, launch, k);
}

/// DecodeGemmParams::value_layout kPacked (the `wpack` candidate): the tiled-scale kernel reading
/// bit-permuted values (fp4::pack_word); its own name, like the tiled-scale kernel's.
template <int kNT, bool kLean>
__global__ void __launch_bounds__(DecodePolicy::kThreads, 2)
    decode_gemm_wpack_kernel(DecodeGemmParams p, DecodeLaunch launch, PdlDevice k) {
  decode::gemm_body<WeightFormat::kFp4, kNT, true, DecodePolicy::stages(WeightFormat::kFp4),
                    fp4::ScaleLayout::kTiled, kLean, fp4::ValueLayout::kPacked>(p, launch, k);
}

/// DecodeOptions::wide (the `wide` candidate): the packed-value kernel with
/// DecodePolicy::kWideWidth warp-stages per pipeline stage and kS stages
/// (DecodePolicy::wide_stages; the same output bits, see gemm_body's kW).
/// Every instance, the one-CTA ones (kS = wide_stages(1)) too, is held to two CTAs' registers
/// (128): the chain at --ctas-per-sm 1 counts on every kernel up to finalize being resident at
/// once (gemm::chain_grid), counted with GEMM CTAs of 128 registers. Bounded for one CTA
/// (142-170 registers, no spill), the race benchmark cell on fp4 went from 200/200 mismatching
/// iterations to 0/200 on an H100 (studies/one_cta_register_cap/). The tiles kernel likewise.
template <int kNT, bool kLean, int kS>
__global__ void __launch_bounds__(DecodePolicy::kThreads, 2)
    decode_gemm_wide_kernel(DecodeGemmParams p, DecodeLaunch launch, PdlDevice k) {
  decode::gemm_body<WeightFormat::kFp4, kNT, true, kS, fp4::ScaleLayout::kTiled, kLean,
                    fp4::ValueLayout::kPacked, DecodePolicy::kWideWidth>(p, launch, k);
}

/// DecodeGemmParams::value_layout kTiles (the `tiles` candidate): the wide kernel reading values
/// whose warp-stages are contiguous (fp4::value_chunk_offset), each warp's stream one run of
/// bytes; the same output bits.
template <int kNT, bool kLean, int kS>
__global__ void __launch_bounds__(DecodePolicy::kThreads, 2)
    decode_gemm_tiles_kernel(DecodeGemmParams p, DecodeLaunch launch, PdlDevice k) {
  decode::gemm_body<WeightFormat::kFp4, kNT, true, kS, fp4::ScaleLayout::kTiled, kLean,
                    fp4::ValueLayout::kTiles, DecodePolicy::kWideWidth>(p, launch, k);
}

/// One 16-weight block per thread step: the seeded quantizer of core/fp4.hpp. Scales go where
/// `layout` puts them in [experts * n][k], values as `vlayout` says; either may be null (the
/// other only).
__global__ void fill_fp4_kernel(std::uint8_t* values, std::uint8_t* scales, float* global,
                                std::int64_t experts, std::int64_t blocks, std::int64_t k,
                                fp4::ScaleLayout layout, fp4::ValueLayout vlayout,
                                std::uint64_t seed, float scale) {
  float const gs = fp4::global_scale(scale);
  std::int64_t const stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t const first = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  for (std::int64_t e = first; e < experts; e += stride)
    global[e] = gs;
  std::int64_t const row_blocks = k / fp4::kBlock;
  for (std::int64_t b = first; b < blocks; b += stride) {
    std::uint8_t v[fp4::kBlock / 2];
    std::uint8_t unused_scale;
    fp4::quantize_block(
        seed, static_cast<std::uint64_t>(b), scale, gs, v,
        scales == nullptr ? &unused_scale
                          : scales + fp4::scale_offset(layout, b / row_blocks, b % row_blocks, k));
    if (values == nullptr)
      continue;
    uint2 words;
    words.x = v[0] | (v[1] << 8) | (v[2] << 16) | (static_cast<std::uint32_t>(v[3]) << 24);
    words.y = v[4] | (v[5] << 8) | (v[6] << 16) | (static_cast<std::uint32_t>(v[7]) << 24);
    if (fp4::packed_words(vlayout)) {
      words.x = fp4::pack_word(words.x);
      words.y = fp4::pack_word(words.y);
    }
    // Block b is the first or second half of its row's chunk (b % row_blocks) / 2.
    std::int64_t const in_row = b % row_blocks;
    *reinterpret_cast<uint2*>(values +
                              fp4::value_chunk_offset(vlayout, b / row_blocks, in_row / 2, k) +
                              8 * (in_row % 2)) = words;
  }
}

} // namespace moefin::gemm
