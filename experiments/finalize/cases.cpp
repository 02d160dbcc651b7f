#include "experiments/finalize/cases.hpp"

#include "core/bf16.hpp"
#include "core/cli.hpp"
#include "core/finalize_inputs.hpp"
#include "core/ops/errors.hpp"
#include "core/rng.hpp"
#include "kernels/finalize/finalize_policy.hpp"

#include <algorithm>
#include <cstring>

namespace moefin::fin {

RoutingCase parse_routing_case(std::string const& flag, std::string const& text) {
  RoutingCase rc;
  rc.name = text;
  std::string dist = text;
  auto const slash = text.find('/');
  if (slash != std::string::npos) {
    dist = text.substr(0, slash);
    std::string const ep = text.substr(slash + 1);
    if (ep.size() < 3 || ep.compare(0, 2, "ep") != 0)
      throw InputError(flag + ": '" + text + "': expected DIST or DIST/epN (e.g. uniform/ep2)");
    auto const n = cli::parse_int_list(flag, ep.substr(2), 1, kExperts);
    if (n.size() != 1 || kExperts % n[0] != 0)
      throw InputError(flag + ": '" + text + "': N of epN must divide " + std::to_string(kExperts));
    rc.ep = n[0];
  }
  if (!parse_distribution(dist, &rc.distribution))
    throw InputError(flag + ": '" + dist +
                     "' is not a routing distribution (uniform, zipf, hot, round_robin, scores)");
  return rc;
}

std::vector<RoutingCase> parse_routing_cases(std::string const& flag, std::string const& text) {
  std::vector<RoutingCase> out;
  for (auto const& n : split_names(flag, text))
    out.push_back(parse_routing_case(flag, n));
  return out;
}

finalize::FinalizeParams HostCase::params(void* out, float* out_scales) const {
  return finalize_params(r, layout, inputs, shape.weights, out, out_scales);
}

std::int64_t HostCase::min_bytes() const {
  std::int64_t const pairs = shape.tokens * shape.top_k;
  std::int64_t const wbytes = shape.weights == finalize::WeightType::kNone   ? 0
                              : shape.weights == finalize::WeightType::kBf16 ? 2
                                                                             : 4;
  return valid_rows * shape.hidden * 2 + pairs * (4 + wbytes) + shape.tokens * shape.hidden * 2;
}

HostCase make_case(Shape const& shape, std::int64_t hidden_padded, RoutingCase const& routing,
                   std::uint64_t seed, RowPool& pool, bool with_scales) {
  if (pool.hidden() != shape.hidden || pool.hidden_padded() != hidden_padded)
    throw std::logic_error("make_case: row pool of another hidden size");
  HostCase c;
  c.shape = shape;
  c.hidden_padded = hidden_padded;
  c.routing = routing;
  RoutingSpec spec;
  spec.num_tokens = shape.tokens;
  spec.num_experts = kExperts;
  spec.top_k = shape.top_k;
  spec.distribution = routing.distribution;
  spec.seed = seed;
  c.r = generate_routing(spec);
  std::int64_t const local = kExperts / routing.ep;
  c.layout = build_layout(c.r, kTile, (kExperts - local) / 2, local);

  c.inputs = make_finalize_inputs(c.layout, pool, seed, with_scales);
  for (auto const t : c.layout.permuted_to_token)
    c.valid_rows += t >= 0;
  auto const pairs = static_cast<double>(c.layout.expanded_to_permuted.size());
  c.dropped = pairs > 0 ? 1.0 - static_cast<double>(c.valid_rows) / pairs : 0.0;
  return c;
}

bool routing_available(RoutingCase const& rc, std::string* why) {
  RoutingSpec spec;
  spec.num_tokens = 2;
  spec.num_experts = kExperts;
  spec.top_k = 2;
  spec.distribution = rc.distribution;
  try {
    (void)generate_routing(spec);
    return true;
  } catch (InputError const& e) {
    if (why)
      *why = e.what();
    return false;
  }
}

std::uint64_t case_seed(std::uint64_t run_seed, std::string const& key) {
  std::uint64_t h = 0xcbf29ce484222325ULL; // FNV-1a of the key
  for (unsigned char ch : key)
    h = (h ^ ch) * 0x100000001b3ULL;
  return Rng::mix(run_seed, h);
}

} // namespace moefin::fin
