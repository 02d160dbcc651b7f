#pragma once
// MoE layer shapes of the chain experiments (the seed's three and any H/I/E/top-K), their limits
// on the CUDA chain, and the seeds of randomized routings, weights and hidden states. Host-only.

#include "core/ops/activation_params.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moefin::chain {

/// A MoE layer shape.
struct LayerShape {
  std::string name; // "H6144/I512/E256/top-8"
  std::int64_t hidden = 0;
  std::int64_t inter = 0;
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  activation::Type act = activation::Type::kSwiGlu;
  std::int64_t gemm1_n() const { return act == activation::Type::kSwiGlu ? 2 * inter : inter; }
};

/// The seed's shapes. The intermediate size of H3584/E896/top-16 is not published; moefin uses
/// kTop16Inter (recorded in every result file through the shape name).
inline constexpr std::int64_t kTop16Inter = 512;
std::vector<LayerShape> published_shapes();

/// "top-8", "top-22", "top-16" (the published shapes) or "H<h>/I<i>/E<e>/top-<k>[/relu2|/swiglu]".
/// Throws InputError naming `flag`.
LayerShape parse_shape(std::string const& text, std::string const& flag = "--shapes");
/// A comma-separated list of shapes (throws InputError naming `flag`).
std::vector<LayerShape> parse_shapes(std::string const& text, std::string const& flag);

/// Limits of the CUDA chain: throws InputError naming what is out of range.
///   H multiple of 64 in [64, 16384]; I multiple of 64 in [64, 8192]; E in [K, 1024];
///   K in [1, 32]; T in [1, 128]; tile_m in {8, 16, 32, 64, 128} (8: the decode GEMMs only,
///   chain_run::check_weights_format).
void validate(LayerShape const& s, std::int64_t tokens, std::int64_t tile_m);

/// Rows of the permuted buffers: every expert's group padded to tile_m (a multiple of tile_m).
std::int64_t max_padded_rows(LayerShape const& s, std::int64_t tokens, std::int64_t tile_m);

/// Seed of routing `index` of the (shape, T) series of a run with seed `base`. Presets share
/// the series, so every preset sees the same routings.
std::uint64_t routing_seed(std::uint64_t base, LayerShape const& s, std::int64_t tokens,
                           std::int64_t index);
/// Seed of the weights and hidden states of a shape in a run with seed `base`.
std::uint64_t weight_seed(std::uint64_t base, LayerShape const& s);
/// The routing a replay of `seed` runs before it (a stale read needs a different predecessor).
std::uint64_t replay_predecessor(std::uint64_t seed);

/// Host copy of the router scores of one routing: [tokens, experts].
std::vector<float> router_scores(std::uint64_t seed, std::int64_t tokens, std::int64_t experts);

} // namespace moefin::chain
