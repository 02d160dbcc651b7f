#include "reference/routing.hpp"

#include "core/bf16.hpp"
#include "core/ops/errors.hpp"
#include "core/routing.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace moefin::reference {

namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;
using routing::RoutingParams;

void require(bool ok, std::string const& what) {
  if (!ok)
    throw InputError("routing params: " + what);
}

void check(RoutingParams const& p) {
  require(p.num_tokens >= 1, "num_tokens " + std::to_string(p.num_tokens) + " < 1");
  require(p.num_experts >= 1 && p.num_experts <= (1 << 16),
          "num_experts " + std::to_string(p.num_experts) + " outside [1, 65536]");
  require(p.top_k >= 1 && p.top_k <= std::min<std::int64_t>(64, p.num_experts),
          "top_k " + std::to_string(p.top_k) + " outside [1, min(64, num_experts)]");
  require(p.local_expert_begin >= 0 && p.num_local_experts >= 0 &&
              p.local_expert_begin + p.num_local_experts <= p.num_experts,
          "local experts [" + std::to_string(p.local_expert_begin) + ", +" +
              std::to_string(p.num_local_experts) + ") outside [0, num_experts)");
  require(p.tile >= 1, "tile " + std::to_string(p.tile) + " < 1");
  require(p.max_padded_rows >= 0, "max_padded_rows " + std::to_string(p.max_padded_rows) + " < 0");
  // Arrays of zero length may be null (no local expert, or no capacity).
  require(p.scores && p.expert_ids && p.expanded_to_permuted && p.expert_offsets &&
              p.total_padded_rows && (p.expert_counts || p.num_local_experts == 0) &&
              ((p.permuted_to_token && p.permuted_to_expanded) || p.max_padded_rows == 0) &&
              (p.cta_to_expert || p.max_padded_rows / p.tile == 0),
          "an input or output pointer is null");
  require(p.weight_type == finalize::WeightType::kNone || p.expert_weights,
          "expert_weights is null but weight_type is not none");
  for (std::int64_t i = 0; i < p.num_tokens * p.num_experts; ++i)
    require(std::isfinite(p.scores[i]), "scores[" + std::to_string(i / p.num_experts) + ", " +
                                            std::to_string(i % p.num_experts) + "] is not finite");
}

} // namespace

void routing(RoutingParams const& p) {
  check(p);
  std::int64_t const T = p.num_tokens, E = p.num_experts, K = p.top_k;
  std::int64_t const n_local = p.num_local_experts, begin = p.local_expert_begin;

  Kokkos::parallel_for("ref::routing::topk", Kokkos::RangePolicy<Exec>(0, T), [=](std::int64_t t) {
    float w[64];
    route_token(p.scores + t * E, E, K, p.method, p.renormalize, p.expert_ids + t * K, w);
    for (std::int64_t k = 0; k < K; ++k) {
      if (p.weight_type == finalize::WeightType::kBf16)
        static_cast<bf16_bits*>(p.expert_weights)[t * K + k] = float_to_bf16(w[k]);
      else if (p.weight_type == finalize::WeightType::kFp32)
        static_cast<float*>(p.expert_weights)[t * K + k] = w[k];
    }
  });

  Kokkos::parallel_for("ref::routing::clear_counts", Kokkos::RangePolicy<Exec>(0, n_local),
                       [=](std::int64_t x) { p.expert_counts[x] = 0; });
  Kokkos::parallel_for("ref::routing::histogram", Kokkos::RangePolicy<Exec>(0, T * K),
                       [=](std::int64_t e) {
                         std::int64_t const x = p.expert_ids[e] - begin;
                         if (x >= 0 && x < n_local)
                           Kokkos::atomic_increment(&p.expert_counts[x]);
                       });

  std::int64_t total = 0;
  Kokkos::parallel_scan(
      "ref::routing::offsets", Kokkos::RangePolicy<Exec>(0, n_local),
      [=](std::int64_t x, std::int64_t& running, bool final) {
        if (final)
          p.expert_offsets[x] = static_cast<std::int32_t>(running);
        running += (p.expert_counts[x] + p.tile - 1) / p.tile * p.tile;
      },
      total);
  Kokkos::fence();
  p.expert_offsets[n_local] = static_cast<std::int32_t>(total);
  require(total <= p.max_padded_rows, "the layout needs " + std::to_string(total) +
                                          " rows, max_padded_rows is " +
                                          std::to_string(p.max_padded_rows));

  Kokkos::parallel_for("ref::routing::clear_rows", Kokkos::RangePolicy<Exec>(0, p.max_padded_rows),
                       [=](std::int64_t r) {
                         p.permuted_to_token[r] = -1;
                         p.permuted_to_expanded[r] = -1;
                       });

  // A row's place inside its expert's group is the number of earlier expanded indices routed to
  // the same expert: a sequential dependency along the expanded order, so one pass does it.
  Kokkos::parallel_for("ref::routing::scatter", Kokkos::RangePolicy<Exec>(0, 1), [=](std::int64_t) {
    std::vector<std::int32_t> cursor(p.expert_offsets, p.expert_offsets + n_local);
    for (std::int64_t e = 0; e < T * K; ++e) {
      std::int64_t const x = p.expert_ids[e] - begin;
      if (x < 0 || x >= n_local) {
        p.expanded_to_permuted[e] = -1;
        continue;
      }
      std::int32_t const row = cursor[static_cast<std::size_t>(x)]++;
      p.expanded_to_permuted[e] = row;
      p.permuted_to_token[row] = static_cast<std::int32_t>(e / K);
      p.permuted_to_expanded[row] = static_cast<std::int32_t>(e);
    }
  });

  // Tile i belongs to the last expert whose group starts at or before its first row (empty
  // groups share their start with the next one, so "last" skips them).
  std::int64_t const tiles = total / p.tile;
  Kokkos::parallel_for(
      "ref::routing::cta_to_expert", Kokkos::RangePolicy<Exec>(0, p.max_padded_rows / p.tile),
      [=](std::int64_t i) {
        if (i >= tiles) {
          p.cta_to_expert[i] = -1;
          return;
        }
        std::int32_t const* first = p.expert_offsets;
        std::int32_t const* it =
            std::upper_bound(first, first + n_local + 1, static_cast<std::int32_t>(i * p.tile));
        p.cta_to_expert[i] = static_cast<std::int32_t>(it - p.expert_offsets - 1);
      });
  *p.total_padded_rows = static_cast<std::int32_t>(total);
  Kokkos::fence();
}

} // namespace moefin::reference
