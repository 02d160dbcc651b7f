// ChainRunner: device buffers of one (shape, T), the checked and the timing graphs, replays.
// What a layer launches comes from its layer plan (chain_launches.cpp); this file executes it.

#include "core/chain/released_kernels.hpp"
#include "core/fp4.hpp"
#include "core/ops/errors.hpp"
#include "core/ops/ranges.hpp"
#include "core/rng.hpp"
#include "kernels/activation/activation.hpp"
#include "kernels/chain/chain_kernels.cuh"
#include "kernels/chain/chain_launches.hpp"
#include "kernels/gemm/decode.hpp"
#include "kernels/gemm/gemm.hpp"
#include "kernels/permute/permute.hpp"
#include "kernels/routing/fast_routing.hpp"
#include "kernels/routing/routing.hpp"

#include <cmath>
#include <cstring>

namespace moefin::chain {

int buffer_element_bytes(Buffer b) {
  switch (b) {
  case Buffer::kExpertWeights:
  case Buffer::kPermuted:
  case Buffer::kGemm1Out:
  case Buffer::kActOut:
  case Buffer::kGemm2Out:
  case Buffer::kOut:
    return 2;
  default:
    return 4;
  }
}

namespace {

std::size_t round16(std::size_t bytes) {
  return (bytes + 15) / 16 * 16;
}

void* device_alloc(std::size_t bytes, char const* what) {
  void* p = nullptr;
  cudaError_t const err = cudaMalloc(&p, round16(std::max<std::size_t>(bytes, 16)));
  if (err != cudaSuccess)
    throw DeviceError(std::string("cudaMalloc of ") + std::to_string(bytes) + " bytes for " + what +
                      " failed: " + cudaGetErrorString(err));
  return p;
}

void device_free(void* p) {
  if (p)
    cudaFree(p); // in destructors: an error here cannot be reported usefully
}

} // namespace

LayerWeights::LayerWeights(LayerShape const& shape, std::uint64_t seed, std::string const& format,
                           fp4::ScaleLayout scale_layout,
                           std::optional<fp4::ValueLayout> value_layout_or_default)
    : shape_(shape), format_(format), flavour_(flavour_for_format(format)) {
  if (!flavour_)
    throw InputError("weights format '" + format + "' not one of {bf16-tiled, bf16, fp4}");
  if (scale_layout != fp4::ScaleLayout::kRowMajor && scale_layout != fp4::ScaleLayout::kTiled)
    throw InputError("fp4 scale layout " + std::to_string(static_cast<int>(scale_layout)) +
                     " is neither row-major nor tiled");
  fp4::ValueLayout const value_layout =
      value_layout_or_default.value_or(fp4::chain_value_layout(scale_layout));
  if (!fp4::known_value_layout(value_layout))
    throw InputError("fp4 value layout " + std::to_string(static_cast<int>(value_layout)) +
                     " not one of nibbles, packed, tiles");
  if (fp4::packed_words(value_layout) && scale_layout != fp4::ScaleLayout::kTiled)
    throw InputError(std::string("fp4 values ") + fp4::value_layout_name(value_layout) +
                     " are read by the tiled-scale GEMM only: needs tiled scales");
  packed_layout_ = value_layout;
  validate(shape, 1, 16);
  w_[0].n = shape.gemm1_n();
  w_[0].k = shape.hidden;
  w_[1].n = shape.hidden;
  w_[1].k = shape.inter;
  if (fp4())
    for (Matrix const& m : w_)
      ranges::check_multiple("fp4 weights k (hidden, inter)", m.k, 128);
  try {
    for (int i = 0; i < 2; ++i) {
      Matrix& m = w_[i];
      std::int64_t const count = shape.experts * m.n * m.k;
      float const scale = 1.0f / std::sqrt(static_cast<float>(m.k));
      std::uint64_t const s = Rng::mix(seed, static_cast<std::uint64_t>(i + 1));
      if (fp4()) {
        m.values = device_alloc(static_cast<std::size_t>(count / 2), "fp4 weight values");
        m.scales = static_cast<std::uint8_t*>(
            device_alloc(static_cast<std::size_t>(count / fp4::kBlock), "fp4 weight scales"));
        m.global = static_cast<float*>(
            device_alloc(static_cast<std::size_t>(shape.experts) * 4, "fp4 global scales"));
        gemm::fill_fp4(m.values, m.scales, m.global, shape.experts, m.n, m.k, s, scale, nullptr);
        if (scale_layout == fp4::ScaleLayout::kTiled) {
          // The same quantizer, the scales only, stored in tiles (and the same global scales);
          // fp4 k is a multiple of 128 (checked above), so every n (hidden, inter) is of 16.
          m.scales_tiled = static_cast<std::uint8_t*>(
              device_alloc(static_cast<std::size_t>(count / fp4::kBlock), "fp4 tiled scales"));
          gemm::fill_fp4(nullptr, m.scales_tiled, m.global, shape.experts, m.n, m.k, s, scale,
                         nullptr, fp4::ScaleLayout::kTiled);
        }
        if (fp4::packed_words(value_layout)) {
          // The same quantizer, the values only, each word bit-permuted (kTiles: and each
          // 16-byte chunk moved into its warp-stage tile).
          m.values_packed =
              device_alloc(static_cast<std::size_t>(count / 2), "fp4 packed weight values");
          gemm::fill_fp4(m.values_packed, nullptr, m.global, shape.experts, m.n, m.k, s, scale,
                         nullptr, fp4::ScaleLayout::kRowMajor, value_layout);
        }
      } else {
        m.values = device_alloc(static_cast<std::size_t>(count) * 2, i ? "w2" : "w1");
        gemm::fill_random_bf16(m.values, count, s, 0.05f, 1.0f, scale, nullptr);
      }
    }
    MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
  } catch (...) {
    for (Matrix& m : w_) {
      device_free(m.values);
      device_free(m.scales);
      device_free(m.scales_tiled);
      device_free(m.values_packed);
      device_free(m.global);
    }
    throw;
  }
}

LayerWeights::~LayerWeights() {
  device_free(w1_gate_second_);
  for (Matrix& m : w_) {
    device_free(m.values);
    device_free(m.scales);
    device_free(m.scales_tiled);
    device_free(m.values_packed);
    device_free(m.global);
  }
}

std::size_t LayerWeights::value_bytes(Matrix const& m) const {
  return static_cast<std::size_t>(fp4() ? m.n * m.k / 2 : m.n * m.k * 2);
}

namespace {

/// dst[e][n][:] = src[e][(n + inter) % (2 inter)][:]: the two halves of GEMM1's output rows
/// swapped, so that GEMM1 writes [up | gate].
__global__ void swap_halves_kernel(std::uint16_t const* src, std::uint16_t* dst,
                                   std::int64_t experts, std::int64_t inter, std::int64_t hidden) {
  std::int64_t const n = experts * 2 * inter * hidden;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t const h = i % hidden, row = (i / hidden) % (2 * inter),
                       e = i / (hidden * 2 * inter);
    std::int64_t const from = (row + inter) % (2 * inter);
    dst[i] = src[(e * 2 * inter + from) * hidden + h];
  }
}

/// The decode GEMM options of launch `d` beside its PDL knobs and grid: what the graph validates
/// before its capture and launches inside it.
gemm::DecodeOptions decode_options(LaunchDescriptor const& d) {
  gemm::DecodeOptions o;
  o.wide = d.wide;
  return o;
}

/// RunnerOptions::wide_gemms, or unset the chain's rule for the weights' value layout (bf16
/// weights: no fp4 GEMM, so it does not matter).
bool wide_gemms(RunnerOptions const& o, LayerWeights const& w) {
  return o.wide_gemms.value_or(w.fp4() && fp4::chain_wide_gemms(w.value_layout()));
}

} // namespace

void const* LayerWeights::w1_gate_second() const {
  if (shape_.act != activation::Type::kSwiGlu || fp4())
    throw InputError("shape " + shape_.name + " (" + format_ +
                     "): only a SwiGLU GEMM1 on bf16 weights has a gate half to move");
  if (w1_gate_second_ == nullptr) {
    std::int64_t const n = shape_.experts * shape_.gemm1_n() * shape_.hidden;
    w1_gate_second_ = device_alloc(static_cast<std::size_t>(n) * 2, "w1 (gate second)");
    swap_halves_kernel<<<4096, 256>>>(static_cast<std::uint16_t const*>(w_[0].values),
                                      static_cast<std::uint16_t*>(w1_gate_second_), shape_.experts,
                                      shape_.inter, shape_.hidden);
    MOEFIN_CUDA_CHECK_LAUNCH();
    MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return w1_gate_second_;
}

std::size_t LayerWeights::bytes() const {
  std::size_t b = 0;
  for (Matrix const& m : w_)
    b += static_cast<std::size_t>(shape_.experts) *
         static_cast<std::size_t>(gemm::expert_weight_bytes(
             fp4() ? gemm::WeightFormat::kFp4 : gemm::WeightFormat::kBf16, m.n, m.k));
  return b;
}

LayerWeights::Expert LayerWeights::download(int gemm, std::int64_t expert) const {
  if (gemm != 1 && gemm != 2)
    throw std::logic_error("LayerWeights::download: gemm " + std::to_string(gemm));
  Matrix const& m = w_[gemm - 1];
  Expert e;
  std::size_t const vb = value_bytes(m);
  e.values.resize(vb);
  MOEFIN_CUDA_CHECK(
      cudaMemcpy(e.values.data(),
                 static_cast<std::uint8_t const*>(m.values) + static_cast<std::size_t>(expert) * vb,
                 vb, cudaMemcpyDeviceToHost));
  if (fp4()) {
    std::size_t const sb = static_cast<std::size_t>(m.n * m.k / fp4::kBlock);
    e.scales.resize(sb);
    MOEFIN_CUDA_CHECK(cudaMemcpy(e.scales.data(), m.scales + static_cast<std::size_t>(expert) * sb,
                                 sb, cudaMemcpyDeviceToHost));
    MOEFIN_CUDA_CHECK(cudaMemcpy(&e.global, m.global + expert, 4, cudaMemcpyDeviceToHost));
  }
  return e;
}

namespace {

struct LayerParams {
  routing::RoutingParams routing;
  permute::PermuteParams permute;
  gemm::GroupedGemmParams gemm1, gemm2;
  gemm::DecodeGemmParams decode1, decode2; // the same GEMMs for the decode flavours
  activation::ActivationParams act;
  finalize::FinalizeParams fin;
  finalize::fused::FusedParams fused; // GEMM1 and GEMM2 when finalize runs inside GEMM2
};

} // namespace

struct ChainRunner::Impl {
  LayerWeights const* w = nullptr;
  RunnerOptions o;
  std::int64_t max_rows = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;
  void* buf[kNumBuffers] = {};
  std::size_t buf_bytes[kNumBuffers] = {};
  float* scores = nullptr;
  std::uint64_t* seeds = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  void* hidden = nullptr;
  // The released routing's outputs moefin has no buffer for (per-tile row limit, tile count).
  std::int32_t* tile_row_limit = nullptr;
  std::int32_t* num_tiles = nullptr;
  std::int32_t* snapshot = nullptr; // [iterations][T*K]
  std::uint64_t* slots = nullptr;   // [iterations][kNumBuffers]
  std::int32_t* stale = nullptr;    // [iterations]
  std::int32_t* recorded = nullptr; // [iterations]
  std::int32_t* counters = nullptr; // the fused finalize's [T][H / 16] arrival counters
  std::int64_t* stamps[kNumKernels] = {};
  std::int64_t stamp_ctas[kNumKernels] = {};
  std::vector<void*> owned;
  std::map<std::string, cudaGraphExec_t> graphs;
  bool stamping = false; // while capturing a graph that records stamps on its last layer

  LayerParams layer(int it) const;
  /// The finalize variant of `cfg` on this shape (the dispatch rule, or the forced one).
  finalize::FinalizeVariant const& finalize_variant(ChainConfig const& cfg) const;
  /// Executes the launches of layer `it` (layer_launches of the plan).
  void enqueue_layer(std::vector<LaunchDescriptor> const& launches, int it);
  void enqueue_fill(bool stamps_only);
  /// InputError (one line) when the plan names released kernels this build or shape lacks.
  void validate_released(LayerPlan const& plan, LayerParams const& l0) const;
  // kChecked: fill, layers, checksums (stamps on the last layer when RunnerOptions::stamps);
  // kTiming: the layers alone; kTimingStamped: kTiming with the stamps poisoned first and
  // recorded on the last layer.
  enum class GraphKind { kChecked, kTiming, kTimingStamped };
  cudaGraphExec_t graph(ChainConfig const& cfg, bool pdl, GraphKind kind);

  void* alloc(std::size_t bytes, char const* what) {
    void* p = device_alloc(bytes, what);
    owned.push_back(p);
    return p;
  }
  ~Impl() {
    for (auto& g : graphs)
      cudaGraphExecDestroy(g.second);
    for (void* p : owned)
      device_free(p);
    if (ev0)
      cudaEventDestroy(ev0);
    if (ev1)
      cudaEventDestroy(ev1);
    if (stream)
      cudaStreamDestroy(stream);
  }
};

ChainRunner::ChainRunner(LayerWeights const& weights, RunnerOptions const& opt)
    : weights_(weights), opt_(opt), impl_(std::make_unique<Impl>()) {
  LayerShape const& s = weights.shape();
  validate(s, opt.tokens, opt.tile_m);
  ranges::check_range("iterations per graph", opt.iterations, 1, 4096);
  max_rows_ = max_padded_rows(s, opt.tokens, opt.tile_m);
  Impl& d = *impl_;
  d.w = &weights;
  d.o = opt;
  d.max_rows = max_rows_;
  MOEFIN_CUDA_CHECK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
  MOEFIN_CUDA_CHECK(cudaEventCreate(&d.ev0));
  MOEFIN_CUDA_CHECK(cudaEventCreate(&d.ev1));
  std::size_t const T = static_cast<std::size_t>(opt.tokens);
  std::size_t const TK = T * static_cast<std::size_t>(s.top_k);
  std::size_t const E = static_cast<std::size_t>(s.experts);
  std::size_t const rows = static_cast<std::size_t>(max_rows_);
  std::size_t const H = static_cast<std::size_t>(s.hidden);
  std::size_t const bytes[kNumBuffers] = {TK * 4,
                                          TK * 2,
                                          TK * 4,
                                          rows * 4,
                                          rows * 4,
                                          E * 4,
                                          (E + 1) * 4,
                                          rows / static_cast<std::size_t>(opt.tile_m) * 4,
                                          4,
                                          rows * H * 2,
                                          rows * static_cast<std::size_t>(s.gemm1_n()) * 2,
                                          rows * static_cast<std::size_t>(s.inter) * 2,
                                          rows * H * 2,
                                          T * H * 2};
  for (int b = 0; b < kNumBuffers; ++b) {
    d.buf_bytes[b] = round16(bytes[b]);
    d.buf[b] = d.alloc(d.buf_bytes[b], buffer_name(static_cast<Buffer>(b)));
  }
  std::size_t const iters = static_cast<std::size_t>(opt.iterations);
  d.scores = static_cast<float*>(d.alloc(iters * T * E * 4, "router scores"));
  d.seeds = static_cast<std::uint64_t*>(d.alloc(iters * 8, "routing seeds"));
  routing::RoutingParams rp;
  rp.num_local_experts = s.experts;
  d.workspace_bytes = round16(routing::workspace_bytes(rp));
  d.workspace = d.alloc(d.workspace_bytes, "routing workspace");
  d.hidden = d.alloc(T * H * 2, "hidden states");
  d.tile_row_limit = static_cast<std::int32_t*>(
      d.alloc(rows / static_cast<std::size_t>(opt.tile_m) * 4, "released routing tile limits"));
  d.num_tiles = static_cast<std::int32_t*>(d.alloc(4, "released routing tile count"));
  d.snapshot = static_cast<std::int32_t*>(d.alloc(iters * TK * 4, "pre-wait snapshots"));
  d.slots = static_cast<std::uint64_t*>(d.alloc(iters * kNumBuffers * 8, "checksum slots"));
  d.stale = static_cast<std::int32_t*>(d.alloc(iters * 4, "stale counts"));
  d.recorded = static_cast<std::int32_t*>(d.alloc(iters * 4, "recorded counts"));
  d.counters = static_cast<std::int32_t*>(
      d.alloc(static_cast<std::size_t>(finalize::fused::counter_count(opt.tokens, s.hidden)) * 4,
              "fused finalize counters"));
  gemm::fill_random_bf16(d.hidden, opt.tokens * s.hidden, opt.hidden_seed, 0.05f, 1.0f, 1.0f,
                         d.stream);
  MOEFIN_CUDA_CHECK(cudaMemsetAsync(d.workspace, 0, d.workspace_bytes, d.stream));
  set_routings(std::vector<std::uint64_t>(iters, 0));
  if (opt.stamps) {
    // Finalize's grid is its dispatcher's choice: size for one CTA per 8 outputs, the most any
    // variant can launch, and keep the CTAs that stamped a start.
    d.stamp_ctas[static_cast<int>(Kernel::kFinalize)] = opt.tokens * ((s.hidden + 7) / 8);
    routing::RoutingParams r = {};
    r.num_tokens = opt.tokens;
    routing::Workspace const ws{d.workspace, d.workspace_bytes};
    d.stamp_ctas[static_cast<int>(Kernel::kRouting)] = routing::num_ctas(r, ws);
    permute::PermuteParams pp;
    pp.max_rows = max_rows_;
    d.stamp_ctas[static_cast<int>(Kernel::kPermute)] = permute::num_ctas(pp, opt.ctas_per_sm);
    activation::ActivationParams ap;
    ap.max_rows = max_rows_;
    d.stamp_ctas[static_cast<int>(Kernel::kActivation)] = activation::num_ctas(ap, opt.ctas_per_sm);
    gemm::DecodeGemmParams g;
    g.gemm.max_rows = max_rows_;
    g.gemm.tile_m = opt.tile_m;
    gemm::Variant const v = weights.flavour().kernels[2].name == kTiledGemmBf16
                                ? gemm::Variant::kTiled
                                : gemm::Variant::kSplitK;
    g.gemm.n = s.gemm1_n();
    std::int64_t const gemm_ctas = v == gemm::Variant::kSplitK
                                       ? gemm::chain_grid(device_sm_count(), opt.ctas_per_sm)
                                       : gemm::num_ctas(g, v, opt.ctas_per_sm);
    d.stamp_ctas[static_cast<int>(Kernel::kGemm1)] = gemm_ctas;
    g.gemm.n = s.hidden;
    d.stamp_ctas[static_cast<int>(Kernel::kGemm2)] =
        v == gemm::Variant::kSplitK ? gemm_ctas : gemm::num_ctas(g, v, opt.ctas_per_sm);
    for (int i = 0; i < kNumKernels; ++i)
      d.stamps[i] = static_cast<std::int64_t*>(
          d.alloc(static_cast<std::size_t>(d.stamp_ctas[i]) * 4 * 8, "stamps"));
  }
  MOEFIN_CUDA_CHECK(cudaStreamSynchronize(d.stream));
}

ChainRunner::~ChainRunner() = default;

void ChainRunner::set_routings(std::vector<std::uint64_t> const& seeds) {
  if (seeds.size() != static_cast<std::size_t>(opt_.iterations))
    throw InputError("set_routings: " + std::to_string(seeds.size()) + " seeds for " +
                     std::to_string(opt_.iterations) + " iterations");
  Impl& d = *impl_;
  seeds_ = seeds;
  MOEFIN_CUDA_CHECK(
      cudaMemcpyAsync(d.seeds, seeds_.data(), seeds_.size() * 8, cudaMemcpyHostToDevice, d.stream));
  std::int64_t const n = opt_.iterations * opt_.tokens * shape().experts;
  unsigned const blocks = static_cast<unsigned>(std::min<std::int64_t>((n + 255) / 256, 4096));
  scores_kernel<<<blocks, 256, 0, d.stream>>>(d.scores, d.seeds, opt_.iterations, opt_.tokens,
                                              shape().experts);
  MOEFIN_CUDA_CHECK_LAUNCH();
  MOEFIN_CUDA_CHECK(cudaStreamSynchronize(d.stream)); // seeds_ may change on the next call
}

LayerParams ChainRunner::Impl::layer(int it) const {
  LayerShape const& s = w->shape();
  auto i32 = [&](Buffer b) { return static_cast<std::int32_t*>(buf[static_cast<int>(b)]); };
  auto ptr = [&](Buffer b) { return buf[static_cast<int>(b)]; };
  LayerParams l;
  auto& r = l.routing;
  r.scores = scores + static_cast<std::int64_t>(it) * o.tokens * s.experts;
  r.expert_ids = i32(Buffer::kExpertIds);
  r.expert_weights = ptr(Buffer::kExpertWeights);
  r.expanded_to_permuted = i32(Buffer::kExpandedToPermuted);
  r.permuted_to_token = i32(Buffer::kPermutedToToken);
  r.permuted_to_expanded = i32(Buffer::kPermutedToExpanded);
  r.expert_counts = i32(Buffer::kExpertCounts);
  r.expert_offsets = i32(Buffer::kExpertOffsets);
  r.cta_to_expert = i32(Buffer::kCtaToExpert);
  r.total_padded_rows = i32(Buffer::kTotalPaddedRows);
  r.num_tokens = o.tokens;
  r.num_experts = s.experts;
  r.top_k = s.top_k;
  r.local_expert_begin = 0;
  r.num_local_experts = s.experts;
  r.tile = o.tile_m;
  r.max_padded_rows = max_rows;
  r.method = routing::Method::kSoftmaxTopK;
  r.renormalize = true;
  r.weight_type = finalize::WeightType::kBf16;

  auto& p = l.permute;
  p.hidden_states = hidden;
  p.permuted_to_token = r.permuted_to_token;
  p.total_padded_rows = r.total_padded_rows;
  p.permuted = ptr(Buffer::kPermuted);
  p.num_tokens = o.tokens;
  p.hidden = s.hidden;
  p.max_rows = max_rows;

  auto gemm_of = [&](void const* a, void const* b, void* c, std::int64_t n, std::int64_t k) {
    gemm::GroupedGemmParams g;
    g.a = a;
    g.b = b;
    g.c = c;
    g.cta_to_expert = r.cta_to_expert;
    g.total_padded_rows = r.total_padded_rows;
    g.row_token = r.permuted_to_token;
    g.max_rows = max_rows;
    g.n = n;
    g.k = k;
    g.ldc = n;
    g.tile_m = o.tile_m;
    g.num_local_experts = s.experts;
    return g;
  };
  l.gemm1 = gemm_of(p.permuted, w->w1(), ptr(Buffer::kGemm1Out), s.gemm1_n(), s.hidden);
  l.gemm2 = gemm_of(ptr(Buffer::kActOut), w->w2(), ptr(Buffer::kGemm2Out), s.hidden, s.inter);
  auto decode_of = [&](gemm::GroupedGemmParams const& g, int which) {
    gemm::DecodeGemmParams d;
    d.gemm = g;
    d.format = w->fp4() ? gemm::WeightFormat::kFp4 : gemm::WeightFormat::kBf16;
    if (w->fp4()) {
      d.scales = w->scales(which);
      d.scale_layout = w->scale_layout();
      d.value_layout = w->value_layout();
      d.global_scale = w->global(which);
    }
    return d;
  };
  l.decode1 = decode_of(l.gemm1, 1);
  l.decode2 = decode_of(l.gemm2, 2);

  auto& a = l.act;
  a.in = ptr(Buffer::kGemm1Out);
  a.out = ptr(Buffer::kActOut);
  a.total_padded_rows = r.total_padded_rows;
  a.max_rows = max_rows;
  a.inter = s.inter;
  a.type = s.act;

  auto& f = l.fin;
  f.gemm_out = ptr(Buffer::kGemm2Out);
  f.expert_weights = r.expert_weights;
  f.expanded_to_permuted = r.expanded_to_permuted;
  f.out = ptr(Buffer::kOut);
  f.num_tokens = o.tokens;
  f.hidden = s.hidden;
  f.hidden_padded = s.hidden;
  f.top_k = s.top_k;
  f.num_rows = max_rows;
  f.weight_type = finalize::WeightType::kBf16;
  l.fused.fin = f;
  l.fused.permuted_to_token = r.permuted_to_token;
  l.fused.counters = counters;
  return l;
}

finalize::FinalizeVariant const& ChainRunner::Impl::finalize_variant(ChainConfig const& cfg) const {
  finalize::Options f;
  f.variant = cfg.finalize.forced;
  f.allow_small_batch = !cfg.finalize.previous;
  return finalize::select(layer(0).fin, f);
}

void ChainRunner::Impl::enqueue_fill(bool stamps_only) {
  FillList list;
  auto add = [&](void* p, std::size_t bytes, std::uint32_t value) {
    if (list.count == kMaxFills)
      throw std::logic_error("chain fill list is full");
    list.item[list.count++] = {static_cast<std::uint32_t*>(p), static_cast<std::int64_t>(bytes / 4),
                               value};
  };
  // 0xff bytes: -1 in every index array (a pre-wait read of it is skipped, never out of bounds)
  // and a NaN in every bf16 array (an element nothing wrote fails every comparison).
  if (!stamps_only) {
    for (int b = 0; b < kNumBuffers; ++b)
      add(buf[b], buf_bytes[b], 0xffffffffu);
    add(workspace, workspace_bytes, 0);
    std::size_t const iters = static_cast<std::size_t>(o.iterations);
    add(snapshot, iters * static_cast<std::size_t>(o.tokens * w->shape().top_k) * 4,
        static_cast<std::uint32_t>(kSnapshotUnset));
    add(slots, iters * kNumBuffers * 8, 0);
    add(stale, iters * 4, 0);
    add(recorded, iters * 4, 0);
    // Poisoned like the chain's buffers: a fused layer's GEMM1 must clear them (never the fill).
    add(counters,
        static_cast<std::size_t>(finalize::fused::counter_count(o.tokens, w->shape().hidden)) * 4,
        0xffffffffu);
  }
  for (int k = 0; k < kNumKernels; ++k)
    if (stamps[k])
      add(stamps[k], static_cast<std::size_t>(stamp_ctas[k]) * 32, 0xffffffffu);
  launch_kernel(fill_kernel, dim3(256, static_cast<unsigned>(list.count)), dim3(256), 0, stream,
                false, list);
}

void ChainRunner::Impl::validate_released(LayerPlan const& plan, LayerParams const& l0) const {
  bool any = false;
  for (KernelPlan const& k : plan.kernels)
    if (k.released && k.kernel != Kernel::kFinalize) {
      any = true;
      if (k.kernel == Kernel::kActivation && l0.act.type != activation::Type::kSwiGlu)
        throw InputError("--flavour released: shape " + w->shape().name +
                         " has a ReLU^2 activation; the released activation kernel is SwiGLU "
                         "only (FlashInfer fuses ReLU^2 into its GEMM1)");
    }
  if (!any)
    return;
  require_released_kernels("--flavour released");
  // The swapped W1 is made here, before any capture: its allocation and copy kernel cannot be
  // recorded into the layer's graph (the released chain's first GPU run died of exactly that).
  if (plan.gate_second)
    w->w1_gate_second();
  try {
    released_kernels()->check_routing(l0.routing);
  } catch (InputError const& e) {
    throw InputError("--flavour released: shape " + w->shape().name +
                     " at T=" + std::to_string(o.tokens) + ": " + e.what());
  }
}

void ChainRunner::Impl::enqueue_layer(std::vector<LaunchDescriptor> const& launches, int it) {
  LayerParams const l = layer(it);
  std::int32_t* const snap = snapshot + static_cast<std::int64_t>(it) * o.tokens * w->shape().top_k;
  for (LaunchDescriptor const& d : launches) {
    PdlKnobs knobs = d.knobs;
    // The released kernels have no stamps: their rows are missing from a timeline.
    if (stamping && it == o.iterations - 1 && d.kernel != Kernel::kChecksum && !d.released)
      knobs.stamps = stamps[static_cast<int>(d.kernel)];
    if (d.released) {
      ReleasedKernels const* rk = released_kernels();
      if (rk == nullptr)
        throw InputError("chain: this build lacks the released FlashInfer kernels");
      switch (d.kernel) {
      case Kernel::kRouting:
        rk->routing(l.routing, tile_row_limit, num_tiles, knobs.pdl, stream);
        continue;
      case Kernel::kPermute:
        rk->permute(l.permute, l.routing.expanded_to_permuted, w->shape().top_k, knobs.pdl, stream);
        continue;
      case Kernel::kActivation:
        rk->activation(l.act, l.routing.expanded_to_permuted, o.tokens, w->shape().top_k, knobs.pdl,
                       stream);
        continue;
      case Kernel::kFinalize:
        break; // a released finalize variant runs through finalize::run like any other
      default:
        throw std::logic_error(std::string("chain: no released kernel for ") +
                               kernel_name(d.kernel));
      }
    }
    switch (d.kernel) {
    case Kernel::kRouting:
      if (d.impl == kFastRouting && routing::fast_supports(l.routing))
        routing::run_fast(l.routing, knobs, stream);
      else
        routing::run(l.routing, knobs, routing::Workspace{workspace, workspace_bytes}, stream);
      break;
    case Kernel::kPermute:
      permute::run(l.permute, knobs, stream);
      break;
    case Kernel::kGemm1:
    case Kernel::kGemm2: {
      bool const first = d.kernel == Kernel::kGemm1;
      if (d.fused) { // the tiled GEMM's fused kernels (make_layer_plan allows no other GEMM)
        if (first)
          gemm::run_clearing(l.gemm1, knobs, l.fused, stream);
        else
          gemm::run_fused(l.gemm2, knobs, l.fused, stream);
      } else if (d.impl == kTiledGemmBf16) {
        gemm::GroupedGemmParams g = first ? l.gemm1 : l.gemm2;
        if (d.gate_second)
          g.b = w->w1_gate_second();
        gemm::run(g, knobs, stream);
      } else if (d.impl == kDecodeGemmBf16 || d.impl == kDecodeGemmFp4) {
        gemm::DecodeOptions o = decode_options(d);
        o.pdl = knobs;
        o.grid_ctas = gemm::chain_grid(device_sm_count(), knobs.ctas_per_sm);
        gemm::run_decode(first ? l.decode1 : l.decode2, gemm::Variant::kSplitK, o, stream);
      } else {
        throw std::logic_error("chain: no launcher for GEMM implementation " + d.impl);
      }
      break;
    }
    case Kernel::kActivation:
      activation::run(l.act, knobs, stream);
      break;
    case Kernel::kFinalize: {
      finalize::Options f = d.finalize;
      f.pdl = knobs;
      f.pre_wait_snapshot = d.snapshot ? snap : nullptr;
      finalize::run(l.fin, f, stream);
      break;
    }
    case Kernel::kChecksum: {
      ChecksumParams c;
      std::int64_t off = 0;
      for (int b = 0; b < kNumBuffers; ++b) {
        c.buf[b] = {static_cast<uint4 const*>(buf[b]),
                    static_cast<std::int64_t>(buf_bytes[b] / 16)};
        c.prefix[b] = off;
        off += c.buf[b].chunks;
      }
      c.prefix[kNumBuffers] = off;
      c.slots = slots + static_cast<std::size_t>(it) * kNumBuffers;
      c.snapshot = d.snapshot ? snap : nullptr;
      c.expanded_to_permuted = l.routing.expanded_to_permuted;
      // The stale-read count reads the indices where they are hashed (checksum_kernel).
      if (static_cast<void const*>(c.buf[static_cast<int>(Buffer::kExpandedToPermuted)].ptr) !=
          static_cast<void const*>(c.expanded_to_permuted))
        throw std::logic_error("chain: routing's expanded_to_permuted is not the hashed buffer");
      c.expanded = o.tokens * w->shape().top_k;
      c.stale = stale + it;
      c.recorded = recorded + it;
      // Not after the last layer: its buffers are what download() and the reference check read.
      c.repoison = d.repoison && it + 1 < o.iterations ? 1 : 0;
      launch_kernel(checksum_kernel, dim3(528), dim3(256), 0, stream, knobs.pdl, c);
      break;
    }
    }
  }
}

cudaGraphExec_t ChainRunner::Impl::graph(ChainConfig const& cfg, bool pdl, GraphKind kind) {
  static char const* const kKindName[] = {" checked", " timing", " timing+stamps"};
  std::string const key =
      describe(cfg) + (pdl ? " pdl=on" : " pdl=off") + kKindName[static_cast<int>(kind)];
  auto const found = graphs.find(key);
  if (found != graphs.end())
    return found->second;
  if (graphs.size() >= 8) { // instantiated graphs of thousands of nodes: keep a few
    for (auto& g : graphs)
      MOEFIN_CUDA_CHECK(cudaGraphExecDestroy(g.second));
    graphs.clear();
  }
  LayerParams const l0 = layer(0); // shape errors as InputError, before the capture starts
  routing::validate(l0.routing);
  permute::validate(l0.permute);
  LayerPlan const plan = make_layer_plan(cfg, finalize_variant(cfg), w->flavour());
  bool const checked = kind == GraphKind::kChecked;
  std::vector<LaunchDescriptor> const launches = layer_launches(
      plan, RunFlags{pdl, o.ctas_per_sm, o.max_shared_carveout, checked, wide_gemms(o, *w)});
  if (plan.tiled_gemms()) {
    gemm::validate(l0.gemm1);
    gemm::validate(l0.gemm2);
  } else {
    // Each decode GEMM with the options it is launched with (decode_options: tiled values are
    // read by the wide launch only).
    for (LaunchDescriptor const& d : launches)
      if (d.kernel == Kernel::kGemm1 || d.kernel == Kernel::kGemm2)
        gemm::validate(d.kernel == Kernel::kGemm1 ? l0.decode1 : l0.decode2, gemm::Variant::kSplitK,
                       decode_options(d));
  }
  activation::validate(l0.act);
  cudaGraph_t g = nullptr;
  validate_released(plan, l0);
  if (plan.finalize->inside_gemm2)
    gemm::validate_fused(l0.gemm2, l0.fused);
  MOEFIN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  stamping = kind == GraphKind::kTimingStamped || (checked && o.stamps);
  try {
    if (stamping || checked)
      enqueue_fill(!checked);
    for (int it = 0; it < o.iterations; ++it)
      enqueue_layer(launches, it);
  } catch (...) {
    stamping = false;
    cudaStreamEndCapture(stream, &g);
    if (g)
      cudaGraphDestroy(g);
    throw;
  }
  stamping = false;
  MOEFIN_CUDA_CHECK(cudaStreamEndCapture(stream, &g));
  cudaGraphExec_t exec = nullptr;
  cudaError_t const err = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  MOEFIN_CUDA_CHECK(err);
  graphs[key] = exec;
  return exec;
}

BatchResult ChainRunner::run_batch(ChainConfig const& cfg, bool pdl) {
  Impl& d = *impl_;
  if (opt_.stream_launch) {
    LayerParams const l0 = d.layer(0);
    routing::validate(l0.routing);
    LayerPlan const p = plan(cfg);
    d.validate_released(p, l0);
    if (p.finalize->inside_gemm2)
      gemm::validate_fused(l0.gemm2, l0.fused);
    std::vector<LaunchDescriptor> const launches =
        layer_launches(p, RunFlags{pdl, opt_.ctas_per_sm, opt_.max_shared_carveout, true,
                                   wide_gemms(opt_, weights_)});
    d.stamping = opt_.stamps;
    d.enqueue_fill(false);
    for (int it = 0; it < opt_.iterations; ++it)
      d.enqueue_layer(launches, it);
    d.stamping = false;
  } else {
    cudaGraphExec_t const exec = d.graph(cfg, pdl, Impl::GraphKind::kChecked);
    MOEFIN_CUDA_CHECK(cudaGraphLaunch(exec, d.stream));
  }
  BatchResult r;
  std::size_t const n = static_cast<std::size_t>(opt_.iterations);
  r.slots.resize(n * kNumBuffers);
  r.stale.resize(n);
  r.recorded.resize(n);
  MOEFIN_CUDA_CHECK(cudaMemcpyAsync(r.slots.data(), d.slots, r.slots.size() * 8,
                                    cudaMemcpyDeviceToHost, d.stream));
  MOEFIN_CUDA_CHECK(
      cudaMemcpyAsync(r.stale.data(), d.stale, n * 4, cudaMemcpyDeviceToHost, d.stream));
  MOEFIN_CUDA_CHECK(
      cudaMemcpyAsync(r.recorded.data(), d.recorded, n * 4, cudaMemcpyDeviceToHost, d.stream));
  MOEFIN_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  return r;
}

double ChainRunner::time_layers(ChainConfig const& cfg, bool pdl) {
  Impl& d = *impl_;
  cudaGraphExec_t const exec = d.graph(cfg, pdl, Impl::GraphKind::kTiming);
  MOEFIN_CUDA_CHECK(cudaEventRecord(d.ev0, d.stream));
  MOEFIN_CUDA_CHECK(cudaGraphLaunch(exec, d.stream));
  MOEFIN_CUDA_CHECK(cudaEventRecord(d.ev1, d.stream));
  MOEFIN_CUDA_CHECK(cudaEventSynchronize(d.ev1));
  float ms = 0;
  MOEFIN_CUDA_CHECK(cudaEventElapsedTime(&ms, d.ev0, d.ev1));
  return static_cast<double>(ms) * 1e3 / opt_.iterations;
}

std::vector<std::uint8_t> ChainRunner::download(Buffer b) const {
  Impl const& d = *impl_;
  int const i = static_cast<int>(b);
  std::vector<std::uint8_t> h(d.buf_bytes[i]);
  MOEFIN_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  MOEFIN_CUDA_CHECK(cudaMemcpy(h.data(), d.buf[i], h.size(), cudaMemcpyDeviceToHost));
  return h;
}

std::vector<std::int32_t> ChainRunner::fused_counters() const {
  Impl const& d = *impl_;
  std::vector<std::int32_t> h(
      static_cast<std::size_t>(finalize::fused::counter_count(opt_.tokens, shape().hidden)));
  MOEFIN_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  MOEFIN_CUDA_CHECK(cudaMemcpy(h.data(), d.counters, h.size() * 4, cudaMemcpyDeviceToHost));
  return h;
}

std::vector<std::uint16_t> ChainRunner::hidden_states() const {
  Impl const& d = *impl_;
  std::vector<std::uint16_t> h(static_cast<std::size_t>(opt_.tokens * shape().hidden));
  MOEFIN_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  MOEFIN_CUDA_CHECK(cudaMemcpy(h.data(), d.hidden, h.size() * 2, cudaMemcpyDeviceToHost));
  return h;
}

Timeline ChainRunner::stamp_layers(ChainConfig const& cfg, bool pdl) {
  if (!opt_.stamps)
    throw std::logic_error("stamp_layers() needs RunnerOptions::stamps");
  MOEFIN_CUDA_CHECK(
      cudaGraphLaunch(impl_->graph(cfg, pdl, Impl::GraphKind::kTimingStamped), impl_->stream));
  return timeline();
}

Timeline ChainRunner::timeline() const {
  Impl const& d = *impl_;
  if (!opt_.stamps)
    throw std::logic_error("timeline() needs RunnerOptions::stamps");
  Timeline t;
  MOEFIN_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  for (Kernel k : kAllKernels) {
    int const i = static_cast<int>(k);
    t.kernels.push_back(kernel_name(k));
    std::vector<std::int64_t> h(static_cast<std::size_t>(d.stamp_ctas[i]) * 4);
    MOEFIN_CUDA_CHECK(cudaMemcpy(h.data(), d.stamps[i], h.size() * 8, cudaMemcpyDeviceToHost));
    for (std::int64_t c = 0; c < d.stamp_ctas[i]; ++c) {
      std::int64_t const* row = h.data() + c * 4;
      if (row[kStampStart] == -1)
        continue;
      t.kernel.push_back(i);
      t.cta.push_back(c);
      t.start_ns.push_back(row[kStampStart]);
      t.wait_ns.push_back(row[kStampWait]);
      t.trigger_ns.push_back(row[kStampTrigger]);
      t.end_ns.push_back(row[kStampEnd]);
    }
  }
  return t;
}

finalize::FinalizeVariant const& ChainRunner::finalize_variant(ChainConfig const& cfg) const {
  return impl_->finalize_variant(cfg);
}

LayerPlan ChainRunner::plan(ChainConfig const& cfg) const {
  return make_layer_plan(cfg, finalize_variant(cfg), weights_.flavour());
}

} // namespace moefin::chain
