// small_batch_v2's launches and registry entries. The plan's experts per thread and knobs
// become template parameters here. Instantiations (24): lean {entry, exit} x kL {1, 2, 4, 8};
// the ablations, lean at entry, one ingredient off x kL (12); instrumented x kL (4). The weight
// type is read at run time in every one of them: it only decides the metadata reads, which
// happen before the wait. In host-only builds this file compiles as C++: the entries are
// registered with a null launch function and the kernels are left out.

#include "kernels/finalize/finalize.hpp"
#include "kernels/finalize/small_batch_v2.hpp"

#if defined(__CUDACC__)
#include "kernels/common/cuda_check.hpp"
#include "kernels/common/pdl.cuh"
#include "kernels/common/static_switch.hpp"
#include "kernels/finalize/small_batch_v2_kernels.cuh"
#endif

namespace moefin::finalize {

namespace {

#if defined(__CUDACC__)
int log2_of(int x) {
  int l = 0;
  while ((1 << l) < x)
    ++l;
  return l;
}

int pow2_at_least(int x) {
  int p = 1;
  while (p < x)
    p *= 2;
  return p;
}

void launch_v2(FinalizeParams const& p, Options const& o, LaunchPlan const& lp, Stream stream) {
  using kernels::Lean;
  kernels::V2Args a;
  a.log2_groups = log2_of(lp.groups);
  a.per_thread = lp.loads_per_thread;
  // The table's warp-groups layout runs the fi_layout kernels (the same lane layout).
  a.ablate = v2::ablation_bits(*lp.variant) | (lp.warp_groups ? v2::kWarpGroups : 0u);
  dim3 const grid(static_cast<unsigned>(lp.grid_x), static_cast<unsigned>(lp.grid_y));
  dim3 const block(static_cast<unsigned>(lp.block_x));
  value_switch<int, 1, 2, 4, 8>(
      pow2_at_least(lp.loads_per_thread), "small_batch_v2 loads", [&](auto l) {
        constexpr int kL = decltype(l)::value;
        auto go = [&](auto kernel, auto knobs) {
          launch_kernel(kernel, grid, block, 0, stream, o.pdl.pdl, p, a, knobs);
        };
        if (!lp.lean) {
          go(kernels::finalize_small_batch_v2<kL, kernels::Knobs, 0>, kernels::knobs_of(lp, o));
          return;
        }
        using Entry = Lean<Trigger::kEntry, true>;
        using Exit = Lean<Trigger::kExit, true>;
        switch (a.ablate) {
        case 0:
          if (lp.trigger == Trigger::kExit)
            go(kernels::finalize_small_batch_v2<kL, Exit, 0>, Exit{});
          else
            go(kernels::finalize_small_batch_v2<kL, Entry, 0>, Entry{});
          return;
        case v2::kShuffle:
          go(kernels::finalize_small_batch_v2<kL, Entry, v2::kShuffle>, Entry{});
          return;
        case v2::kBroadcast:
          go(kernels::finalize_small_batch_v2<kL, Entry, v2::kBroadcast>, Entry{});
          return;
        case v2::kAnchor:
          go(kernels::finalize_small_batch_v2<kL, Entry, v2::kAnchor>, Entry{});
          return;
        case v2::kWarpGroups:
          go(kernels::finalize_small_batch_v2<kL, Entry, v2::kWarpGroups>, Entry{});
          return;
        default:
          throw InputError("small_batch_v2: no lean kernel for ablation bits " +
                           std::to_string(a.ablate));
        }
      });
}
#endif

constexpr unsigned kCheckSweep = kListCheck | kListSweep;

FinalizeVariant entry(std::string name, Trigger trigger, int order, std::string note) {
  return variant_entry(std::move(name))
      .as(Role::kSmallBatch)
      .against("scalar")
      .triggers(trigger)
      .meta_before()
      .vectorized(64)
      .listed(kCheckSweep, order)
      .noted(std::move(note))
      .runs(v2::geometry, MOEFIN_FINALIZE_LAUNCH(launch_v2));
}

/// The ablations are checked by default and timed where asked (scripts/gpu/finalize_fast.sh).
FinalizeVariant ablation(std::string name, Trigger trigger, int order, std::string ingredient,
                         std::string note) {
  return entry(std::move(name), trigger, order, std::move(note))
      .ablates("small_batch_v2", std::move(ingredient))
      .listed(kListCheck, order);
}

// The registry entries (core/ops/finalize_variants.hpp). Geometry candidates of the policy
// measurement are not entries: small_batch_v2/c<chunks>/l<loads>[/exit] run small_batch_v2 (or
// its late-trigger ablation, small_batch_v2_fi_layout for the warp-groups layout) with
// Options::v2_chunks and v2_loads.
Registrar const kV2(entry("small_batch_v2", Trigger::kEntry, 110,
                          "moefin's small-batch kernel: measured geometry, shuffle combine, "
                          "metadata broadcast, compiler-placed addresses"));
Registrar const kV2LateTrigger(ablation("small_batch_v2_late_trigger", Trigger::kExit, 111,
                                        "early trigger",
                                        "small_batch_v2 triggering at its CTAs' exit"));
Registrar const kV2NoShuffle(ablation("small_batch_v2_no_shuffle", Trigger::kEntry, 112,
                                      "shuffle combine",
                                      "small_batch_v2 combining through shared memory"));
Registrar const kV2NoBroadcast(ablation("small_batch_v2_no_broadcast", Trigger::kEntry, 113,
                                        "metadata broadcast",
                                        "small_batch_v2, every thread reading its metadata"));
Registrar const kV2Anchor(ablation("small_batch_v2_anchor", Trigger::kEntry, 114,
                                   "compiler-placed addresses",
                                   "small_batch_v2 with the address anchor (addresses before the "
                                   "wait)"));
Registrar const kV2FiLayout(ablation("small_batch_v2_fi_layout", Trigger::kEntry, 116,
                                     "v2's lane layout",
                                     "small_batch_v2 in the released kernel's geometry and lane "
                                     "layout (groups in separate warps, shared-memory combine)"));
Registrar const kV2FiGeometry(ablation("small_batch_v2_fi_geometry", Trigger::kEntry, 115,
                                       "measured geometry",
                                       "small_batch_v2 in the released kernel's geometry"));

} // namespace

} // namespace moefin::finalize
