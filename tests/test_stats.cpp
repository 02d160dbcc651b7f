#define BOOST_TEST_MODULE stats
#include <boost/test/unit_test.hpp>

#include "core/rng.hpp"
#include "core/stats.hpp"

#include <cmath>
#include <stdexcept>

using namespace moefin;

BOOST_AUTO_TEST_CASE(quantiles_match_linear_interpolation) {
  // numpy.quantile([1, 2, 3, 4, 10], [0, .25, .5, .75, 1]) -> 1, 2, 3, 4, 10
  std::vector<double> v{10, 3, 1, 4, 2};
  BOOST_TEST(stats::quantile(v, 0.0) == 1.0);
  BOOST_TEST(stats::quantile(v, 0.25) == 2.0);
  BOOST_TEST(stats::median(v) == 3.0);
  BOOST_TEST(stats::quantile(v, 1.0) == 10.0);
  // numpy.quantile([1, 2, 3, 4], .25) = 1.75; median of an even count is the mean of the middle
  BOOST_TEST(stats::quantile({4, 3, 2, 1}, 0.25) == 1.75);
  BOOST_TEST(stats::median({4, 3, 2, 1}) == 2.5);
}

BOOST_AUTO_TEST_CASE(summary_holds_every_statistic) {
  auto const s = stats::summarize({5, 1, 4, 2, 3});
  BOOST_TEST(s.n == 5u);
  BOOST_TEST(s.min == 1.0);
  BOOST_TEST(s.q1 == 2.0);
  BOOST_TEST(s.median == 3.0);
  BOOST_TEST(s.q3 == 4.0);
  BOOST_TEST(s.max == 5.0);
  BOOST_TEST(s.mean == 3.0);
}

BOOST_AUTO_TEST_CASE(empty_or_nan_samples_are_rejected) {
  BOOST_CHECK_THROW(stats::summarize({}), std::invalid_argument);
  BOOST_CHECK_THROW(stats::median({1.0, std::nan("")}), std::invalid_argument);
  BOOST_CHECK_THROW(stats::quantile({1.0}, 1.5), std::invalid_argument);
  BOOST_CHECK_THROW(stats::paired_ratio({1, 2}, {1}), std::invalid_argument);
  BOOST_CHECK_THROW(stats::paired_ratio({1, 2}, {1, 0}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(paired_ratio_cancels_common_drift) {
  // Both series drift by the same factor per round; the per-round ratio is exactly 2.
  std::vector<double> base, fast;
  for (int i = 0; i < 9; ++i) {
    double const drift = 1.0 + 0.3 * i;
    base.push_back(2.0 * drift);
    fast.push_back(drift);
  }
  auto const r = stats::paired_ratio(base, fast);
  BOOST_TEST(r.ratio == 2.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(r.lo == 2.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(r.hi == 2.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(r.n == 9u);
}

BOOST_AUTO_TEST_CASE(paired_ratio_interval_covers_truth_and_is_reproducible) {
  // Noisy ratios around 1.5: the 95% interval must contain 1.5 in most of 200 trials and be
  // narrower than the spread of the raw ratios.
  int covered = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Rng rng(1000 + trial);
    std::vector<double> a, b;
    for (int i = 0; i < 31; ++i) {
      double const t = rng.uniform(1.0, 2.0);
      b.push_back(t);
      a.push_back(t * 1.5 * rng.uniform(0.9, 1.1));
    }
    auto const r = stats::paired_ratio(a, b, 0.95, 500, 7);
    BOOST_TEST(r.lo <= r.ratio);
    BOOST_TEST(r.ratio <= r.hi);
    BOOST_TEST(r.hi - r.lo < 0.2);
    covered += (r.lo <= 1.5 && 1.5 <= r.hi);
    auto const again = stats::paired_ratio(a, b, 0.95, 500, 7);
    BOOST_TEST(again.lo == r.lo);
    BOOST_TEST(again.hi == r.hi);
  }
  BOOST_TEST(covered >= 170); // nominal 190; the bootstrap of a median is a little narrow
}

BOOST_AUTO_TEST_CASE(rng_is_deterministic_and_in_range) {
  Rng a(42), b(42);
  for (int i = 0; i < 1000; ++i) {
    BOOST_TEST(a.next() == b.next());
    auto const k = a.below(7);
    b.below(7);
    BOOST_TEST(k < 7u);
    double const u = a.uniform();
    b.uniform();
    BOOST_TEST((u >= 0.0 && u < 1.0));
  }
}
