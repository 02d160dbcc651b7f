#include "experiments/gemm/decode_problem.hpp"

#include "core/bf16.hpp"
#include "core/chain/shape.hpp"
#include "core/fp4.hpp"
#include "core/ops/errors.hpp"
#include "core/rng.hpp"
#include "experiments/routing/arrays.hpp"
#include "kernels/gemm/gemm.hpp"
#include "reference/routing.hpp"

#include <algorithm>
#include <cmath>

namespace moefin::decode_bench {

namespace {

/// The bound of the source weights: 1 / sqrt(k).
float weight_bound(std::int64_t k) {
  return 1.0f / std::sqrt(static_cast<float>(k));
}

} // namespace

ExpertWeights::ExpertWeights(gemm::WeightFormat f, std::int64_t experts, std::int64_t n,
                             std::int64_t k, std::uint64_t seed)
    : format_(f), experts_(experts), n_(n), k_(k), seed_(seed) {
  float const scale = weight_bound(k);
  std::size_t const count = static_cast<std::size_t>(experts * n * k);
  if (f == gemm::WeightFormat::kFp4) {
    values_ = dev::Buffer(count / 2);
    scales_ = dev::Buffer(count / fp4::kBlock);
    global_ = dev::Buffer(static_cast<std::size_t>(experts) * 4);
    gemm::fill_fp4(values_.get(), scales_.get(), global_.get<float>(), experts, n, k, seed, scale,
                   nullptr);
  } else {
    values_ = dev::Buffer(count * 2);
    gemm::fill_random_bf16(values_.get(), static_cast<std::int64_t>(count), seed, 0.05f, 1.0f,
                           scale, nullptr);
  }
  MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
}

std::uint8_t const* ExpertWeights::scales(fp4::ScaleLayout l) const {
  if (l != fp4::ScaleLayout::kTiled)
    return scales_.get<std::uint8_t>();
  if (format_ != gemm::WeightFormat::kFp4 || n_ % fp4::kTileRows != 0 || k_ % fp4::kTileK != 0)
    throw InputError("decode weights: no tiled scales for " +
                     std::string(gemm::weight_format_name(format_)) + " n " + std::to_string(n_) +
                     ", k " + std::to_string(k_) + " (fp4 with n a multiple of 16, k of 128)");
  if (scales_tiled_.bytes() == 0) {
    // Made on first use: the same quantizer, the scales only (and the same global scales).
    scales_tiled_ = dev::Buffer(scales_.bytes());
    gemm::fill_fp4(nullptr, scales_tiled_.get(), global_.get<float>(), experts_, n_, k_, seed_,
                   weight_bound(k_), nullptr, fp4::ScaleLayout::kTiled);
    MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return scales_tiled_.get<std::uint8_t>();
}

void const* ExpertWeights::values(fp4::ValueLayout l) const {
  if (l == fp4::ValueLayout::kNibbles)
    return values_.get();
  if (format_ != gemm::WeightFormat::kFp4)
    throw InputError(std::string("decode weights: no ") + fp4::value_layout_name(l) +
                     " values for " + gemm::weight_format_name(format_) + " weights (fp4 only)");
  dev::Buffer& copy = l == fp4::ValueLayout::kTiles ? values_tiles_ : values_packed_;
  if (copy.bytes() == 0) {
    // Made on first use: the same quantizer, the values only, each word bit-permuted (and with
    // kTiles each chunk moved).
    copy = dev::Buffer(values_.bytes());
    gemm::fill_fp4(copy.get(), nullptr, global_.get<float>(), experts_, n_, k_, seed_,
                   weight_bound(k_), nullptr, fp4::ScaleLayout::kRowMajor, l);
    MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return copy.get();
}

HostWeights ExpertWeights::download(std::vector<std::int32_t> const& experts) const {
  HostWeights h;
  h.format = format_;
  h.n = n_;
  h.k = k_;
  h.experts = static_cast<std::int64_t>(experts.size());
  std::size_t const vbytes =
      static_cast<std::size_t>(format_ == gemm::WeightFormat::kFp4 ? n_ * k_ / 2 : n_ * k_ * 2);
  std::size_t const sbytes =
      format_ == gemm::WeightFormat::kFp4 ? static_cast<std::size_t>(n_ * k_ / fp4::kBlock) : 0;
  h.values.resize(vbytes * experts.size());
  h.scales.resize(sbytes * experts.size());
  std::vector<float> all_global;
  if (format_ == gemm::WeightFormat::kFp4)
    all_global = global_.download<float>();
  for (std::size_t i = 0; i < experts.size(); ++i) {
    std::size_t const e = static_cast<std::size_t>(experts[i]);
    MOEFIN_CUDA_CHECK(cudaMemcpy(h.values.data() + i * vbytes,
                                 values_.get<std::uint8_t>() + e * vbytes, vbytes,
                                 cudaMemcpyDeviceToHost));
    if (sbytes) {
      MOEFIN_CUDA_CHECK(cudaMemcpy(h.scales.data() + i * sbytes,
                                   scales_.get<std::uint8_t>() + e * sbytes, sbytes,
                                   cudaMemcpyDeviceToHost));
      h.global.push_back(all_global[e]);
    }
  }
  return h;
}

RoutedLayout::RoutedLayout(std::int64_t tokens_, std::int64_t experts_, std::int64_t top_k_,
                           std::int64_t tile_, std::uint64_t seed)
    : tokens(tokens_), experts(experts_), top_k(top_k_), tile(tile_) {
  std::vector<float> const scores = chain::router_scores(seed, tokens, experts);
  routing_arrays::HostRouting r(routing_arrays::shape(tokens, experts, top_k, tile, 0, experts),
                                scores.data());
  reference::routing(r.p);
  max_rows = r.p.max_padded_rows;
  cta = r.cta;
  total = r.total;
  row_token = r.p2t;
  d_cta.upload(cta);
  d_total.upload(total);
  d_row_token.upload(row_token);
}

std::vector<std::int32_t> RoutedLayout::active_experts() const {
  std::vector<std::int32_t> out;
  for (std::int64_t i = 0; i < tiles(); ++i)
    if (cta[static_cast<std::size_t>(i)] >= 0)
      out.push_back(cta[static_cast<std::size_t>(i)]);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::uint16_t> random_activations(RoutedLayout const& l, std::int64_t k,
                                              std::uint64_t seed) {
  std::vector<std::uint16_t> a(static_cast<std::size_t>(l.max_rows * k), 0);
  Rng rng(seed);
  for (std::int64_t r = 0; r < l.total[0]; ++r) {
    if (l.row_token[static_cast<std::size_t>(r)] < 0)
      continue;
    for (std::int64_t i = 0; i < k; ++i) {
      double const mag = rng.uniform(0.05, 1.0);
      a[static_cast<std::size_t>(r * k + i)] =
          float_to_bf16(static_cast<float>(rng.next() & 1 ? -mag : mag));
    }
  }
  return a;
}

gemm::DecodeGemmParams params(ExpertWeights const& w, RoutedLayout const& l, void const* a, void* c,
                              std::int64_t ldc, fp4::ScaleLayout scales, fp4::ValueLayout values) {
  gemm::DecodeGemmParams p;
  p.format = w.format();
  p.gemm.a = a;
  p.gemm.b = w.values(w.format() == gemm::WeightFormat::kFp4 ? values : fp4::ValueLayout::kNibbles);
  p.gemm.c = c;
  p.gemm.cta_to_expert = l.d_cta.get<std::int32_t>();
  p.gemm.total_padded_rows = l.d_total.get<std::int32_t>();
  p.gemm.row_token = l.d_row_token.get<std::int32_t>();
  p.gemm.max_rows = l.max_rows;
  p.gemm.n = w.n();
  p.gemm.k = w.k();
  p.gemm.ldc = ldc;
  p.gemm.tile_m = l.tile;
  p.gemm.num_local_experts = w.experts();
  if (w.format() == gemm::WeightFormat::kFp4) {
    p.scales = w.scales(scales);
    p.global_scale = w.global();
    p.scale_layout = scales;
    p.value_layout = values;
  }
  return p;
}

reference::GemmOracle oracle(ExpertWeights const& w, RoutedLayout const& l,
                             std::vector<std::uint16_t> const& a_host) {
  std::vector<std::int32_t> const active = l.active_experts();
  HostWeights const hw = w.download(active);
  std::vector<std::int32_t> cta = l.cta; // expert id -> its place in the host copy
  for (auto& x : cta)
    if (x >= 0)
      x = static_cast<std::int32_t>(std::lower_bound(active.begin(), active.end(), x) -
                                    active.begin());
  std::vector<std::uint16_t> c(static_cast<std::size_t>(l.max_rows * w.n()), kBf16Poison);
  std::vector<std::int32_t> total = l.total;
  gemm::DecodeGemmParams p;
  p.format = w.format();
  p.gemm.a = a_host.data();
  p.gemm.b = hw.values.data();
  p.gemm.c = c.data();
  p.gemm.cta_to_expert = cta.data();
  p.gemm.total_padded_rows = total.data();
  p.gemm.row_token = l.row_token.data();
  p.gemm.max_rows = l.max_rows;
  p.gemm.n = w.n();
  p.gemm.k = w.k();
  p.gemm.ldc = w.n();
  p.gemm.tile_m = l.tile;
  p.gemm.num_local_experts = std::max<std::int64_t>(1, hw.experts);
  if (w.format() == gemm::WeightFormat::kFp4) {
    p.scales = hw.scales.data();
    p.global_scale = hw.global.data();
  }
  reference::GemmOracle o;
  reference::decode_gemm(p, &o);
  return o;
}

} // namespace moefin::decode_bench
