#pragma once
// Summary statistics shared by every experiment, so that all tables are computed one way.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace moefin::stats {

/// Linear-interpolation quantile (R type 7, numpy's default) of a non-empty sample, q in [0, 1].
double quantile(std::vector<double> values, double q);
double median(std::vector<double> values);

struct Summary {
  std::size_t n = 0;
  double min = 0, q1 = 0, median = 0, q3 = 0, max = 0, mean = 0;
};

/// Throws std::invalid_argument on an empty sample or a NaN in it.
Summary summarize(std::vector<double> const& values);

struct RatioEstimate {
  double ratio = 0; // median over rounds of numerator[i] / denominator[i]
  double lo = 0;    // bootstrap confidence interval of that median
  double hi = 0;
  std::size_t n = 0;
};

/// Paired ratio of two series measured in interleaved rounds (round i of both series ran
/// back-to-back, so slow drifts of the clock cancel in numerator[i] / denominator[i]).
/// The interval resamples rounds with replacement (percentile bootstrap, `resamples` draws,
/// deterministic for a given seed). For a speedup pass the baseline as numerator.
RatioEstimate paired_ratio(std::vector<double> const& numerator,
                           std::vector<double> const& denominator, double confidence = 0.95,
                           int resamples = 2000, std::uint64_t seed = 0x5eed);

} // namespace moefin::stats
