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

/// Ratio of the medians of two samples measured in different runs (nothing to pair them by),
/// median(numerator) / median(denominator), with a percentile bootstrap interval that resamples
/// each sample on its own. One plan serves every pair of the same sizes, so that comparing two
/// files of thousands of rows draws the resamples once: resample r draws the numerator's
/// positions (Rng::below, `n_num` draws), then the denominator's, both into the *sorted*
/// samples; sorted positions make the resample's median (type 7, as `median`) a lookup. The
/// interval is the type-7 quantile of the sorted resampled ratios at (1 -+ confidence) / 2.
/// analysis/compare.py draws the same positions, so both give the same interval.
class MedianRatioBootstrap {
public:
  MedianRatioBootstrap(std::size_t n_num, std::size_t n_den, double confidence = 0.95,
                       int resamples = 2000, std::uint64_t seed = 0x5eed);
  /// Throws std::invalid_argument on samples of other sizes, NaN or a non-positive median.
  RatioEstimate operator()(std::vector<double> const& numerator,
                           std::vector<double> const& denominator) const;

private:
  struct Pick {
    std::uint32_t lo, hi; // positions into the sorted sample
    double frac;          // median = x[lo] + frac * (x[hi] - x[lo])
  };
  std::size_t n_num_, n_den_;
  double confidence_;
  std::vector<Pick> num_, den_; // one per resample
};

} // namespace moefin::stats
