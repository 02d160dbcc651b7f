#pragma once
// The routing implementations `moefin sweep routing` times side by side, by name. A new one
// (e.g. an adapter that launches released routing kernels) is one more entry in
// experiments/routing/impls.cpp, and every sweep row and check follows.

#include "core/ops/pdl_knobs.hpp"
#include "core/ops/routing_params.hpp"

#include <functional>
#include <string>
#include <vector>

struct CUstream_st;

namespace moefin::routing_bench {

struct RoutingImpl {
  std::string name;
  std::string description;
  /// Whether it takes this routing (shape, T).
  std::function<bool(routing::RoutingParams const&)> supports;
  /// Threads of its launch, for the table (0: not known).
  std::function<int(routing::RoutingParams const&)> threads;
  /// Launches it on `p`'s buffers (CUDA builds; a no-GPU build leaves it empty).
  std::function<void(routing::RoutingParams const&, PdlKnobs const&, CUstream_st*)> launch;
  /// Writes every array of routing::RoutingParams in moefin's layout, so that the sweep checks
  /// them against the Kokkos reference (an adapter writing another layout checks its own).
  bool moefin_layout = true;
};

/// Every implementation, in table order: "block" (routing::run, the single-CTA kernel) first.
std::vector<RoutingImpl> const& routing_impls();
/// The named ones of a comma-separated list ("all": every one); throws InputError naming `flag`.
std::vector<RoutingImpl> select_routing_impls(std::string const& list, std::string const& flag);

} // namespace moefin::routing_bench
