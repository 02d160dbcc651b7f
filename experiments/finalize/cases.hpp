#pragma once
// The cases of the finalize experiments: a routing of the experiment's routing distribution, its
// permuted layout and the seeded inputs over it (core/finalize_inputs.hpp, whose rows finalize
// must not read hold NaN, so that any read outside the layout poisons the output and fails the
// check).

#include "core/finalize_inputs.hpp"
#include "core/layout.hpp"
#include "core/routing.hpp"
#include "experiments/finalize/grid.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moefin::fin {

constexpr std::int64_t kExperts = 256; // routed experts of the layer (DeepSeek-V3 size)
constexpr std::int64_t kTile = 8;      // GEMM tile rows at decode batch sizes

/// A routing distribution and how many ranks share the experts: "uniform" (every expert local),
/// "uniform/ep2" (the middle half of the experts is local, the rest dropped), "zipf/ep4", ...
struct RoutingCase {
  std::string name;
  Distribution distribution = Distribution::kUniform;
  std::int64_t ep = 1;
};
RoutingCase parse_routing_case(std::string const& flag, std::string const& text);
std::vector<RoutingCase> parse_routing_cases(std::string const& flag, std::string const& text);

using moefin::RowPool; // the rows every case of one hidden size draws from

struct HostCase {
  Shape shape;
  std::int64_t hidden_padded = 0;
  RoutingCase routing;
  Routing r;
  RoutingLayout layout;
  FinalizeInputs inputs;       // gemm_out [num_rows, hidden_padded], in_scales (deepseek_fp8)
  double dropped = 0;          // fraction of (token, expert) pairs not local
  std::int64_t valid_rows = 0; // rows finalize reads (not dropped, not padding)

  std::int64_t num_rows() const { return layout.total_padded_rows; }
  /// Host-pointer params for the reference; `out` and `out_scales` are the caller's.
  finalize::FinalizeParams params(void* out, float* out_scales = nullptr) const;
  /// The fewest bytes one launch moves: valid rows x hidden, indices, weights, output.
  std::int64_t min_bytes() const;
};

/// Builds the case; `seed` names it (same seed, same data). Scales only when `with_scales`.
HostCase make_case(Shape const& shape, std::int64_t hidden_padded, RoutingCase const& routing,
                   std::uint64_t seed, RowPool& pool, bool with_scales);

/// Whether the routing generator implements this distribution (false, with its message, when
/// it throws for a small valid spec).
bool routing_available(RoutingCase const& rc, std::string* why);

/// A seed for one configuration key, derived from the run's seed.
std::uint64_t case_seed(std::uint64_t run_seed, std::string const& key);

} // namespace moefin::fin
