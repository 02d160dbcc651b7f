#pragma once
// --max-minutes: a long run stops cleanly between configurations (its file complete up to the
// last row) when the next one would likely end past the limit, so a --resume call continues.

#include <chrono>

namespace moefin {

class RunLimit {
public:
  /// minutes <= 0: no limit.
  explicit RunLimit(double minutes) : limit_s_(minutes * 60.0), start_(Clock::now()) {}

  double elapsed_s() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  /// True when a configuration expected to take `next_s` seconds still fits (with a margin of
  /// half its estimate, since configurations differ in size).
  bool allows(double next_s) const {
    return limit_s_ <= 0 || elapsed_s() + 1.5 * next_s <= limit_s_;
  }

  bool limited() const { return limit_s_ > 0; }

private:
  using Clock = std::chrono::steady_clock;
  double limit_s_;
  Clock::time_point start_;
};

} // namespace moefin
