#pragma once
// Decode GEMM problems on the device for `moefin sweep gemm` and the gpu tests: every expert's
// weights of one GEMM (bf16 or fp4, generated on the device), routed layouts of seeded router
// scores, and the reference check of an output (CUDA builds only).

#include "experiments/harness/device_buffer.hpp"
#include "kernels/gemm/decode.hpp"
#include "reference/decode_gemm.hpp"

#include <cstdint>
#include <vector>

namespace moefin::decode_bench {

/// Host copies of some experts' weights, in the format's layout, experts in list order.
struct HostWeights {
  gemm::WeightFormat format = gemm::WeightFormat::kBf16;
  std::int64_t n = 0, k = 0, experts = 0;
  std::vector<std::uint8_t> values, scales;
  std::vector<float> global;
};

/// One GEMM's weights for every expert, [experts][n][k], on the device: bf16 uniform in
/// +-[0.05, 1] / sqrt(k) (gemm::fill_random_bf16, as the chain's), or fp4 from the seeded
/// quantizer of core/fp4.hpp with source weights bounded by 1 / sqrt(k), its scales row-major
/// and its values as nibbles (and, each made on first use, tiled scales, packed and tiled values:
/// fp4::ScaleLayout, fp4::ValueLayout).
class ExpertWeights {
public:
  ExpertWeights(gemm::WeightFormat f, std::int64_t experts, std::int64_t n, std::int64_t k,
                std::uint64_t seed);
  gemm::WeightFormat format() const { return format_; }
  std::int64_t experts() const { return experts_; }
  std::int64_t n() const { return n_; }
  std::int64_t k() const { return k_; }
  std::uint64_t seed() const { return seed_; }
  /// The values in layout l (kPacked, kTiles: generated on the first call); throws InputError
  /// for those on bf16 weights.
  void const* values(fp4::ValueLayout l = fp4::ValueLayout::kNibbles) const;
  /// The scales in layout l (kTiled: generated on the first call); throws InputError for kTiled
  /// on bf16 weights or where n or k do not allow it.
  std::uint8_t const* scales(fp4::ScaleLayout l = fp4::ScaleLayout::kRowMajor) const;
  float const* global() const { return global_.get<float>(); }
  /// Bytes of one expert as stored (values and scales): what a GEMM reads per active expert.
  std::int64_t bytes_per_expert() const { return gemm::expert_weight_bytes(format_, n_, k_); }
  std::size_t bytes() const { return values_.bytes() + scales_.bytes() + global_.bytes(); }
  HostWeights download(std::vector<std::int32_t> const& experts) const;

private:
  gemm::WeightFormat format_;
  std::int64_t experts_, n_, k_;
  std::uint64_t seed_;
  dev::Buffer values_, scales_, global_;
  mutable dev::Buffer scales_tiled_;  // scales(kTiled)
  mutable dev::Buffer values_packed_; // values(kPacked)
  mutable dev::Buffer values_tiles_;  // values(kTiles)
};

/// The layout of one routing (reference routing of chain::router_scores(seed)) with tile `tile`,
/// its maps on the host and on the device.
struct RoutedLayout {
  RoutedLayout(std::int64_t tokens, std::int64_t experts, std::int64_t top_k, std::int64_t tile,
               std::uint64_t seed);
  std::int64_t tokens, experts, top_k, tile, max_rows;
  std::vector<std::int32_t> cta, total, row_token;
  dev::Buffer d_cta, d_total, d_row_token;
  std::int64_t tiles() const { return total[0] / tile; }
  /// The distinct experts of the used tiles, ascending: the weights a GEMM of this layout reads.
  std::vector<std::int32_t> active_experts() const;
};

/// Random bf16 activations [max_rows][k] (real rows, nonzero) with zero padding rows, as
/// permute (and activation, on GEMM1's padding rows) leaves them.
std::vector<std::uint16_t> random_activations(RoutedLayout const& l, std::int64_t k,
                                              std::uint64_t seed);

/// Params of the GEMM of `w` over layout `l`: a [max_rows][k] and c [max_rows][ldc] device
/// pointers, padding rows skipped (row_token); fp4 scales read in layout `scales`, fp4 values
/// in layout `values`.
gemm::DecodeGemmParams params(ExpertWeights const& w, RoutedLayout const& l, void const* a, void* c,
                              std::int64_t ldc,
                              fp4::ScaleLayout scales = fp4::ScaleLayout::kRowMajor,
                              fp4::ValueLayout values = fp4::ValueLayout::kNibbles);

/// The oracle of that GEMM from host copies of the activations and of the active experts only.
reference::GemmOracle oracle(ExpertWeights const& w, RoutedLayout const& l,
                             std::vector<std::uint16_t> const& a_host);

} // namespace moefin::decode_bench
