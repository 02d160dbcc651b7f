#include "core/stats.hpp"

#include "core/rng.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace moefin::stats {

namespace {

void require_valid(std::vector<double> const& values, char const* what) {
  if (values.empty())
    throw std::invalid_argument(std::string(what) + ": empty sample");
  for (double v : values)
    if (std::isnan(v))
      throw std::invalid_argument(std::string(what) + ": NaN in sample");
}

// Quantile of an already sorted sample.
double sorted_quantile(std::vector<double> const& sorted, double q) {
  double const pos = q * static_cast<double>(sorted.size() - 1);
  auto const lo = static_cast<std::size_t>(std::floor(pos));
  auto const hi = std::min(lo + 1, sorted.size() - 1);
  double const frac = pos - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

} // namespace

double quantile(std::vector<double> values, double q) {
  require_valid(values, "quantile");
  if (!(q >= 0.0 && q <= 1.0))
    throw std::invalid_argument("quantile: q must be in [0, 1], got " + std::to_string(q));
  std::sort(values.begin(), values.end());
  return sorted_quantile(values, q);
}

double median(std::vector<double> values) {
  return quantile(std::move(values), 0.5);
}

Summary summarize(std::vector<double> const& values) {
  require_valid(values, "summarize");
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  Summary s;
  s.n = sorted.size();
  s.min = sorted.front();
  s.max = sorted.back();
  s.q1 = sorted_quantile(sorted, 0.25);
  s.median = sorted_quantile(sorted, 0.5);
  s.q3 = sorted_quantile(sorted, 0.75);
  s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(s.n);
  return s;
}

RatioEstimate paired_ratio(std::vector<double> const& numerator,
                           std::vector<double> const& denominator, double confidence, int resamples,
                           std::uint64_t seed) {
  require_valid(numerator, "paired_ratio numerator");
  require_valid(denominator, "paired_ratio denominator");
  if (numerator.size() != denominator.size())
    throw std::invalid_argument("paired_ratio: series of different lengths (" +
                                std::to_string(numerator.size()) + " vs " +
                                std::to_string(denominator.size()) + ")");
  if (!(confidence > 0.0 && confidence < 1.0))
    throw std::invalid_argument("paired_ratio: confidence must be in (0, 1)");
  if (resamples < 1)
    throw std::invalid_argument("paired_ratio: resamples must be >= 1");

  std::size_t const n = numerator.size();
  std::vector<double> ratios(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!(denominator[i] > 0.0))
      throw std::invalid_argument("paired_ratio: non-positive denominator");
    ratios[i] = numerator[i] / denominator[i];
  }

  RatioEstimate est;
  est.n = n;
  est.ratio = median(ratios);

  Rng rng(seed);
  std::vector<double> medians(static_cast<std::size_t>(resamples));
  std::vector<double> draw(n);
  for (auto& m : medians) {
    for (auto& d : draw)
      d = ratios[rng.below(n)];
    m = median(draw);
  }
  std::sort(medians.begin(), medians.end());
  double const alpha = (1.0 - confidence) / 2.0;
  est.lo = sorted_quantile(medians, alpha);
  est.hi = sorted_quantile(medians, 1.0 - alpha);
  return est;
}

namespace {

/// The median of a resample of n positions into a sorted sample, as positions and a weight.
template <class Pick> Pick median_pick(Rng& rng, std::size_t n, std::vector<std::uint32_t>& pos) {
  pos.resize(n);
  for (auto& p : pos)
    p = static_cast<std::uint32_t>(rng.below(n));
  std::sort(pos.begin(), pos.end());
  double const at = 0.5 * static_cast<double>(n - 1);
  auto const lo = static_cast<std::size_t>(std::floor(at));
  auto const hi = std::min(lo + 1, n - 1);
  return Pick{pos[lo], pos[hi], at - static_cast<double>(lo)};
}

} // namespace

MedianRatioBootstrap::MedianRatioBootstrap(std::size_t n_num, std::size_t n_den, double confidence,
                                           int resamples, std::uint64_t seed)
    : n_num_(n_num), n_den_(n_den), confidence_(confidence) {
  if (n_num == 0 || n_den == 0)
    throw std::invalid_argument("MedianRatioBootstrap: empty sample");
  if (!(confidence > 0.0 && confidence < 1.0))
    throw std::invalid_argument("MedianRatioBootstrap: confidence must be in (0, 1)");
  if (resamples < 1)
    throw std::invalid_argument("MedianRatioBootstrap: resamples must be >= 1");
  Rng rng(seed);
  std::vector<std::uint32_t> pos;
  for (int r = 0; r < resamples; ++r) {
    num_.push_back(median_pick<Pick>(rng, n_num, pos));
    den_.push_back(median_pick<Pick>(rng, n_den, pos));
  }
}

RatioEstimate MedianRatioBootstrap::operator()(std::vector<double> const& numerator,
                                               std::vector<double> const& denominator) const {
  if (numerator.size() != n_num_ || denominator.size() != n_den_)
    throw std::invalid_argument("MedianRatioBootstrap: samples of " +
                                std::to_string(numerator.size()) + " and " +
                                std::to_string(denominator.size()) + " values for a plan of " +
                                std::to_string(n_num_) + " and " + std::to_string(n_den_));
  require_valid(numerator, "ratio of medians numerator");
  require_valid(denominator, "ratio of medians denominator");
  std::vector<double> a = numerator, b = denominator;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  RatioEstimate est;
  est.n = std::min(a.size(), b.size());
  double const den = sorted_quantile(b, 0.5);
  if (!(den > 0.0) || !(sorted_quantile(a, 0.5) > 0.0))
    throw std::invalid_argument("ratio of medians: non-positive median");
  est.ratio = sorted_quantile(a, 0.5) / den;
  std::vector<double> ratios(num_.size());
  for (std::size_t r = 0; r < num_.size(); ++r) {
    Pick const& p = num_[r];
    Pick const& q = den_[r];
    double const m = a[p.lo] + p.frac * (a[p.hi] - a[p.lo]);
    double const d = b[q.lo] + q.frac * (b[q.hi] - b[q.lo]);
    ratios[r] = m / d;
  }
  std::sort(ratios.begin(), ratios.end());
  double const alpha = (1.0 - confidence_) / 2.0;
  est.lo = sorted_quantile(ratios, alpha);
  est.hi = sorted_quantile(ratios, 1.0 - alpha);
  return est;
}

} // namespace moefin::stats
