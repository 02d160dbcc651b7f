#pragma once
// The happens-before verifier of `moefin verify` (docs/design/pdl.md, docs/design/verification.md).
//
// Rule. An access y is ordered after an earlier kernel's access x iff the real-time facts of
// core/pdl/event_graph.hpp give, in every execution,
//   RAW, WAW (x writes): visible(x) <= time(y), where visible(x) is the first release fence after
//                        x on its path, else the completion (with flush) of x's kernel;
//   WAR (x reads, y writes): time(x) <= time(y).
// A trigger orders execution only, so reaching y through triggers alone never makes x visible:
// the chain must start at a completion or a fence. The facts only bound times from below and
// delays are unbounded, so "implied in every execution" is "reachable in the event graph".
//
// Worst case over executions. A CTA may run any path of its kernel, and more CTAs only add edges,
// so each kernel between x and y is checked with one CTA on its weakest path (the wait class that
// gives the fewest edges); x's and y's kernels run exactly x's and y's paths.
//
// Pairs. Every pair of conflicting accesses (same buffer, at least one write) in different kernel
// instances, the earlier one in iteration 0 (the rules repeat, so iteration r+d against r is
// iteration d against 0).

#include "core/pdl/chain.hpp"
#include "core/pdl/event_graph.hpp"

#include <string>
#include <tuple>
#include <vector>

namespace moefin::pdl {

enum class Hazard : std::int32_t {
  kRaw, // x writes, y reads: y may miss x's write (stale read)
  kWar, // x reads, y writes: x may read y's write (premature overwrite)
  kWaw, // both write: x's write may land after y's (lost write)
};

char const* hazard_name(Hazard h); // "RAW", "WAR", "WAW"

/// Identifies a pair of accesses independently of the iteration they happen in.
struct PairKey {
  int buffer = 0;
  int kernel_a = 0, path_a = 0, op_a = 0; // the earlier access
  int distance = 0;                       // iterations between them (0: same iteration)
  int kernel_b = 0, path_b = 0, op_b = 0; // the later access

  auto tie() const {
    return std::tie(kernel_a, path_a, op_a, distance, kernel_b, path_b, op_b, buffer);
  }
  friend bool operator<(PairKey const& a, PairKey const& b) { return a.tie() < b.tie(); }
  friend bool operator==(PairKey const& a, PairKey const& b) { return a.tie() == b.tie(); }
};

/// The hazard two ops form when the first comes from the earlier kernel; false when they do not
/// conflict (different buffers, two reads, or not accesses).
bool conflict(Op const& first, Op const& second, Hazard* hazard);

/// "finalize reads routing_meta before its wait" (with path/op when the kernel has several).
std::string access_text(Chain const& c, int instance, int path, int op);

struct PairVerdict {
  PairKey key;
  Hazard hazard = Hazard::kRaw;
  bool ordered = false;
  std::string first, second;      // access_text of both sides
  std::vector<std::string> why;   // ordered: the chain of events; race: what is missing
  std::vector<std::string> fixes; // race: single changes that would order the pair
};

struct Report {
  std::vector<PairVerdict> pairs;

  std::size_t races() const;
  Verdict verdict() const { return races() ? Verdict::kRace : Verdict::kOrdered; }
  PairVerdict const* find(PairKey const& k) const;
};

struct VerifyOptions {
  bool explain = true; // build the justification and the fixes (costs extra graph searches)
};

Report verify(Chain const& c, VerifyOptions const& o = {});

/// The verdict on the reads of `buffer` by any of `kernels` (indices into c.kernels) before their
/// first wait (`before_wait`) or after it: a race when some RAW pair of `r` that ends in one of
/// them races, whatever the writer and the distance in iterations. What a stale-read counter on
/// those reads can see. Throws std::invalid_argument when none of the kernels has such a read.
Verdict reads_verdict(Chain const& c, Report const& r, std::vector<int> const& kernels, int buffer,
                      bool before_wait);

} // namespace moefin::pdl
