// The probe's chains, host-side: the pdl-probe command runs them and the agreement test maps each
// measured row to its verifier chain.

#include "kernels/common/pdl_probe.hpp"

namespace moefin::probe {

std::vector<ProbeChain> design_chains() {
  return {{"producer -> consumer", false, {}, "h200_direct"},
          {"producer (trigger at end) -> consumer", true, {}, "h200_direct_trigger_at_end"},
          {"producer -> middle (trigger before its wait) -> consumer",
           false,
           {true},
           "h200_middle_trigger_before_wait"},
          {"producer -> middle (trigger after its wait) -> consumer",
           false,
           {false},
           "h200_middle_trigger_after_wait"},
          {"producer -> m1 (after) -> m2 (before) -> consumer",
           false,
           {false, true},
           "h200_m1_after_m2_before"},
          {"producer -> m1 (before) -> m2 (after) -> consumer",
           false,
           {true, false},
           "h200_m1_before_m2_after"},
          {"producer -> m1 (before) -> m2 (before) -> consumer",
           false,
           {true, true},
           "h200_m1_before_m2_before"}};
}

} // namespace moefin::probe
