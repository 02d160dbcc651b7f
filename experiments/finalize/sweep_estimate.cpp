#include "experiments/finalize/sweep_estimate.hpp"

#include "experiments/finalize/cases.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <utility>

namespace moefin::fin {

namespace {

// The per-launch model: floor_us + us_per_mb * MB + us_per_k * K, per kernel family and mode
// (a, b, c), fitted to the medians of h200_finalize_sweep.h5 (mode b: the finalize part, the
// producer is added separately).
struct LaunchCoef {
  double floor_us, us_per_mb, us_per_k;
};
struct Family {
  char const* name;
  LaunchCoef mode[3];
};
constexpr Family kFamilies[] = {
    {"scalar", {{1.75, 0.40, 0.053}, {2.07, 0.50, 0.061}, {1.98, 0.40, 0.053}}},
    {"vecload", {{1.87, 0.07, 0.218}, {2.15, 0.23, 0.248}, {2.12, 0.07, 0.219}}},
    {"small_batch_nosplit", {{1.01, 0.28, 0.082}, {1.97, 0.17, 0.108}, {1.94, 0.07, 0.093}}},
    // small_batch and its other two ablations
    {"small_batch", {{1.14, 0.21, 0.011}, {1.98, 0.33, 0.009}, {1.93, 0.21, 0.010}}},
};

// The producer of mode b copies the GEMM output onto itself (read + write) with a full grid.
constexpr double kProducerFloorUs = 2.0;
constexpr double kProducerBytesPerUs = 3.0e6; // 3 TB/s
// Host side, calibrated so that the full grid takes what the H200 run took (86 s): building and
// copying one shape's inputs, and capturing + instantiating a graph per node.
constexpr double kShapeSetupS = 2e-3;
constexpr double kHostBytesPerS = 2e9;
constexpr double kGraphS = 0.2e-3;
constexpr double kGraphNodeS = 4.3e-6;
// Device set-up, the copy bandwidth (8 copies of 256 MiB) and the launch floor of each mode.
constexpr double kFixedS = 1.5;
constexpr int kMaxColdLaunches = 4096;

double weight_bytes(finalize::WeightType w) {
  return w == finalize::WeightType::kNone ? 0 : w == finalize::WeightType::kBf16 ? 2 : 4;
}

/// Rows of the GEMM output the shape's routing fills, padded per expert to the tile (uniform
/// routing over kExperts: about half a tile of padding per used expert).
double gemm_rows(Shape const& s) {
  double const pairs = static_cast<double>(s.tokens * s.top_k);
  double const used = std::min(pairs, static_cast<double>(kExperts));
  return pairs + used * static_cast<double>(kTile - 1) / 2;
}

double gemm_bytes(Shape const& s) {
  return gemm_rows(s) * static_cast<double>(s.hidden) * 2;
}

/// The fewest bytes a launch moves (as HostCase::min_bytes, without the padding rows).
double min_bytes(Shape const& s) {
  double const pairs = static_cast<double>(s.tokens * s.top_k);
  double const h = static_cast<double>(s.hidden);
  return pairs * h * 2 + pairs * (4 + weight_bytes(s.weights)) +
         static_cast<double>(s.tokens) * h * 2;
}

int mode_index(std::string const& mode) {
  return mode == "a" ? 0 : mode == "b" ? 1 : 2;
}

Family const& family_of(std::string const& variant) {
  for (auto const& f : kFamilies)
    if (variant == f.name)
      return f;
  return kFamilies[3];
}

double producer_us(Shape const& s) {
  return kProducerFloorUs + 2 * gemm_bytes(s) / kProducerBytesPerUs;
}

} // namespace

ModeCell mode_cell(Shape const& s, std::string const& mode, std::string const& l2,
                   SweepPlan const& p) {
  ModeCell c;
  if (l2 != "cold") {
    c.measured = true;
    c.launches = p.launches;
    return c;
  }
  if (mode == "b") {
    c.skipped = "mode b is not measured with cold L2 (the producer leaves gemm_out in L2)";
    return c;
  }
  double const set_bytes = gemm_bytes(s) +
                           static_cast<double>(s.tokens * s.top_k) * (4 + weight_bytes(s.weights)) +
                           static_cast<double>(s.tokens * s.hidden) * 2;
  double const sets = std::ceil(2.0 * static_cast<double>(p.l2_bytes) / set_bytes);
  if (sets > kMaxColdLaunches) {
    c.skipped = "cold L2 needs more than 4096 rotating input copies for the smallest shapes";
    return c;
  }
  c.measured = true;
  c.launches = std::max(p.launches, static_cast<int>(sets));
  return c;
}

double launch_us(Shape const& s, std::string const& variant, std::string const& mode) {
  LaunchCoef const& k = family_of(variant).mode[mode_index(mode)];
  return k.floor_us + k.us_per_mb * min_bytes(s) / 1e6 + k.us_per_k * static_cast<double>(s.top_k);
}

namespace {

/// (seconds of timed replays on the GPU, seconds of host work) of one shape.
std::pair<double, double> shape_split(Shape const& s, SweepPlan const& p) {
  double gpu = 0, host = 0;
  for (auto const& mode : p.modes)
    for (auto const& l2 : p.l2s) {
      ModeCell const c = mode_cell(s, mode, l2, p);
      if (!c.measured)
        continue;
      bool const b = mode == "b";
      double const n = c.launches;
      double step_us = 0;
      for (auto const& v : p.variants)
        step_us += launch_us(s, v, mode) + (b ? producer_us(s) : 0);
      if (b)
        step_us += producer_us(s); // the producer-alone graph
      auto const graphs = static_cast<double>(p.variants.size() + (b ? 1 : 0));
      double const nodes = n * (b ? 2 : 1);
      gpu += (p.rounds + 1) * n * step_us * 1e-6;
      host += graphs * (kGraphS + nodes * kGraphNodeS);
    }
  // a shape with nothing to measure is skipped before its inputs are built
  if (gpu > 0)
    host += kShapeSetupS + gemm_bytes(s) / kHostBytesPerS;
  return {gpu, host};
}

} // namespace

double shape_seconds(Shape const& s, SweepPlan const& p) {
  auto const [gpu, host] = shape_split(s, p);
  return gpu + host;
}

SweepEstimate estimate_sweep(SweepPlan const& p) {
  SweepEstimate e;
  std::set<std::string> notes;
  for (auto const& s : p.shapes) {
    for (auto const& mode : p.modes)
      for (auto const& l2 : p.l2s) {
        ModeCell const c = mode_cell(s, mode, l2, p);
        if (!c.measured) {
          notes.insert(c.skipped);
          continue;
        }
        ++e.combos;
        e.rows += p.variants.size();
        e.launches += static_cast<std::int64_t>(p.rounds + 1) * c.launches *
                      static_cast<std::int64_t>(p.variants.size());
      }
    auto const [gpu, host] = shape_split(s, p);
    e.gpu_seconds += gpu;
    e.seconds += gpu + host;
  }
  if (e.rows > 0) {
    e.seconds += kFixedS;
    // After a complete grid, `repeat_shapes` shapes spread over it are measured again.
    std::size_t const m =
        std::min<std::size_t>(static_cast<std::size_t>(p.repeat_shapes), p.shapes.size());
    for (std::size_t j = 0; j < m; ++j)
      e.seconds += shape_seconds(p.shapes[j * p.shapes.size() / m], p);
  }
  e.notes.assign(notes.begin(), notes.end());
  return e;
}

std::string estimate_text(SweepPlan const& p, SweepEstimate const& e) {
  std::size_t combos = 0;
  for (auto const& m : p.modes)
    for (auto const& l : p.l2s)
      combos += !(m == "b" && l == "cold");
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "sweep finalize: %zu shapes x %zu mode/L2 combinations x %zu variants: %zu rows "
                "(%zu shape/mode/L2 cells measured); %d rounds of %d launches (%.2g timed "
                "launches); expected ~%.1f min on an H200-class GPU (%.0f s, %.0f s of it "
                "timed replays; cost model of --help; the progress lines give the real pace)\n",
                p.shapes.size(), combos, p.variants.size(), e.rows, e.combos, p.rounds, p.launches,
                static_cast<double>(e.launches), e.seconds / 60, e.seconds, e.gpu_seconds);
  std::string out = buf;
  for (auto const& n : e.notes)
    out += "note: " + n + "\n";
  return out;
}

char const* const kEstimateHelp =
    "--estimate: rows = the shapes x the (mode, L2) cells measured x the variants (mode b is\n"
    "never cold; cold shapes too small to rotate through twice the L2 in 4096 launches are\n"
    "skipped). Time = per shape with something to measure: its inputs built and copied (2 ms +\n"
    "bytes at 2 GB/s), per cell a graph per variant captured and instantiated (0.2 ms + 4.3 us\n"
    "per launch in it) and replayed rounds + 1 times, each launch costing floor + us/MB x bytes\n"
    "+ us/K x top-K by kernel family and mode (least squares on the H200 medians of\n"
    "data/h200/h200_finalize_sweep.h5), mode b adding the producer (2 us + its bytes at 3 TB/s);\n"
    "plus 1.5 s of fixed phases and the repeated shapes. The host constants are fitted so that\n"
    "the full grid takes the 86 s the H200 run took (h200_finalize_log.txt); other GPUs and\n"
    "hosts differ.";

} // namespace moefin::fin
