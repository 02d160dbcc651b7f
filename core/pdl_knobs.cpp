// Names of the PDL trigger placements (kernels/common/pdl_knobs.hpp), for the command line and
// the result tables.

#include "kernels/common/pdl_knobs.hpp"

#include <cstring>

namespace moefin {

namespace {
constexpr Trigger kAllTriggers[] = {Trigger::kDefault, Trigger::kExit, Trigger::kEntry,
                                    Trigger::kAfterWait, Trigger::kAfterWrites};
}

char const* trigger_name(Trigger t) {
  switch (t) {
  case Trigger::kDefault:
    return "default";
  case Trigger::kExit:
    return "exit";
  case Trigger::kEntry:
    return "entry";
  case Trigger::kAfterWait:
    return "after_wait";
  case Trigger::kAfterWrites:
    return "after_writes";
  }
  return "?";
}

bool parse_trigger(char const* s, Trigger* out) {
  for (Trigger t : kAllTriggers)
    if (std::strcmp(s, trigger_name(t)) == 0) {
      *out = t;
      return true;
    }
  return false;
}

} // namespace moefin
