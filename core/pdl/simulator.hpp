#pragma once
// The schedule simulator of `moefin simulate`: random executions of a chain under exactly the
// facts of core/pdl/event_graph.hpp (same graph builder as the verifier).
//
// One schedule: every CTA draws a path; every event's time is the latest of its predecessors
// plus its own non-negative delay (a kernel's trigger is exactly the latest CTA trigger; its
// completion is the latest exit plus a flush delay). Any non-negative delays give a schedule the
// facts allow, and every schedule they allow is one choice of delays, so with delays of full
// support on [0, inf) (free schedules) the simulator can produce every allowed behaviour and no
// forbidden one. Each write gets the next version of its buffer; a hazard is recorded when
//   a read happens before an earlier kernel's write to it is visible (stale read, RAW),
//   a write happens before an earlier kernel's read of it (premature overwrite, WAR),
//   a write happens before an earlier kernel's write to it is visible (lost write, WAW),
// with "visible" as in the verifier (first fence after the write, else the kernel's completion).
//
// Witness bound. Odd schedules are pivot schedules: one pivot (a kernel's completion, or one
// read or fence op of one path, in every CTA that runs it) is delayed by more than the sum of all
// other delays, which are below 1. If the verifier reports a race, the source of its first access
// (the completion or fence where the write becomes visible, or the read) is not an ancestor of the
// second access once every kernel instance in between runs only paths of its weakest wait class;
// delaying that source then puts it after the second access. Pivots are taken in turn, so in every
// 2*|pivots| schedules each pivot is tried once, and a try succeeds when the path draws are right,
// with probability at least q = prod over instances with p > 1 paths of 1/(2p) (half the draws put
// all CTAs of an instance on one uniformly chosen path). So every race is witnessed within
// 2*|pivots| schedules when all kernels have one path, and within 2*|pivots|*R schedules with
// probability at least 1 - delta, R = ceil(ln(delta) / ln(1 - q)), otherwise.

#include "core/pdl/chain.hpp"
#include "core/pdl/event_graph.hpp"
#include "core/pdl/verifier.hpp"

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace moefin::pdl {

/// Counts of schedules saturate here instead of overflowing: the bound of a chain with many
/// multi-path kernels can exceed any 64-bit count (q underflows), and is then "more than this".
inline constexpr std::int64_t kSaturated = std::int64_t(1) << 62;

/// x rounded down, clamped to [0, kSaturated] (NaN and +inf give kSaturated).
std::int64_t saturating_count(double x);
/// a * b for non-negative counts, kSaturated when it would reach it.
std::int64_t saturating_product(std::int64_t a, std::int64_t b);

struct WitnessBound {
  std::int64_t pivots = 0;    // |pivots|
  double q = 1.0;             // lower bound of a pivot try's success probability (may be 0)
  double miss = 0.0;          // delta: allowed probability of missing one race
  std::int64_t rounds = 1;    // R, saturated at kSaturated
  std::int64_t schedules = 0; // 2 * pivots * rounds, saturated at kSaturated
  bool saturated = false;     // rounds or schedules reached kSaturated: "more than 4.6e18"
};

/// The number of schedules after which every race the verifier reports has been witnessed with
/// probability at least 1 - miss (exactly, for chains whose kernels have one path each).
WitnessBound witness_bound(Chain const& c, double miss);

/// One simulated execution.
struct Schedule {
  std::int64_t index = 0;
  bool pivot_mode = false;
  std::string pivot; // what the pivot schedule delays
  std::vector<InstancePlan> plans;
  EventGraph graph;
  std::vector<double> time; // per node, in simulated units (1 unit = 1 us in timelines)
};

/// An access as it happened in one schedule.
struct AccessEvent {
  int instance = 0;
  int cta = 0; // index into Schedule::graph.ctas
  int op = 0;
  int version = 0;    // writes: the buffer version this write creates (1, 2, ...)
  double time = 0;    // when it happened
  double visible = 0; // writes: when it is visible to everybody (reads: = time)
};

/// A hazard found in one schedule, with the two accesses that show it.
struct HazardEvent {
  PairKey key;
  Hazard hazard = Hazard::kRaw;
  AccessEvent first, second;
};

class Simulator {
public:
  explicit Simulator(Chain const& c);

  /// Schedule `index` of the stream seeded by `seed` (reproducible from the two numbers).
  void run(std::uint64_t seed, std::int64_t index, Schedule* s) const;

  /// The hazards of a schedule, one per pair key (the earliest second access of each).
  std::vector<HazardEvent> hazards(Schedule const& s) const;

  /// Accesses of a schedule grouped by buffer, in launch order of their instances.
  std::vector<std::vector<AccessEvent>> accesses(Schedule const& s) const;

  std::size_t pivots() const { return pivots_.size(); }
  Chain const& chain() const { return c_; }
  Unrolled const& unrolled() const { return u_; }

private:
  struct Pivot {
    int instance = 0;
    int path = -1; // -1: the instance's completion
    int op = -1;
  };
  Chain const& c_;
  Unrolled u_;
  std::vector<Pivot> pivots_;
};

struct HazardStat {
  PairKey key;
  Hazard hazard = Hazard::kRaw;
  std::int64_t schedules = 0; // in how many schedules it happened
  std::int64_t first_schedule = -1;
  HazardEvent first;
};

struct SimOptions {
  std::uint64_t seed = 2026;
  std::int64_t schedules = 0; // 0: witness_bound(c, miss).schedules
  double miss = 1e-6;
  std::function<void(std::int64_t done, std::int64_t total)> progress; // optional
};

struct SimReport {
  std::int64_t schedules = 0;
  WitnessBound bound;
  std::vector<HazardStat> hazards;  // ordered by key
  std::int64_t stale_schedules = 0; // schedules with at least one hazard
};

SimReport simulate(Chain const& c, SimOptions const& o);

/// Text of a hazard ("finalize reads routing_meta before its wait before version 1 ...").
std::string hazard_text(Chain const& c, HazardEvent const& h);

/// Prints the witness schedule of a hazard: each CTA of the kernels from the first access's
/// instance to the second's, with its event times.
void print_witness(std::ostream& os, Chain const& c, Schedule const& s, HazardEvent const& h);

/// Writes one schedule as a timeline (the "Timelines" layout of
/// docs/reference/experiment-tables.md) into `group` of a new result file.
void write_timeline(std::string const& path, std::string const& group, Chain const& c,
                    Schedule const& s, std::uint64_t seed);

} // namespace moefin::pdl
