#pragma once
// Seeded routing generators and the layout builder (DESIGN.md section 1).

#include "core/layout.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moefin {

enum class Distribution : std::int32_t {
  kUniform = 0,    // K distinct experts per token, uniformly without replacement
  kZipf = 1,       // skewed: expert popularity ~ 1 / rank^s, without replacement per token
  kHot = 2,        // one hot expert receives every token (plus K-1 others)
  kRoundRobin = 3, // balanced: token t takes experts (t*K + k) mod E
  kScores = 4,     // from seeded router scores through the routing reference (softmax, top-K)
};

char const* distribution_name(Distribution d);
bool parse_distribution(std::string const& s, Distribution* out);

struct RoutingSpec {
  std::int64_t num_tokens = 1;
  std::int64_t num_experts = 8;
  std::int64_t top_k = 1;
  Distribution distribution = Distribution::kUniform;
  double zipf_s = 1.2;
  bool renormalize = true; // weights of a token sum to 1
  std::uint64_t seed = 1;
};

/// Throws InputError (naming the field and range) for K > E, K > 64, T <= 0, E <= 0, ...
Routing generate_routing(RoutingSpec const& spec);

/// The exact routing outputs for local experts [local_begin, local_begin + num_local).
/// num_local < 0 means every expert is local.
RoutingLayout build_layout(Routing const& routing, std::int64_t tile, std::int64_t local_begin = 0,
                           std::int64_t num_local = -1);

/// n seeded bf16 values uniform in +-[lo, hi] (magnitudes never below lo > 0, so never zeros).
std::vector<std::uint16_t> random_bf16(std::size_t n, std::uint64_t seed, float lo = 0.05f,
                                       float hi = 1.0f);

} // namespace moefin
