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

} // namespace moefin::stats
