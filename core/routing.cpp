#include "core/routing.hpp"

#include "core/bf16.hpp"
#include "core/cli.hpp"
#include "core/rng.hpp"

#include <algorithm>
#include <cmath>
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

char const* method_name(routing::Method m) {
  switch (m) {
  case routing::Method::kSoftmaxTopK:
    return "softmax_topk";
  case routing::Method::kTopKSoftmax:
    return "topk_softmax";
  }
  return "?";
}

bool parse_method(std::string const& s, routing::Method* out) {
  for (auto m : {routing::Method::kSoftmaxTopK, routing::Method::kTopKSoftmax})
    if (s == method_name(m)) {
      *out = m;
      return true;
    }
  return false;
}

RoutingSpec routing_spec(std::int64_t num_tokens, std::int64_t num_experts, std::int64_t top_k,
                         Distribution distribution, std::uint64_t seed) {
  RoutingSpec s;
  s.num_tokens = num_tokens;
  s.num_experts = num_experts;
  s.top_k = top_k;
  s.distribution = distribution;
  s.seed = seed;
  return s;
}

void validate(RoutingSpec const& s) {
  cli::check_range<std::int64_t>("--tokens", s.num_tokens, 1, 1 << 20);
  cli::check_range<std::int64_t>("--experts", s.num_experts, 1, 1 << 16);
  std::int64_t const k_max = std::min<std::int64_t>(64, s.num_experts);
  if (s.top_k < 1 || s.top_k > k_max)
    throw InputError("--top-k: value " + std::to_string(s.top_k) + " out of range [1, " +
                     std::to_string(k_max) + "] (top-K is at most 64 and at most --experts " +
                     std::to_string(s.num_experts) + ")");
  cli::check_range("--zipf-s", s.zipf_s, 0.0, 16.0);
  cli::check_range("--drop-fraction", s.drop_fraction, 0.0, 1.0);
  cli::check_range<std::int64_t>("--hot-expert", s.hot_expert, 0, s.num_experts - 1);
  constexpr std::int64_t kMaxScores = std::int64_t(1) << 28;
  if (s.distribution == Distribution::kScores && s.num_tokens * s.num_experts > kMaxScores)
    throw InputError("--tokens x --experts: " + std::to_string(s.num_tokens) + " x " +
                     std::to_string(s.num_experts) +
                     " router scores exceed 2^28 (distribution scores)");
  if (s.num_local_experts >= 0) {
    if (s.drop_fraction > 0)
      throw InputError("--drop-fraction and --local-experts both choose the local experts; "
                       "give one of them");
    check_local_range(s.local_expert_begin, s.num_local_experts, s.num_experts);
  }
}

LocalRange local_range(RoutingSpec const& s) {
  validate(s);
  if (s.num_local_experts >= 0)
    return {s.local_expert_begin, s.num_local_experts};
  auto const dropped =
      static_cast<std::int64_t>(std::llround(s.drop_fraction * static_cast<double>(s.num_experts)));
  return {0, s.num_experts - dropped};
}

RoutingLayout build_layout(Routing const& routing, RoutingSpec const& spec, std::int64_t tile) {
  LocalRange const l = local_range(spec);
  return build_layout(routing, tile, l.begin, l.count);
}

namespace {

/// Expert weights of one token: raw uniform draws, optionally renormalized; fills both views.
class TokenWeights {
public:
  TokenWeights(Routing& r, std::int64_t t, bool renormalize)
      : r_(r), base_(static_cast<std::size_t>(t * r.top_k)), renormalize_(renormalize) {}

  void draw(std::int64_t k, Rng& rng) {
    float const w = static_cast<float>(rng.uniform(0.05, 1.0));
    r_.weights[base_ + static_cast<std::size_t>(k)] = w;
    sum_ += w;
  }

  void finish() {
    for (std::int64_t k = 0; k < r_.top_k; ++k) {
      float& w = r_.weights[base_ + static_cast<std::size_t>(k)];
      if (renormalize_)
        w = static_cast<float>(w / sum_);
      r_.weights_bf16[base_ + static_cast<std::size_t>(k)] = float_to_bf16(w);
    }
  }

private:
  Routing& r_;
  std::size_t base_;
  bool renormalize_;
  double sum_ = 0;
};

Routing empty_routing(RoutingSpec const& spec) {
  Routing r;
  r.num_tokens = spec.num_tokens;
  r.num_experts = spec.num_experts;
  r.top_k = spec.top_k;
  std::size_t const n = static_cast<std::size_t>(spec.num_tokens * spec.top_k);
  r.expert_ids.resize(n);
  r.weights.resize(n);
  r.weights_bf16.resize(n);
  return r;
}

Rng token_rng(std::uint64_t seed, std::int64_t t) {
  return Rng(Rng::mix(seed, static_cast<std::uint64_t>(t)));
}

/// Partial Fisher-Yates over a pool of candidates: take(rng) returns a candidate not taken since
/// the last restore(). restore() undoes the swaps, so every token starts from the same pool in
/// O(K) instead of O(E), and the draws are those of a freshly initialized pool.
class DistinctDraw {
public:
  explicit DistinctDraw(std::vector<std::int32_t> pool) : pool_(std::move(pool)) {}

  std::int32_t take(Rng& rng) {
    std::size_t const k = swaps_.size();
    std::size_t const j = k + rng.below(static_cast<std::uint64_t>(pool_.size() - k));
    std::swap(pool_[k], pool_[j]);
    swaps_.push_back(j);
    return pool_[k];
  }

  void restore() {
    for (std::size_t k = swaps_.size(); k-- > 0;)
      std::swap(pool_[k], pool_[swaps_[k]]);
    swaps_.clear();
  }

private:
  std::vector<std::int32_t> pool_;
  std::vector<std::size_t> swaps_;
};

std::vector<std::int32_t> experts_except(std::int64_t num_experts, std::int64_t excluded) {
  std::vector<std::int32_t> out;
  for (std::int32_t e = 0; e < num_experts; ++e)
    if (e != excluded)
      out.push_back(e);
  return out;
}

void generate_uniform(RoutingSpec const& spec, Routing& r) {
  DistinctDraw draw(experts_except(spec.num_experts, -1));
  for (std::int64_t t = 0; t < spec.num_tokens; ++t) {
    Rng rng = token_rng(spec.seed, t);
    TokenWeights w(r, t, spec.renormalize);
    for (std::int64_t k = 0; k < spec.top_k; ++k) {
      r.expert_ids[static_cast<std::size_t>(t * spec.top_k + k)] = draw.take(rng);
      w.draw(k, rng);
    }
    draw.restore();
    w.finish();
  }
}

/// Successive sampling without replacement from P(e) ~ 1 / (e+1)^s: each choice is drawn from the
/// experts the token has not taken yet, in proportion to their weights. Draws from the full
/// distribution and rejects taken experts (cheap while the taken mass is small), then falls back
/// to a scan of the remaining mass; both sample the same conditional distribution.
void generate_zipf(RoutingSpec const& spec, Routing& r) {
  auto const E = static_cast<std::size_t>(spec.num_experts);
  std::vector<double> mass(E), cdf(E);
  double total = 0;
  for (std::size_t e = 0; e < E; ++e) {
    mass[e] = std::pow(static_cast<double>(e + 1), -spec.zipf_s);
    total += mass[e];
    cdf[e] = total;
  }
  std::vector<char> taken(E, 0);
  constexpr int kMaxRejections = 32;
  for (std::int64_t t = 0; t < spec.num_tokens; ++t) {
    Rng rng = token_rng(spec.seed, t);
    TokenWeights w(r, t, spec.renormalize);
    double taken_mass = 0;
    for (std::int64_t k = 0; k < spec.top_k; ++k) {
      std::size_t pick = E;
      for (int attempt = 0; attempt < kMaxRejections && pick == E; ++attempt) {
        double const u = rng.uniform() * total;
        std::size_t const e = std::min<std::size_t>(
            static_cast<std::size_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin()),
            E - 1);
        if (!taken[e])
          pick = e;
      }
      if (pick == E) {
        double u = rng.uniform() * (total - taken_mass);
        for (std::size_t e = 0; e < E; ++e) {
          if (taken[e])
            continue;
          pick = e; // the last untaken expert absorbs rounding at the end of the scan
          if (u < mass[e])
            break;
          u -= mass[e];
        }
      }
      taken[pick] = 1;
      taken_mass += mass[pick];
      r.expert_ids[static_cast<std::size_t>(t * spec.top_k + k)] = static_cast<std::int32_t>(pick);
      w.draw(k, rng);
    }
    for (std::int64_t k = 0; k < spec.top_k; ++k)
      taken[static_cast<std::size_t>(r.expert_ids[static_cast<std::size_t>(t * spec.top_k + k)])] =
          0;
    w.finish();
  }
}

/// Every token takes the hot expert, in a random one of its K slots, plus K-1 distinct others.
void generate_hot(RoutingSpec const& spec, Routing& r) {
  auto const hot = static_cast<std::int32_t>(spec.hot_expert);
  DistinctDraw draw(experts_except(spec.num_experts, hot));
  std::vector<std::int32_t> others(static_cast<std::size_t>(spec.top_k));
  for (std::int64_t t = 0; t < spec.num_tokens; ++t) {
    Rng rng = token_rng(spec.seed, t);
    TokenWeights w(r, t, spec.renormalize);
    for (std::int64_t k = 0; k + 1 < spec.top_k; ++k)
      others[static_cast<std::size_t>(k)] = draw.take(rng);
    draw.restore();
    auto const slot = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(spec.top_k)));
    std::size_t next = 0;
    for (std::int64_t k = 0; k < spec.top_k; ++k) {
      r.expert_ids[static_cast<std::size_t>(t * spec.top_k + k)] = k == slot ? hot : others[next++];
      w.draw(k, rng);
    }
    w.finish();
  }
}

void generate_round_robin(RoutingSpec const& spec, Routing& r) {
  for (std::int64_t t = 0; t < spec.num_tokens; ++t) {
    Rng rng = token_rng(spec.seed, t);
    TokenWeights w(r, t, spec.renormalize);
    for (std::int64_t k = 0; k < spec.top_k; ++k) {
      r.expert_ids[static_cast<std::size_t>(t * spec.top_k + k)] =
          static_cast<std::int32_t>((t * spec.top_k + k) % spec.num_experts);
      w.draw(k, rng);
    }
    w.finish();
  }
}

void generate_from_scores(RoutingSpec const& spec, Routing& r) {
  std::vector<float> const scores = router_scores(spec.num_tokens, spec.num_experts, spec.seed);
  for (std::int64_t t = 0; t < spec.num_tokens; ++t) {
    auto const base = static_cast<std::size_t>(t * spec.top_k);
    route_token(scores.data() + t * spec.num_experts, spec.num_experts, spec.top_k,
                spec.score_method, spec.renormalize, r.expert_ids.data() + base,
                r.weights.data() + base);
    for (std::int64_t k = 0; k < spec.top_k; ++k)
      r.weights_bf16[base + static_cast<std::size_t>(k)] =
          float_to_bf16(r.weights[base + static_cast<std::size_t>(k)]);
  }
}

} // namespace

Routing generate_routing(RoutingSpec const& spec) {
  validate(spec);
  Routing r = empty_routing(spec);
  switch (spec.distribution) {
  case Distribution::kUniform:
    generate_uniform(spec, r);
    break;
  case Distribution::kZipf:
    generate_zipf(spec, r);
    break;
  case Distribution::kHot:
    generate_hot(spec, r);
    break;
  case Distribution::kRoundRobin:
    generate_round_robin(spec, r);
    break;
  case Distribution::kScores:
    generate_from_scores(spec, r);
    break;
  }
  return r;
}

std::vector<float> router_scores(std::int64_t num_tokens, std::int64_t num_experts,
                                 std::uint64_t seed) {
  constexpr double kSqrt3 = 1.7320508075688772; // a sum of 4 uniforms has variance 1/3
  std::vector<float> out(static_cast<std::size_t>(num_tokens * num_experts));
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    Rng rng(Rng::mix(seed ^ 0x5c07e5c07e5ULL, static_cast<std::uint64_t>(t)));
    for (std::int64_t e = 0; e < num_experts; ++e) {
      double const sum = rng.uniform() + rng.uniform() + rng.uniform() + rng.uniform();
      out[static_cast<std::size_t>(t * num_experts + e)] = static_cast<float>((sum - 2.0) * kSqrt3);
    }
  }
  return out;
}

void route_token(float const* scores, std::int64_t num_experts, std::int64_t top_k,
                 routing::Method method, bool renormalize, std::int32_t* expert_ids,
                 float* weights) {
  // Insertion into a sorted list of the best K seen so far; scanning ids in ascending order makes
  // an equal later score lose, which is the tie rule.
  auto better = [&](std::int64_t a, std::int64_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  };
  std::int64_t filled = 0;
  for (std::int64_t e = 0; e < num_experts; ++e) {
    std::int64_t pos;
    if (filled < top_k)
      pos = filled++;
    else if (better(e, expert_ids[top_k - 1]))
      pos = top_k - 1;
    else
      continue;
    while (pos > 0 && better(e, expert_ids[pos - 1])) {
      expert_ids[pos] = expert_ids[pos - 1];
      --pos;
    }
    expert_ids[pos] = static_cast<std::int32_t>(e);
  }
  double const top = scores[expert_ids[0]];
  double selected = 0;
  for (std::int64_t k = 0; k < top_k; ++k)
    selected += std::exp(static_cast<double>(scores[expert_ids[k]]) - top);
  double denominator = selected;
  if (method == routing::Method::kSoftmaxTopK && !renormalize) {
    denominator = 0;
    for (std::int64_t e = 0; e < num_experts; ++e)
      denominator += std::exp(static_cast<double>(scores[e]) - top);
  }
  for (std::int64_t k = 0; k < top_k; ++k)
    weights[k] = static_cast<float>(std::exp(static_cast<double>(scores[expert_ids[k]]) - top) /
                                    denominator);
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
