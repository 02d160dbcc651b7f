#include "experiments/routing/impls.hpp"

#include "core/chain/presets.hpp"
#include "core/chain/shape.hpp"
#include "core/ops/errors.hpp"
#include "kernels/routing/fast_routing.hpp"
#include "kernels/routing/routing.hpp"

namespace moefin::routing_bench {

std::vector<RoutingImpl> const& routing_impls() {
  static std::vector<RoutingImpl> const list = [] {
    std::vector<RoutingImpl> l;
    RoutingImpl block;
    block.name = "block";
    block.description = "routing::run: one CTA of 256 threads, warps take tokens in turn, one "
                        "CTA-wide pass builds the layout (T <= 128)";
    block.supports = [](routing::RoutingParams const& p) {
      return p.num_tokens <= routing::Policy::kMaxTokens;
    };
    block.threads = [](routing::RoutingParams const&) { return routing::Policy::kBlockThreads; };
    RoutingImpl fast;
    fast.name = "fast";
    fast.description = "routing::run_fast: one warp per token (redux-sync top-K), the layout by "
                       "every thread (bitmask popcounts, block-wide scan) (T <= 32)";
    fast.supports = [](routing::RoutingParams const& p) { return routing::fast_supports(p); };
    fast.threads = [](routing::RoutingParams const& p) { return routing::fast_threads(p); };
#ifdef MOEFIN_HAVE_CUDA
    block.launch = [](routing::RoutingParams const& p, PdlKnobs const& k, CUstream_st* s) {
      routing::run(p, k, s);
    };
    fast.launch = [](routing::RoutingParams const& p, PdlKnobs const& k, CUstream_st* s) {
      routing::run_fast(p, k, s);
    };
#endif
    l.push_back(block);
    l.push_back(fast);
    return l;
  }();
  return list;
}

std::vector<RoutingImpl> select_routing_impls(std::string const& list, std::string const& flag) {
  if (list == "all")
    return routing_impls();
  std::vector<RoutingImpl> out;
  for (std::string const& name : chain::split_list(list, flag)) {
    bool found = false;
    for (RoutingImpl const& r : routing_impls())
      if (r.name == name) {
        out.push_back(r);
        found = true;
      }
    if (!found) {
      std::string known;
      for (RoutingImpl const& r : routing_impls())
        known += (known.empty() ? "" : ", ") + r.name;
      throw InputError(flag + ": unknown routing implementation '" + name + "' (known: " + known +
                       ")");
    }
  }
  return out;
}

} // namespace moefin::routing_bench
