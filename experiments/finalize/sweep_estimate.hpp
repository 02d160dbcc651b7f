#pragma once
// How long `moefin sweep finalize` will take, before it runs (`--estimate`, and the pacing of
// --max-minutes): the rows the selection measures, and a cost model per launch and per graph
// calibrated on the H200 run in data/h200/ (h200_finalize_log.txt: the full grid, 20736 rows,
// in 86 s). Host-only, no GPU needed.

#include "experiments/finalize/grid.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moefin::fin {

struct SweepPlan {
  std::vector<Shape> shapes;
  std::vector<std::string> modes, l2s; // "a", "b", "c"; "hot", "cold"
  std::vector<std::string> variants;   // scalar first, as the sweep times them
  int rounds = 5, launches = 100;
  int repeat_shapes = 8;              // measured again after a complete grid
  std::int64_t l2_bytes = 60ll << 20; // the GPU's L2 (an H200's when there is none)
};

/// The rows one shape gets in one mode and L2 state, and the launches per graph there: mode b
/// is never measured cold (the producer leaves gemm_out in L2); a cold shape rotates through
/// copies of its inputs totalling twice the L2, at least `launches` of them, and is skipped when
/// that takes more than 4096 launches.
struct ModeCell {
  bool measured = false;
  int launches = 0;
  std::string skipped; // why not, when !measured
};
ModeCell mode_cell(Shape const& s, std::string const& mode, std::string const& l2,
                   SweepPlan const& p);

/// Model of one timed launch (microseconds) of `variant` in `mode`, hot L2: a per-mode floor,
/// a cost per MB of the fewest bytes the launch moves and a cost per top-K entry (the dependent
/// loads of a token), by kernel family (least squares over the rows of h200_finalize_sweep.h5:
/// the median row within 10% for scalar and the small_batch family, within 25% for vecload).
double launch_us(Shape const& s, std::string const& variant, std::string const& mode);

/// Seconds one shape takes: its inputs built and copied, then per measured mode and L2 state a
/// graph per variant (plus the producer's in mode b) captured and instantiated, replayed once to
/// warm up and once per round.
double shape_seconds(Shape const& s, SweepPlan const& p);

struct SweepEstimate {
  std::size_t rows = 0;           // rows of /finalize_sweep the selection writes
  std::size_t combos = 0;         // (shape, mode, L2) measured
  std::int64_t launches = 0;      // timed finalize launches, warm-up included
  double seconds = 0;             // grid + the fixed phases + the repeated shapes
  double gpu_seconds = 0;         // of the grid: timed replays (the rest is host work)
  std::vector<std::string> notes; // what the selection leaves out
  bool empty() const { return rows == 0; }
};
SweepEstimate estimate_sweep(SweepPlan const& p);

/// What --estimate prints and --help explains.
std::string estimate_text(SweepPlan const& p, SweepEstimate const& e);
extern char const* const kEstimateHelp;

} // namespace moefin::fin
