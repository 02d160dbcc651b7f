#include "kernels/common/pdl_knobs.hpp"

#include <cstring>

namespace moefin {

namespace {

constexpr Trigger kAllTriggers[] = {Trigger::kDefault, Trigger::kExit, Trigger::kEntry,
                                    Trigger::kAfterWait, Trigger::kAfterWrites};

} // namespace

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
  if (s == nullptr)
    return false;
  for (Trigger t : kAllTriggers)
    if (std::strcmp(s, trigger_name(t)) == 0) {
      if (out)
        *out = t;
      return true;
    }
  return false;
}

} // namespace moefin
