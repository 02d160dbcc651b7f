#pragma once
// Interleaved timing rounds, the protocol of every timed experiment: each round measures every
// item once, starting one item later than the round before, so that slow drifts of the clocks
// and of the GPU's state spread over all items and cancel in paired ratios (stats::paired_ratio
// pairs round i of two items).

#include <cstddef>
#include <functional>
#include <vector>

namespace moefin::bench {

/// samples[item][round] of `rounds` rounds over `items` items; `measure(i)` times item i once.
/// Warm-ups are the caller's (before the first round).
inline std::vector<std::vector<double>>
interleaved_rounds(std::size_t items, int rounds,
                   std::function<double(std::size_t)> const& measure) {
  std::vector<std::vector<double>> out(items);
  for (int r = 0; r < rounds; ++r)
    for (std::size_t j = 0; j < items; ++j) {
      std::size_t const i = (j + static_cast<std::size_t>(r)) % items;
      out[i].push_back(measure(i));
    }
  return out;
}

} // namespace moefin::bench
