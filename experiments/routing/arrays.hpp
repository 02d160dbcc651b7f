#pragma once
// The arrays of one routing (docs/design/computation.md) with params pointing at them: on the host
// (for the Kokkos reference) and, in CUDA builds, on the device, allocated poisoned. Shared by the
// routing sweep and the tests.

#include "core/ops/routing_params.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#ifdef MOEFIN_HAVE_CUDA
#include "experiments/harness/device_buffer.hpp"
#endif

namespace moefin::routing_arrays {

/// Rows of the permuted arrays for `routed` (token, expert) pairs over `local` experts: every
/// group padded to `tile` rows, a multiple of `tile`.
inline std::int64_t capacity(std::int64_t routed, std::int64_t local, std::int64_t tile) {
  std::int64_t const bound = routed + std::min(routed, local) * (tile - 1);
  return (bound + tile - 1) / tile * tile;
}

inline routing::RoutingParams shape(std::int64_t T, std::int64_t E, std::int64_t K,
                                    std::int64_t tile, std::int64_t begin, std::int64_t local) {
  routing::RoutingParams p;
  p.num_tokens = T;
  p.num_experts = E;
  p.top_k = K;
  p.local_expert_begin = begin;
  p.num_local_experts = local;
  p.tile = tile;
  p.max_padded_rows = capacity(T * K, local, tile);
  return p;
}

/// Host arrays of one routing's outputs. `weights` holds bf16 or fp32 per weight_type (its
/// first T K entries are the bf16 values).
struct HostRouting {
  std::vector<std::int32_t> ids, e2p, p2t, p2e, counts, offsets, cta, total;
  std::vector<std::uint16_t> weights;
  routing::RoutingParams p;
  HostRouting(routing::RoutingParams const& s, float const* scores)
      : ids(static_cast<std::size_t>(s.num_tokens * s.top_k)), e2p(ids.size()),
        p2t(static_cast<std::size_t>(s.max_padded_rows)), p2e(p2t.size()),
        counts(static_cast<std::size_t>(s.num_local_experts)), offsets(counts.size() + 1),
        cta(static_cast<std::size_t>(s.max_padded_rows / s.tile)), total(1),
        weights(2 * ids.size()), p(s) {
    p.scores = scores;
    p.expert_ids = ids.data();
    p.expert_weights = weights.data();
    p.expanded_to_permuted = e2p.data();
    p.permuted_to_token = p2t.data();
    p.permuted_to_expanded = p2e.data();
    p.expert_counts = counts.data();
    p.expert_offsets = offsets.data();
    p.cta_to_expert = cta.data();
    p.total_padded_rows = total.data();
  }
  /// The int32 arrays in the order of DeviceRouting::arrays().
  std::vector<std::vector<std::int32_t>> arrays() const {
    return {ids, e2p, p2t, p2e, counts, offsets, cta, total};
  }
};

#ifdef MOEFIN_HAVE_CUDA
/// The same arrays on the device (scores not included: set p.scores).
struct DeviceRouting {
  dev::Buffer ids, weights, e2p, p2t, p2e, counts, offsets, cta, total;
  routing::RoutingParams p;
  explicit DeviceRouting(routing::RoutingParams const& s)
      : ids(static_cast<std::size_t>(s.num_tokens * s.top_k) * 4), weights(ids.bytes()),
        e2p(ids.bytes()), p2t(static_cast<std::size_t>(s.max_padded_rows) * 4), p2e(p2t.bytes()),
        counts(static_cast<std::size_t>(s.num_local_experts) * 4), offsets(counts.bytes() + 4),
        cta(static_cast<std::size_t>(s.max_padded_rows / s.tile) * 4), total(4), p(s) {
    p.expert_ids = ids.get<std::int32_t>();
    p.expert_weights = weights.get();
    p.expanded_to_permuted = e2p.get<std::int32_t>();
    p.permuted_to_token = p2t.get<std::int32_t>();
    p.permuted_to_expanded = p2e.get<std::int32_t>();
    p.expert_counts = counts.get<std::int32_t>();
    p.expert_offsets = offsets.get<std::int32_t>();
    p.cta_to_expert = cta.get<std::int32_t>();
    p.total_padded_rows = total.get<std::int32_t>();
  }
  /// 0xff bytes in every array (-1 in the maps, NaN in the weights), ordered on `s`.
  void poison(cudaStream_t s) const {
    for (dev::Buffer const* b : {&ids, &weights, &e2p, &p2t, &p2e, &counts, &offsets, &cta, &total})
      b->fill(0xff, s);
  }
  /// ids, e2p, p2t, p2e, counts, offsets, cta, total.
  std::vector<std::vector<std::int32_t>> arrays(cudaStream_t s = nullptr) const {
    std::vector<std::vector<std::int32_t>> out;
    for (dev::Buffer const* b : {&ids, &e2p, &p2t, &p2e, &counts, &offsets, &cta, &total})
      out.push_back(b->download<std::int32_t>(s));
    return out;
  }
  /// The weights' bytes (bf16 or fp32 per weight_type).
  std::vector<std::uint8_t> weight_bytes(cudaStream_t s = nullptr) const {
    return weights.download<std::uint8_t>(s);
  }
};
#endif

} // namespace moefin::routing_arrays
