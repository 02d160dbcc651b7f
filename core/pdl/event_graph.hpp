#pragma once
// The real-time facts of docs/design/pdl.md as a graph of events: an edge u -> v says
// time(v) >= time(u) in every execution. The verifier decides ordering by reachability in it (all
// delays are unbounded, so "implied by the facts" is exactly "reachable"); the simulator draws
// times along the same edges. One builder serves both, so they cannot disagree about the rules.
//
// Facts encoded (instance = one launch of a kernel; CTAs run one path each):
//   launch(K) -> every CTA start; a CTA's events follow its path in order; start -> ... -> exit
//   programmatic in-edge U -> K: trigger(U) -> launch(K), and complete(U) -> every wait of K
//   default in-edge U -> K (also a launch without PDL): complete(U) -> launch(K)
//   launch-completion in-edge U -> K: every CTA start of U -> launch(K) (a wait does not see it)
//   trigger(K) = latest CTA trigger, where a CTA without one triggers at its exit
//   complete(K) = latest CTA exit, then the flush (its own delay)

#include "core/pdl/chain.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moefin::pdl {

struct InEdge {
  int from = 0; // instance
  Port port = Port::kDefault;
};

/// The chain unrolled over its iterations: instance m = iteration * n + kernel, in launch order.
struct Unrolled {
  int n = 0; // kernels per iteration
  int iterations = 1;
  std::vector<std::vector<InEdge>> in_edges; // per instance

  int size() const { return n * iterations; }
  int kernel(int m) const { return m % n; }
  int iteration(int m) const { return m / n; }
};

/// Stream order (each kernel after the previous one, with its `pdl`; iteration r+1's first kernel
/// after iteration r's last) or graph edges (replays serialized: a root of replay r+1 launches
/// after every kernel of replay r completed).
Unrolled unroll(Chain const& c);

/// "gemm1" for iteration 0, "gemm1@1" for iteration 1, ...
std::string instance_name(Chain const& c, int m);

enum class NodeKind : std::uint8_t { kLaunch, kStart, kOp, kExit, kTrigger, kComplete };

struct Node {
  NodeKind kind = NodeKind::kLaunch;
  int instance = 0;
  int cta = -1; // index into EventGraph::ctas for start, op and exit nodes
  int op = -1;  // index in the CTA's path for op nodes
};

struct CtaNodes {
  int instance = 0;
  int index = 0; // CTA number within its instance
  int path = 0;  // path index in the kernel (or -1 for an edited path)
  Path const* ops = nullptr;
  int start = 0;   // node of the start; op j is node start + 1 + j; exit is start + 1 + size
  int trigger = 0; // the first trigger op, or the exit
  int exit = 0;
};

/// The paths the CTAs of one instance run (pointers stay owned by the caller).
struct InstancePlan {
  std::vector<Path const*> paths;
  std::vector<int> path_index;
};

class EventGraph {
public:
  /// Rebuilds the graph (keeps allocated capacity, so the simulator can reuse one object).
  void build(std::vector<std::vector<InEdge>> const& in_edges,
             std::vector<InstancePlan> const& plans);

  std::size_t size() const { return nodes.size(); }
  int op_node(int cta, int op) const { return ctas[cta].start + 1 + op; }
  /// Predecessors of node v (events that v is at or after).
  int const* preds_begin(int v) const { return preds.data() + pred_begin[v]; }
  int const* preds_end(int v) const { return preds.data() + pred_begin[v + 1]; }

  /// The node where a write becomes visible to everybody: the first fence after it on its path,
  /// else its kernel's completion (with the flush).
  int visible_node(int cta, int op) const;

  std::vector<Node> nodes; // in a topological order: every predecessor comes first
  std::vector<int> pred_begin;
  std::vector<int> preds;
  std::vector<CtaNodes> ctas;
  std::vector<int> launch, trigger, complete; // per instance
  std::vector<int> cta_begin;                 // per instance, size instances + 1
};

/// Where a path's trigger happens relative to its first wait: the three classes that decide what
/// a kernel contributes to ordering (more waiting only adds edges, so a kernel is as weak as the
/// weakest class among its paths).
enum class WaitClass : std::int32_t {
  kNoWait = 0,             // neither trigger nor completion is after the primary's completion
  kTriggersFirst = 1,      // completion after the primary's, trigger not
  kWaitsBeforeTrigger = 2, // trigger and completion after the primary's completion
};

WaitClass wait_class(Path const& p);
char const* wait_class_text(WaitClass c);

} // namespace moefin::pdl
