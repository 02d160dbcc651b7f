#pragma once
// A small, portable, seeded generator. std:: distributions differ between standard libraries, so
// every random quantity moefin draws goes through this, and a seed names the same data everywhere
// (host, device machine, CI).

#include <cstdint>

namespace moefin {

class Rng {
public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  /// splitmix64: full-period 64-bit generator, good enough for test data and bootstraps.
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  /// Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; bias below 2^-32 for n < 2^32).
  std::uint64_t below(std::uint64_t n) {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

  /// Uniform double in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// Uniform double in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

  /// Derives an independent stream, e.g. one per token or per iteration.
  static std::uint64_t mix(std::uint64_t seed, std::uint64_t stream) {
    Rng r(seed ^ (stream * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL));
    return r.next();
  }

private:
  std::uint64_t state_;
};

} // namespace moefin
