#include "core/layout.hpp"

#include "core/cli.hpp"

#include <algorithm>
#include <array>

namespace moefin {

void validate_routing(Routing const& r) {
  cli::check_range<std::int64_t>("--tokens", r.num_tokens, 1, 1 << 20);
  cli::check_range<std::int64_t>("--experts", r.num_experts, 1, 1 << 16);
  cli::check_range<std::int64_t>("--top-k", r.top_k, 1, std::min<std::int64_t>(64, r.num_experts));
  auto const n = static_cast<std::size_t>(r.num_tokens * r.top_k);
  if (r.expert_ids.size() != n || r.weights.size() != n || r.weights_bf16.size() != n)
    throw InputError("routing: expert_ids/weights/weights_bf16 hold " +
                     std::to_string(r.expert_ids.size()) + "/" + std::to_string(r.weights.size()) +
                     "/" + std::to_string(r.weights_bf16.size()) +
                     " entries, expected T*K = " + std::to_string(n));
  std::array<std::int32_t, 64> sorted{};
  for (std::int64_t t = 0; t < r.num_tokens; ++t) {
    auto const* ids = r.expert_ids.data() + t * r.top_k;
    for (std::int64_t k = 0; k < r.top_k; ++k)
      if (ids[k] < 0 || ids[k] >= r.num_experts)
        throw InputError("routing: token " + std::to_string(t) + " choice " + std::to_string(k) +
                         " names expert " + std::to_string(ids[k]) + ", outside [0, " +
                         std::to_string(r.num_experts - 1) + "]");
    std::copy(ids, ids + r.top_k, sorted.begin());
    std::sort(sorted.begin(), sorted.begin() + r.top_k);
    auto const dup = std::adjacent_find(sorted.begin(), sorted.begin() + r.top_k);
    if (dup != sorted.begin() + r.top_k)
      throw InputError("routing: token " + std::to_string(t) + " chooses expert " +
                       std::to_string(*dup) + " more than once");
  }
}

void check_local_range(std::int64_t begin, std::int64_t count, std::int64_t num_experts) {
  if (begin < 0 || begin > num_experts || count < 0 || count > num_experts - begin)
    throw InputError(
        "--local-experts: value " + std::to_string(begin) + ":" + std::to_string(count) +
        " out of range (BEGIN:COUNT with 0 <= BEGIN <= " + std::to_string(num_experts) +
        " and 0 <= COUNT <= " + std::to_string(num_experts) + " - BEGIN)");
}

RoutingLayout build_layout(Routing const& routing, std::int64_t tile, std::int64_t local_begin,
                           std::int64_t num_local) {
  validate_routing(routing);
  cli::check_range<std::int64_t>("--tile", tile, 1, 1 << 12);
  if (num_local < 0) {
    local_begin = 0;
    num_local = routing.num_experts;
  }
  check_local_range(local_begin, num_local, routing.num_experts);

  RoutingLayout L;
  L.num_tokens = routing.num_tokens;
  L.top_k = routing.top_k;
  L.local_expert_begin = local_begin;
  L.num_local_experts = num_local;
  L.tile = tile;
  auto const n = routing.expert_ids.size();
  auto const n_local = static_cast<std::size_t>(num_local);
  auto local_of = [&](std::size_t e) -> std::int64_t {
    std::int64_t const x = routing.expert_ids[e] - local_begin;
    return x >= 0 && x < num_local ? x : -1;
  };

  L.expert_counts.assign(n_local, 0);
  for (std::size_t e = 0; e < n; ++e)
    if (std::int64_t const x = local_of(e); x >= 0)
      ++L.expert_counts[static_cast<std::size_t>(x)];
  L.expert_offsets.assign(n_local + 1, 0);
  for (std::size_t x = 0; x < n_local; ++x) {
    std::int64_t const c = L.expert_counts[x];
    L.expert_offsets[x + 1] =
        static_cast<std::int32_t>(L.expert_offsets[x] + (c + tile - 1) / tile * tile);
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
    std::int64_t const x = local_of(e);
    if (x < 0)
      continue;
    std::int32_t const row = fill[static_cast<std::size_t>(x)]++;
    L.expanded_to_permuted[e] = row;
    L.permuted_to_token[static_cast<std::size_t>(row)] =
        static_cast<std::int32_t>(e / static_cast<std::size_t>(routing.top_k));
    L.permuted_to_expanded[static_cast<std::size_t>(row)] = static_cast<std::int32_t>(e);
  }

  L.cta_to_expert.assign(rows / static_cast<std::size_t>(tile), -1);
  for (std::size_t x = 0; x < n_local; ++x)
    for (std::int64_t r = L.expert_offsets[x]; r < L.expert_offsets[x + 1]; r += tile)
      L.cta_to_expert[static_cast<std::size_t>(r / tile)] = static_cast<std::int32_t>(x);
  return L;
}

std::int64_t max_padded_rows(std::int64_t num_tokens, std::int64_t top_k, std::int64_t num_local,
                             std::int64_t tile) {
  std::int64_t const entries = num_tokens * top_k;
  return entries + std::min(std::max<std::int64_t>(num_local, 0), entries) * (tile - 1);
}

std::int64_t dropped_entries(RoutingLayout const& layout) {
  return std::count(layout.expanded_to_permuted.begin(), layout.expanded_to_permuted.end(), -1);
}

} // namespace moefin
