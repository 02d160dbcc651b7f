#pragma once
// One progress line per finished configuration on stderr: count, elapsed time, estimate of the
// time left, and what was measured, so that long runs on a leased GPU can be watched and cut.

#include <chrono>
#include <cstdio>
#include <string>

namespace moefin {

class Progress {
public:
  Progress(std::string label, std::size_t total)
      : label_(std::move(label)), total_(total), start_(Clock::now()) {}

  /// Reports configuration `what` as done (or skipped, when resuming).
  void step(std::string const& what, bool skipped = false) {
    ++done_;
    if (skipped) {
      ++skipped_;
      return; // a resumed run skips silently; the summary counts them
    }
    double const el = elapsed();
    std::size_t const measured = done_ - skipped_;
    double const per = measured ? el / static_cast<double>(measured) : 0.0;
    double const left = per * static_cast<double>(total_ - done_);
    std::fprintf(stderr, "[%s %zu/%zu %.0fs, ~%.0fs left] %s\n", label_.c_str(), done_, total_, el,
                 left, what.c_str());
  }

  void finish() const {
    std::fprintf(stderr, "[%s] %zu configurations in %.1fs (%zu already in the file)\n",
                 label_.c_str(), done_, elapsed(), skipped_);
  }

  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  std::size_t total_;
  std::size_t done_ = 0;
  std::size_t skipped_ = 0;
  Clock::time_point start_;
};

} // namespace moefin
