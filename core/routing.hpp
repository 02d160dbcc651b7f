#pragma once
// Seeded routing generators (docs/design/computation.md). Every random draw goes through
// moefin::Rng, so a seed names the same routing on every machine.

#include "core/layout.hpp"
#include "core/ops/routing_params.hpp"

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

char const* method_name(routing::Method m); // "softmax_topk", "topk_softmax"
bool parse_method(std::string const& s, routing::Method* out);

/// What to generate. Error messages name the `moefin route` flag of each field.
struct RoutingSpec {
  std::int64_t num_tokens = 1;                        // --tokens, [1, 2^20]
  std::int64_t num_experts = 8;                       // --experts, [1, 2^16]
  std::int64_t top_k = 1;                             // --top-k, [1, min(64, E)]
  Distribution distribution = Distribution::kUniform; // --distribution
  double zipf_s = 1.2;     // --zipf-s, [0, 16]: P(expert of rank r) ~ 1 / r^s; expert id = rank - 1
  bool renormalize = true; // weights of a token sum to 1 (false: raw draws or raw probabilities)
  std::uint64_t seed = 1;

  // Which weight array the layer uses. Both views are always filled (weights_bf16 is the
  // round-to-nearest-even of the fp32 weight); this only selects the one finalize reads.
  finalize::WeightType weight_type = finalize::WeightType::kBf16;

  // Locality (expert parallelism). Either an explicit local range or a drop fraction, not both.
  double drop_fraction = 0.0; // --drop-fraction, [0, 1]: round(f*E) highest experts dropped
  std::int64_t local_expert_begin = 0; // --local-experts BEGIN:COUNT
  std::int64_t num_local_experts = -1; // -1: every expert not dropped by drop_fraction

  std::int64_t hot_expert = 0; // kHot: the expert every token takes
  routing::Method score_method = routing::Method::kSoftmaxTopK; // kScores
};

/// A spec with these sizes, distribution and seed, every other field at its default.
RoutingSpec routing_spec(std::int64_t num_tokens, std::int64_t num_experts, std::int64_t top_k,
                         Distribution distribution = Distribution::kUniform,
                         std::uint64_t seed = 1);

/// The local expert range a spec selects.
struct LocalRange {
  std::int64_t begin = 0;
  std::int64_t count = 0;
};

/// Checks every field (throws InputError naming the flag, the value and the allowed range):
/// T <= 0, E <= 0, K > E, K > 64, a fraction outside [0, 1], a local range outside [0, E), ...
void validate(RoutingSpec const& spec);

/// drop_fraction f: local experts [0, E - round(f*E)); else the explicit range (default: all).
LocalRange local_range(RoutingSpec const& spec);

/// Per-token expert choices and weights (both fp32 and bf16 views) of `spec`.
/// Throws InputError for an invalid spec (see validate()).
Routing generate_routing(RoutingSpec const& spec);

/// The layout of `routing` with the local range `spec` selects.
RoutingLayout build_layout(Routing const& routing, RoutingSpec const& spec, std::int64_t tile);

/// Seeded router logits [T, E], approximately standard normal (a centred sum of four uniforms:
/// arithmetic only, so the same bits on every machine). Never NaN; ties have probability ~2^-24.
std::vector<float> router_scores(std::int64_t num_tokens, std::int64_t num_experts,
                                 std::uint64_t seed);

/// Routing of one token from its scores: the K largest scores, ties to the lower expert id,
/// written in descending score order (k = 0 is the largest); weights computed in double
/// (max-subtracted exp) and rounded once to fp32:
///   kSoftmaxTopK: p = softmax over all E; w_k = p_k, or p_k / sum of the K selected p when
///                 renormalize (then the same numbers as kTopKSoftmax);
///   kTopKSoftmax: softmax over the K selected scores (renormalize has no effect).
/// The routing reference (reference/routing.cpp) runs this per token, so it is the one
/// definition of the selection and of the weights.
void route_token(float const* scores, std::int64_t num_experts, std::int64_t top_k,
                 routing::Method method, bool renormalize, std::int32_t* expert_ids,
                 float* weights);

/// n seeded bf16 values uniform in +-[lo, hi] (magnitudes never below lo > 0, so never zeros).
std::vector<std::uint16_t> random_bf16(std::size_t n, std::uint64_t seed, float lo = 0.05f,
                                       float hi = 1.0f);

} // namespace moefin
