#include "core/routing.hpp"

#include "core/bf16.hpp"
#include "core/cli.hpp"
#include "core/rng.hpp"

#include <algorithm>
#include <numeric>

namespace moefin {

char const* distribution_name(Distribution d) {
  switch (d) {
  case Distribution::kUniform:
    return "uniform";
  case Distribution::kZipf:
    return "zipf";
  case Distribution::kHot:
    return "hot";
  case Distribution::kRoundRobin:
    return "round_robin";
  case Distribution::kScores:
    return "scores";
  }
  return "?";
}

bool parse_distribution(std::string const& s, Distribution* out) {
  for (auto d : {Distribution::kUniform, Distribution::kZipf, Distribution::kHot,
                 Distribution::kRoundRobin, Distribution::kScores})
    if (s == distribution_name(d)) {
      *out = d;
      return true;
    }
  return false;
}

namespace {

void validate(RoutingSpec const& s) {
  cli::check_range<std::int64_t>("num_tokens", s.num_tokens, 1, 1 << 20);
  cli::check_range<std::int64_t>("num_experts", s.num_experts, 1, 1 << 16);
  cli::check_range<std::int64_t>("top_k", s.top_k, 1, std::min<std::int64_t>(64, s.num_experts));
}

} // namespace

Routing generate_routing(RoutingSpec const& spec) {
  validate(spec);
  if (spec.distribution != Distribution::kUniform)
    throw InputError(std::string("distribution ") + distribution_name(spec.distribution) +
                     " is not implemented yet");
  Routing r;
  r.num_tokens = spec.num_tokens;
  r.num_experts = spec.num_experts;
  r.top_k = spec.top_k;
  std::size_t const n = static_cast<std::size_t>(spec.num_tokens * spec.top_k);
  r.expert_ids.resize(n);
  r.weights.resize(n);
  r.weights_bf16.resize(n);
  std::vector<std::int32_t> pool(static_cast<std::size_t>(spec.num_experts));
  for (std::int64_t t = 0; t < spec.num_tokens; ++t) {
    Rng rng(Rng::mix(spec.seed, static_cast<std::uint64_t>(t)));
    std::iota(pool.begin(), pool.end(), 0);
    double sum = 0;
    for (std::int64_t k = 0; k < spec.top_k; ++k) {
      // Partial Fisher-Yates: K distinct experts.
      auto const j =
          static_cast<std::size_t>(k) + rng.below(static_cast<std::uint64_t>(spec.num_experts - k));
      std::swap(pool[static_cast<std::size_t>(k)], pool[j]);
      auto const e = static_cast<std::size_t>(t * spec.top_k + k);
      r.expert_ids[e] = pool[static_cast<std::size_t>(k)];
      r.weights[e] = static_cast<float>(rng.uniform(0.05, 1.0));
      sum += r.weights[e];
    }
    for (std::int64_t k = 0; k < spec.top_k; ++k) {
      auto const e = static_cast<std::size_t>(t * spec.top_k + k);
      if (spec.renormalize)
        r.weights[e] = static_cast<float>(r.weights[e] / sum);
      r.weights_bf16[e] = float_to_bf16(r.weights[e]);
    }
  }
  return r;
}

RoutingLayout build_layout(Routing const& routing, std::int64_t tile, std::int64_t local_begin,
                           std::int64_t num_local) {
  cli::check_range<std::int64_t>("tile", tile, 1, 1 << 12);
  if (num_local < 0) {
    local_begin = 0;
    num_local = routing.num_experts;
  }
  RoutingLayout L;
  L.num_tokens = routing.num_tokens;
  L.top_k = routing.top_k;
  L.local_expert_begin = local_begin;
  L.num_local_experts = num_local;
  L.tile = tile;
  std::size_t const n = routing.expert_ids.size();
  L.expert_counts.assign(static_cast<std::size_t>(num_local), 0);
  for (std::size_t e = 0; e < n; ++e) {
    std::int64_t const local = routing.expert_ids[e] - local_begin;
    if (local >= 0 && local < num_local)
      ++L.expert_counts[static_cast<std::size_t>(local)];
  }
  L.expert_offsets.assign(static_cast<std::size_t>(num_local) + 1, 0);
  for (std::int64_t x = 0; x < num_local; ++x) {
    std::int64_t const c = L.expert_counts[static_cast<std::size_t>(x)];
    L.expert_offsets[static_cast<std::size_t>(x) + 1] = static_cast<std::int32_t>(
        L.expert_offsets[static_cast<std::size_t>(x)] + (c + tile - 1) / tile * tile);
  }
  L.total_padded_rows = L.expert_offsets.back();
  auto const rows = static_cast<std::size_t>(L.total_padded_rows);
  L.permuted_to_token.assign(rows, -1);
  L.permuted_to_expanded.assign(rows, -1);
  L.expanded_to_permuted.assign(n, -1);
  // Expanded indices ascend with the token, so filling in expanded order puts the rows of one
  // expert in token order.
  std::vector<std::int32_t> fill(L.expert_offsets.begin(), L.expert_offsets.end() - 1);
  for (std::size_t e = 0; e < n; ++e) {
    std::int64_t const local = routing.expert_ids[e] - local_begin;
    if (local < 0 || local >= num_local)
      continue;
    std::int32_t const row = fill[static_cast<std::size_t>(local)]++;
    L.expanded_to_permuted[e] = row;
    L.permuted_to_token[static_cast<std::size_t>(row)] =
        static_cast<std::int32_t>(e / static_cast<std::size_t>(routing.top_k));
    L.permuted_to_expanded[static_cast<std::size_t>(row)] = static_cast<std::int32_t>(e);
  }
  L.cta_to_expert.assign(rows / static_cast<std::size_t>(tile), -1);
  for (std::int64_t x = 0; x < num_local; ++x)
    for (std::int32_t r = L.expert_offsets[static_cast<std::size_t>(x)];
         r < L.expert_offsets[static_cast<std::size_t>(x) + 1];
         r += static_cast<std::int32_t>(tile))
      L.cta_to_expert[static_cast<std::size_t>(r / tile)] = static_cast<std::int32_t>(x);
  return L;
}

std::vector<std::uint16_t> random_bf16(std::size_t n, std::uint64_t seed, float lo, float hi) {
  std::vector<std::uint16_t> out(n);
  Rng rng(seed);
  for (auto& v : out) {
    double const mag = rng.uniform(lo, hi);
    v = float_to_bf16(static_cast<float>((rng.next() & 1) ? mag : -mag));
  }
  return out;
}

} // namespace moefin
