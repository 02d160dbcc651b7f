#include "reference/decode_gemm.hpp"

#include "core/bf16.hpp"
#include "core/fp4.hpp"
#include "core/ops/errors.hpp"

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace moefin::reference {

namespace {

void require(bool ok, std::string const& what) {
  if (!ok)
    throw InputError("decode GEMM params: " + what);
}

} // namespace

void decode_gemm(gemm::DecodeGemmParams const& dp, GemmOracle* oracle) {
  gemm::GroupedGemmParams const& p = dp.gemm;
  bool const fp4 = dp.format == gemm::WeightFormat::kFp4;
  require(dp.format == gemm::WeightFormat::kBf16 || fp4, "unknown weight format");
  require(p.a && p.b && p.c && p.cta_to_expert && p.total_padded_rows, "a pointer is null");
  require(!fp4 || (dp.scales && dp.global_scale), "fp4 weights need scales and global_scale");
  require(p.n >= 1 && p.k >= 1 && p.ldc >= p.n && p.tile_m >= 1,
          "need n >= 1, k >= 1, ldc >= n, tile_m >= 1");
  require(!fp4 || p.k % fp4::kBlock == 0, "fp4 k " + std::to_string(p.k) + " not a multiple of 16");
  fp4::ScaleLayout const layout = dp.scale_layout;
  require(layout == fp4::ScaleLayout::kRowMajor ||
              (fp4 && layout == fp4::ScaleLayout::kTiled && p.k % fp4::kTileK == 0 &&
               p.n % fp4::kTileRows == 0),
          "scale layout tiled needs fp4 weights, n a multiple of 16 and k of 128");
  fp4::ValueLayout const values = dp.value_layout;
  require(values == fp4::ValueLayout::kNibbles || values == fp4::ValueLayout::kTiles ||
              (fp4 && values == fp4::ValueLayout::kPacked && p.k % 8 == 0),
          "value layout packed needs fp4 weights and k a multiple of 8 (whole 32-bit words)");
  require(values != fp4::ValueLayout::kTiles ||
              (fp4 && p.k % fp4::kStageK == 0 && p.n % fp4::kStageRows == 0),
          "value layout tiles needs fp4 weights, n a multiple of 32 and k of 128");
  bool const packed_words = fp4::packed_words(values);
  std::int64_t const rows = *p.total_padded_rows;
  require(rows >= 0 && rows <= p.max_rows && rows % p.tile_m == 0,
          "total_padded_rows " + std::to_string(rows) + " not a multiple of tile_m " +
              std::to_string(p.tile_m) + " in [0, max_rows " + std::to_string(p.max_rows) + "]");
  for (std::int64_t i = 0; i < rows / p.tile_m; ++i)
    require(p.cta_to_expert[i] >= -1 && p.cta_to_expert[i] < p.num_local_experts,
            "cta_to_expert[" + std::to_string(i) + "] = " + std::to_string(p.cta_to_expert[i]) +
                " outside [-1, num_local_experts)");
  std::int64_t const N = p.n, K = p.k;
  if (oracle) {
    std::size_t const size = static_cast<std::size_t>(p.max_rows * N);
    oracle->exact.assign(size, std::numeric_limits<double>::quiet_NaN());
    oracle->naive.assign(size, std::numeric_limits<float>::quiet_NaN());
  }
  double* exact = oracle ? oracle->exact.data() : nullptr;
  float* naive = oracle ? oracle->naive.data() : nullptr;
  auto const* a = static_cast<bf16_bits const*>(p.a);
  auto const* bw = static_cast<bf16_bits const*>(p.b);
  auto const* packed = static_cast<std::uint8_t const*>(p.b);
  std::uint8_t const* scales = dp.scales;
  float const* global = dp.global_scale;
  auto* c = static_cast<bf16_bits*>(p.c);
  Kokkos::parallel_for(
      "ref::decode_gemm",
      Kokkos::MDRangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::Rank<2>>({0, 0}, {rows, N}),
      [=](std::int64_t r, std::int64_t j) {
        std::int32_t const x = p.cta_to_expert[r / p.tile_m];
        if (x < 0 || (p.row_token != nullptr && p.row_token[r] < 0))
          return;
        bf16_bits const* arow = a + r * K;
        std::int64_t const wrow = x * N + j;
        double acc = 0.0;
        float sum = 0.0f;
        std::uint32_t nibbles = 0; // packed_words: the word of 8 values holding k = i, unpermuted
        for (std::int64_t i = 0; i < K; ++i) {
          float w;
          if (fp4) {
            unsigned code;
            if (packed_words) {
              if (i % 8 == 0) {
                std::memcpy(&nibbles,
                            packed + fp4::value_chunk_offset(values, wrow, i / 32, K) + i % 32 / 2,
                            4);
                nibbles = fp4::unpack_word(nibbles);
              }
              code = (nibbles >> (4 * (i % 8))) & 0xFu;
            } else {
              std::uint8_t const byte = packed[wrow * (K / 2) + i / 2];
              code = (i & 1) ? byte >> 4 : byte & 0xFu;
            }
            w = fp4::dequantized(code, scales[fp4::scale_offset(layout, wrow, i / fp4::kBlock, K)]);
          } else {
            w = bf16_to_float(bw[wrow * K + i]);
          }
          float const av = bf16_to_float(arow[i]);
          acc += static_cast<double>(w) * static_cast<double>(av);
          sum += w * av;
        }
        float const g = fp4 ? global[x] : 1.0f;
        double const out = acc * static_cast<double>(g);
        c[r * p.ldc + j] = float_to_bf16(static_cast<float>(out));
        if (exact) {
          exact[r * N + j] = out;
          naive[r * N + j] = round_to_bf16(sum * g);
        }
      });
  Kokkos::fence();
}

GemmCheck check_gemm(std::vector<std::uint16_t> const& out, std::int64_t ldc, std::int64_t n,
                     GemmOracle const& oracle) {
  GemmCheck r;
  std::size_t const cells = oracle.exact.size();
  for (std::size_t i = 0; i < cells; ++i)
    if (!std::isnan(oracle.exact[i]))
      r.peak = std::max(r.peak, std::fabs(oracle.exact[i]));
  for (std::size_t i = 0; i < cells; ++i) {
    double const e = oracle.exact[i];
    if (std::isnan(e))
      continue;
    std::int64_t const row = static_cast<std::int64_t>(i) / n,
                       col = static_cast<std::int64_t>(i) % n;
    std::size_t const at = static_cast<std::size_t>(row * ldc + col);
    double const got = at < out.size() ? bf16_to_float(out[at]) : std::nan("");
    double const err =
        std::isnan(got) ? std::numeric_limits<double>::infinity() : std::fabs(got - e);
    if (err > r.max_err || r.worst < 0) {
      r.max_err = std::max(r.max_err, err);
      r.worst = static_cast<std::int64_t>(i);
    }
    r.naive_err = std::max(r.naive_err, std::fabs(static_cast<double>(oracle.naive[i]) - e));
    ++r.checked;
  }
  r.tolerance = 2.0 * r.naive_err + 1e-6 * r.peak;
  r.pass = r.checked > 0 && r.max_err <= r.tolerance;
  return r;
}

} // namespace moefin::reference
