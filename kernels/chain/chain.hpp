#pragma once
// The MoE layer chain on the GPU: routing -> permute -> GEMM1 -> activation -> GEMM2 ->
// finalize, with the PDL knobs of a ChainConfig (core/ops/chain_knobs.hpp), launched as its layer
// plan says (core/ops/layer_plan.hpp, through chain_launches.hpp). Host-visible header: no CUDA
// includes.
//
// A ChainRunner owns the device buffers of one (shape, T) and runs `iterations` layers inside
// ONE CUDA graph replay, each layer on its own routing (the router scores of every iteration sit
// in one device buffer; layer i's routing reads slice i), so that a stale read changes the
// output. After every layer a checksum kernel (PDL secondary, waits at entry) hashes every
// buffer of the layer into that iteration's slots and counts the pre-wait indices of finalize
// that differ from what routing wrote. Nothing syncs with the host inside a batch.

#include "core/chain/presets.hpp"
#include "core/chain/shape.hpp"
#include "core/ops/chain_knobs.hpp"
#include "core/ops/layer_plan.hpp"
#include "core/ops/scale_layout.hpp"
#include "core/ops/value_layout.hpp"
#include "kernels/finalize/finalize.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moefin::chain {

// The buffers hashed per iteration are the first kNumBuffers of chain::Buffer
// (core/ops/layer_plan.hpp), in chain order: the first differing one names a mismatch.

/// Bytes of one element of buffer b as stored (4 for int32, 2 for bf16).
int buffer_element_bytes(Buffer b);

/// Random weights of one layer shape in one weights format (core/ops/layer_plan.hpp,
/// weights_format_names), generated on the device once (GBs): w1 [E, gemm1_n, H], w2 [E, H, I].
/// bf16-tiled and bf16: bf16 uniform in +-[0.05, 1] / sqrt(k), never zero (the same values for
/// both); fp4: the seeded quantizer of core/fp4.hpp (gemm::fill_fp4) with source weights bounded
/// by 1 / sqrt(k), values [E, n, k / 2], e4m3 scales [E, n, k / 16], fp32 global scales [E].
/// fp4 scales are generated row-major (what download() returns and the reference reads) and,
/// with `scale_layout` kTiled (the default), also in 16 x 128 tiles (core/fp4.hpp): the copy the
/// chain's decode GEMMs read (decode_gemm_tscale_kernel, the `tscale` candidate of `sweep gemm`,
/// whose output bits are the row-major kernel's; test_decode_gpu, test_chain_equivalence).
/// With `value_layout` kPacked (tiled scales only) fp4 values are also stored with each word
/// bit-permuted (fp4::pack_word), and the GEMMs read that copy (decode_gemm_wpack_kernel, the
/// `wpack` candidate, or launched wide as the runner does by default, decode_gemm_wide_kernel:
/// RunnerOptions::wide_gemms; the same output bits again); with kTiles the packed words' chunks
/// are also moved into warp-stage tiles (fp4::value_chunk_offset), read by the GEMMs launched
/// wide only (decode_gemm_tiles_kernel, the `tiles` candidate). Unset, it is
/// fp4::chain_value_layout: tiles with tiled scales (packed before them, which was measured faster
/// than nibbles in every GEMM cell and layer row of studies/fp4_packed_values/h100/), nibbles
/// with row-major ones.
class LayerWeights {
public:
  LayerWeights(LayerShape const& shape, std::uint64_t seed,
               std::string const& format = kDefaultWeightsFormat,
               fp4::ScaleLayout scale_layout = fp4::ScaleLayout::kTiled,
               std::optional<fp4::ValueLayout> value_layout = std::nullopt);
  ~LayerWeights();
  LayerWeights(LayerWeights const&) = delete;
  LayerWeights& operator=(LayerWeights const&) = delete;

  LayerShape const& shape() const { return shape_; }
  std::string const& format() const { return format_; }
  /// The chain flavour whose GEMMs read these weights.
  ChainFlavour const& flavour() const { return *flavour_; }
  bool fp4() const { return format_ == "fp4"; }
  /// The values of GEMM 1 and 2 the chain's GEMMs read (in value_layout()).
  void const* w1() const { return gemm_values(w_[0]); }
  void const* w2() const { return gemm_values(w_[1]); }
  /// fp4 only: the scales of GEMM `gemm` in the layout the chain's GEMMs read (scale_layout()).
  std::uint8_t const* scales(int gemm) const {
    Matrix const& m = w_[gemm - 1];
    return m.scales_tiled != nullptr ? m.scales_tiled : m.scales;
  }
  /// kTiled for fp4 weights built with it (they hold the tiled copy), else kRowMajor.
  fp4::ScaleLayout scale_layout() const {
    return w_[0].scales_tiled != nullptr ? fp4::ScaleLayout::kTiled : fp4::ScaleLayout::kRowMajor;
  }
  /// kPacked or kTiles for fp4 weights built with it (they hold that copy), else kNibbles.
  fp4::ValueLayout value_layout() const {
    return w_[0].values_packed != nullptr ? packed_layout_ : fp4::ValueLayout::kNibbles;
  }
  float const* global(int gemm) const { return w_[gemm - 1].global; } // fp4 only
  /// w1 with the two halves of each expert's output rows swapped (gate second), made on first use
  /// (the released chain flavour: ChainFlavour::gate_second); SwiGLU shapes on bf16 weights only.
  void const* w1_gate_second() const;
  std::size_t bytes() const;
  /// Host copy of one expert's matrix of GEMM `gemm` (1 or 2) as stored: values (bf16 bits or
  /// packed e2m1), and for fp4 its scales and global scale.
  struct Expert {
    std::vector<std::uint8_t> values, scales;
    float global = 1.0f;
  };
  Expert download(int gemm, std::int64_t expert) const;

private:
  struct Matrix {
    std::int64_t n = 0, k = 0;
    void* values = nullptr;
    std::uint8_t* scales = nullptr;       // row-major
    std::uint8_t* scales_tiled = nullptr; // kTiled (fp4 with that layout only)
    void* values_packed = nullptr;        // packed_layout_ (fp4 with kPacked or kTiles only)
    float* global = nullptr;
  };
  static void const* gemm_values(Matrix const& m) {
    return m.values_packed != nullptr ? m.values_packed : m.values;
  }
  std::size_t value_bytes(Matrix const& m) const; // of one expert
  LayerShape shape_;
  std::string format_;
  ChainFlavour const* flavour_ = nullptr;
  Matrix w_[2];
  fp4::ValueLayout packed_layout_ = fp4::ValueLayout::kPacked; // of values_packed
  mutable void* w1_gate_second_ = nullptr; // w1_gate_second(), made on first use
};

struct RunnerOptions {
  std::int64_t tokens = 1;
  std::int64_t tile_m = 16;
  int iterations = 256;             // layers per graph replay
  bool stamps = false;              // per-CTA stamps of every kernel of the last iteration
  int ctas_per_sm = 0;              // resident-wave kernels' CTAs per SM (PdlKnobs::ctas_per_sm)
  bool max_shared_carveout = false; // PdlKnobs::max_shared_carveout of the same kernels
  bool stream_launch = false; // checked runs as plain stream launches instead of one graph replay
  // fp4 decode GEMMs launched wide (gemm::DecodeOptions::wide: two warp-stages per pipeline
  // stage; the same bits). true needs packed values, false values not in kTiles. Unset:
  // fp4::chain_wide_gemms of the
  // weights' value layout (wide with packed values, LayerWeights' default with tiled scales).
  std::optional<bool> wide_gemms;
  std::uint64_t hidden_seed = 1;
};

/// Per-iteration results of one replay, on the host.
struct BatchResult {
  std::vector<std::uint64_t> slots;   // [iterations][kNumBuffers] position-dependent hashes
  std::vector<std::int32_t> stale;    // [iterations] pre-wait indices != routing's final ones
  std::vector<std::int32_t> recorded; // [iterations] pre-wait indices finalize recorded
  std::uint64_t slot(int it, Buffer b) const {
    return slots[static_cast<std::size_t>(it) * kNumBuffers + static_cast<std::size_t>(b)];
  }
};

/// Per-CTA stamps of one iteration (docs/reference/experiment-tables.md "Timelines"); -1 where an
/// event is missing.
struct Timeline {
  std::vector<std::string> kernels;
  std::vector<std::int64_t> kernel, cta, start_ns, wait_ns, trigger_ns, end_ns;
};

class ChainRunner {
public:
  ChainRunner(LayerWeights const& weights, RunnerOptions const& opt);
  ~ChainRunner();
  ChainRunner(ChainRunner const&) = delete;
  ChainRunner& operator=(ChainRunner const&) = delete;

  int iterations() const { return opt_.iterations; }
  std::int64_t tokens() const { return opt_.tokens; }
  std::int64_t max_rows() const { return max_rows_; }
  LayerShape const& shape() const { return weights_.shape(); }
  LayerWeights const& weights() const { return weights_; }

  /// The router scores of iteration i are those of seeds[i] (seeds.size() == iterations).
  void set_routings(std::vector<std::uint64_t> const& seeds);
  std::vector<std::uint64_t> const& routings() const { return seeds_; }

  /// Replays the checked graph of `cfg` (built on first use) with PDL on or off.
  BatchResult run_batch(ChainConfig const& cfg, bool pdl);

  /// Median-free single sample: microseconds per layer of one replay of the timing graph (the
  /// layers back to back, no checksum), PDL on or off.
  double time_layers(ChainConfig const& cfg, bool pdl);

  /// Host copy of buffer b as it is now (after the last replay: the last iteration's values).
  std::vector<std::uint8_t> download(Buffer b) const;
  std::vector<std::uint16_t> hidden_states() const;
  /// The fused finalize's arrival counters ([T][H / 16]) as the last layer left them.
  std::vector<std::int32_t> fused_counters() const;
  /// Stamps of the last iteration of the last run_batch or stamp_layers (needs
  /// RunnerOptions::stamps).
  Timeline timeline() const;
  /// Replays the timing graph of `cfg` once with per-CTA stamps on its last layer, from a graph
  /// of its own (timed replays never record stamps), and returns them (needs
  /// RunnerOptions::stamps).
  Timeline stamp_layers(ChainConfig const& cfg, bool pdl);

  /// The finalize variant the chain launches under `cfg` (the dispatch rule on this shape, or
  /// the forced variant), and the layer plan of `cfg` with it.
  finalize::FinalizeVariant const& finalize_variant(ChainConfig const& cfg) const;
  LayerPlan plan(ChainConfig const& cfg) const;

private:
  struct Impl;
  LayerWeights const& weights_;
  RunnerOptions opt_;
  std::int64_t max_rows_ = 0;
  std::vector<std::uint64_t> seeds_;
  std::unique_ptr<Impl> impl_;
};

} // namespace moefin::chain
