// Host half of the decode routing dispatcher: what it takes and its launch size, without CUDA,
// so that the experiments' registry and unit tests need no GPU build.

#include "kernels/routing/fast_routing.hpp"

#include <algorithm>
#include <vector>

namespace moefin::routing {

bool fast_supports(RoutingParams const& p) {
  return p.num_tokens >= 1 && p.num_tokens <= FastPolicy::kMaxTokens && p.num_experts >= 1 &&
         p.num_experts <= FastPolicy::kMaxExperts && p.top_k >= 1 &&
         p.top_k <= FastPolicy::kMaxTopK;
}

int fast_threads(RoutingParams const& p) {
  // One warp per token, and one thread per local expert for the layout (up to 1024 threads):
  // with fewer, each thread's rolled loop over its experts stores serially.
  auto const layout = static_cast<int>(std::min<std::int64_t>(32, (p.num_local_experts + 31) / 32));
  return 32 * std::max({FastPolicy::kMinWarps, static_cast<int>(p.num_tokens), layout});
}

bool fast_selection_is_sorted(float const* scores, std::int64_t num_experts) {
  for (std::int64_t lane = 0; lane < 32 && lane < num_experts; ++lane) {
    std::vector<std::uint32_t> keys;
    for (std::int64_t e = lane; e < num_experts; e += 32)
      if (std::uint32_t const k = score_key(scores[e]); k != 0u)
        keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    if (std::adjacent_find(keys.begin(), keys.end()) != keys.end())
      return false;
  }
  return true;
}

int fast_scores_per_lane(std::int64_t num_experts) {
  int per = 1;
  while (per < 32 && 32 * static_cast<std::int64_t>(per) < num_experts)
    per *= 2;
  return per;
}

} // namespace moefin::routing
