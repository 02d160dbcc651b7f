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

/// Every implementation, in table order: "block" (routing::run, the single-CTA kernel) first,
/// then "fast", then "released" where the build has the released kernels.
std::vector<RoutingImpl> const& routing_impls();

/// The name of the released routing block kernel's entry; the sweep's ratio_vs_released is the
/// paired ratio of its time over each implementation's.
inline constexpr char const* kReleasedRouting = "released";
/// That entry (its `supports` is false in a build without the released kernels).
RoutingImpl released_routing_impl();
/// The line the sweep prints when the build has no released kernels (empty when it has them).
std::string released_routing_note();
/// The named ones of a comma-separated list ("all": every one); throws InputError naming `flag`.
std::vector<RoutingImpl> select_routing_impls(std::string const& list, std::string const& flag);

} // namespace moefin::routing_bench
