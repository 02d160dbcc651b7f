#include "experiments/routing/impls.hpp"

#include "core/chain/presets.hpp"
#include "core/chain/released_kernels.hpp"
#include "core/chain/shape.hpp"
#include "core/ops/errors.hpp"
#include "kernels/routing/fast_routing.hpp"
#include "kernels/routing/routing.hpp"

#include <algorithm>
#include <type_traits>

#ifdef MOEFIN_HAVE_CUDA
#include "experiments/harness/device_buffer.hpp"

#include <memory>
#endif

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
    if (chain::released_kernels() != nullptr)
      l.push_back(released_routing_impl());
    return l;
  }();
  return list;
}

RoutingImpl released_routing_impl() {
  RoutingImpl r;
  r.name = kReleasedRouting;
  r.description = "the released FlashInfer routing block kernel (T <= 4; the dynamic-block one "
                  "to 16 tokens), as the released chain flavour launches it (its own layout: no "
                  "check row)";
  r.supports = [](routing::RoutingParams const& p) {
    chain::ReleasedKernels const* k = chain::released_kernels();
    if (k == nullptr)
      return false;
    // The shape alone decides: the sweep asks before it allocates, so stand in for the arrays
    // (the check reads no pointer, it refuses null ones).
    routing::RoutingParams q = p;
    static std::int32_t stand_in[1] = {};
    auto fill = [](auto*& ptr) {
      if (ptr == nullptr)
        ptr = reinterpret_cast<std::remove_reference_t<decltype(ptr)>>(stand_in);
    };
    fill(q.scores);
    fill(q.expert_weights);
    fill(q.expanded_to_permuted);
    fill(q.permuted_to_token);
    fill(q.permuted_to_expanded);
    fill(q.cta_to_expert);
    fill(q.total_padded_rows);
    try {
      k->check_routing(q);
      return true;
    } catch (InputError const&) {
      return false;
    }
  };
  r.moefin_layout = false;
#ifdef MOEFIN_HAVE_CUDA
  // Its two outputs beside moefin's arrays (per-tile row limit, tile count), grown on the call
  // the sweep makes before each capture, so a captured launch never allocates.
  auto extras = std::make_shared<std::pair<dev::Buffer, dev::Buffer>>();
  r.launch = [extras](routing::RoutingParams const& p, PdlKnobs const& knobs, CUstream_st* s) {
    chain::ReleasedKernels const* k = chain::released_kernels();
    if (k == nullptr)
      throw InputError("--impls released: this build lacks the released FlashInfer kernels");
    std::size_t const limit_bytes =
        static_cast<std::size_t>(std::max<std::int64_t>(1, p.max_padded_rows / p.tile)) * 4;
    if (extras->first.bytes() < limit_bytes)
      extras->first = dev::Buffer(limit_bytes);
    if (extras->second.bytes() < 4)
      extras->second = dev::Buffer(4);
    k->routing(p, extras->first.get<std::int32_t>(), extras->second.get<std::int32_t>(), knobs.pdl,
               s);
  };
#endif
  return r;
}

std::string released_routing_note() {
  return chain::released_kernels() != nullptr
             ? std::string()
             : "sweep routing: this build lacks the released FlashInfer kernels: no '" +
                   std::string(kReleasedRouting) + "' rows, no ratio_vs_released";
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
    if (!found && name == kReleasedRouting)
      chain::require_released_kernels(flag + " " + name);
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
