#pragma once
// Timing of CUDA graphs for the sweeps (CUDA builds only): interleaved rounds and the copy
// bandwidth every bandwidth figure is compared with.

#include "core/store/h5store.hpp"
#include "core/stats.hpp"
#include "experiments/harness/device_buffer.hpp"
#include "experiments/harness/timing_rounds.hpp"

#include <cstddef>
#include <vector>

namespace moefin::dev {

/// Graphs timed in interleaved rounds (harness/timing_rounds.hpp) after a warm-up replay of
/// each. Returns milliseconds [graph][round].
inline std::vector<std::vector<double>> time_rounds(std::vector<Graph> const& graphs, int rounds,
                                                    Stream const& s, Event const& a,
                                                    Event const& b) {
  for (auto const& g : graphs)
    g.launch(s.get());
  s.sync();
  return bench::interleaved_rounds(graphs.size(), rounds, [&](std::size_t g) {
    return static_cast<double>(graphs[g].time_ms(s.get(), a, b));
  });
}

inline std::vector<double> per_launch_us(std::vector<double> const& ms, int launches) {
  std::vector<double> us;
  for (double m : ms)
    us.push_back(m * 1e3 / launches);
  return us;
}

/// The five time columns of a timing row (median_us, min_us, q1_us, q3_us, max_us).
inline h5::Row& set_times(h5::Row& row, stats::Summary const& s) {
  return row.set("median_us", s.median)
      .set("min_us", s.min)
      .set("q1_us", s.q1)
      .set("q3_us", s.q3)
      .set("max_us", s.max);
}

/// Device-to-device cudaMemcpy of `bytes` (`copies` per graph replay, `rounds` rounds).
struct CopyBandwidth {
  std::size_t bytes = 0;
  int copies = 0, rounds = 0;
  std::vector<double> us; // per copy, one per round
  double gbps = 0;        // bytes read plus written over the median copy time
};

inline CopyBandwidth measure_copy_bandwidth(int rounds, Stream const& s, Event const& a,
                                            Event const& b,
                                            std::size_t bytes = std::size_t(256) << 20,
                                            int copies = 8) {
  Buffer src(bytes), dst(bytes);
  src.fill(0x3c, s.get());
  s.sync();
  std::vector<Graph> g;
  g.emplace_back(s.get(), [&] {
    for (int i = 0; i < copies; ++i)
      MOEFIN_CUDA_CHECK(
          cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s.get()));
  });
  CopyBandwidth c;
  c.bytes = bytes;
  c.copies = copies;
  c.rounds = rounds;
  c.us = per_launch_us(time_rounds(g, rounds, s, a, b)[0], copies);
  c.gbps = 2.0 * static_cast<double>(bytes) / (stats::median(c.us) * 1e3);
  return c;
}

} // namespace moefin::dev
