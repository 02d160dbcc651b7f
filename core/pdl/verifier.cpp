#include "core/pdl/verifier.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace moefin::pdl {

char const* hazard_name(Hazard h) {
  switch (h) {
  case Hazard::kRaw:
    return "RAW";
  case Hazard::kWar:
    return "WAR";
  case Hazard::kWaw:
    return "WAW";
  }
  return "?";
}

bool conflict(Op const& first, Op const& second, Hazard* hazard) {
  if (!first.is_access() || !second.is_access() || first.buffer != second.buffer)
    return false;
  bool const w1 = first.kind == OpKind::kWrite, w2 = second.kind == OpKind::kWrite;
  if (!w1 && !w2)
    return false;
  *hazard = w1 ? (w2 ? Hazard::kWaw : Hazard::kRaw) : Hazard::kWar;
  return true;
}

std::string access_text(Chain const& c, int instance, int path, int op) {
  int const k = instance % static_cast<int>(c.kernels.size());
  Kernel const& kern = c.kernels[k];
  Path const& p = kern.paths[path];
  Op const& o = p[op];
  int const w = first_of(p, OpKind::kWait);
  bool const before = w < 0 || op < w;
  std::string s = instance_name(c, instance) + (o.kind == OpKind::kRead ? " reads " : " writes ") +
                  c.buffers[o.buffer] +
                  (w < 0    ? " (no wait on its path)"
                   : before ? " before its wait"
                            : " after its wait");
  // Name the op when the same access appears twice on the same side of the wait.
  int same = 0;
  for (std::size_t j = 0; j < p.size(); ++j)
    if (p[j] == o && (w < 0 || static_cast<int>(j) < w) == before)
      ++same;
  if (kern.paths.size() > 1 || same > 1)
    s += " [path " + std::to_string(path) + " op " + std::to_string(op) + "]";
  return s;
}

std::size_t Report::races() const {
  return static_cast<std::size_t>(
      std::count_if(pairs.begin(), pairs.end(), [](PairVerdict const& p) { return !p.ordered; }));
}

PairVerdict const* Report::find(PairKey const& k) const {
  for (PairVerdict const& p : pairs)
    if (p.key == k)
      return &p;
  return nullptr;
}

Verdict reads_verdict(Chain const& c, Report const& r, std::vector<int> const& kernels, int buffer,
                      bool before_wait) {
  auto const side = [&](int k, int path, int op) {
    int const w = first_of(c.kernels.at(k).paths.at(path), OpKind::kWait);
    return (w < 0 || op < w) == before_wait;
  };
  bool found = false;
  for (int k : kernels)
    for (std::size_t p = 0; p < c.kernels.at(k).paths.size(); ++p) {
      Path const& path = c.kernels[k].paths[p];
      for (std::size_t o = 0; o < path.size(); ++o)
        found = found || (path[o].kind == OpKind::kRead && path[o].buffer == buffer &&
                          side(k, static_cast<int>(p), static_cast<int>(o)));
    }
  if (!found)
    throw std::invalid_argument("reads_verdict: no read of " + c.buffers.at(buffer) +
                                (before_wait ? " before" : " after") + " the wait in " + c.name);
  for (PairVerdict const& v : r.pairs)
    if (!v.ordered && v.hazard == Hazard::kRaw && v.key.buffer == buffer &&
        std::find(kernels.begin(), kernels.end(), v.key.kernel_b) != kernels.end() &&
        side(v.key.kernel_b, v.key.path_b, v.key.op_b))
      return Verdict::kRace;
  return Verdict::kOrdered;
}

namespace {

/// A path being edited, with one op followed through insertions and removals.
struct Tracked {
  Path path;
  int op = -1;

  void erase(int i) {
    path.erase(path.begin() + i);
    if (op > i)
      --op;
  }
  void insert(int i, Op o) {
    path.insert(path.begin() + i, o);
    if (op >= i)
      ++op;
  }
};

Op make(OpKind k) {
  Op o;
  o.kind = k;
  return o;
}

/// Every path of the kernel waits before it triggers (a wait at entry where there was none).
Path trigger_after_wait(Path const& p) {
  Tracked t{p, -1};
  for (int i = first_of(t.path, OpKind::kTrigger); i >= 0; i = first_of(t.path, OpKind::kTrigger))
    t.erase(i);
  int w = first_of(t.path, OpKind::kWait);
  if (w < 0) {
    t.insert(0, make(OpKind::kWait));
    w = 0;
  }
  t.insert(w + 1, make(OpKind::kTrigger));
  return t.path;
}

/// Adds a wait to a path without one, keeping an early trigger where it is.
Path add_wait(Path const& p) {
  Tracked t{p, -1};
  int const trig = first_of(t.path, OpKind::kTrigger);
  t.insert(trig >= 0 ? trig + 1 : static_cast<int>(t.path.size()), make(OpKind::kWait));
  return t.path;
}

/// Moves op `j` to right after the first wait (adding a wait at entry where there is none).
Tracked access_after_wait(Path const& p, int j) {
  Tracked t{p, j};
  if (first_of(t.path, OpKind::kWait) < 0)
    t.insert(0, make(OpKind::kWait));
  int const w = first_of(t.path, OpKind::kWait);
  if (t.op > w)
    return t;
  Op const o = t.path[t.op];
  t.path.erase(t.path.begin() + t.op);
  int const w2 = first_of(t.path, OpKind::kWait);
  t.path.insert(t.path.begin() + w2 + 1, o);
  t.op = w2 + 1;
  return t;
}

/// A release fence right after write `i`, and the trigger (if it came earlier) after the fence.
Tracked fence_after(Path const& p, int i) {
  Tracked t{p, i};
  Op f = make(OpKind::kFence);
  f.scope = FenceScope::kGpu;
  t.insert(t.op + 1, f);
  int const trig = first_of(t.path, OpKind::kTrigger);
  if (trig >= 0 && trig < t.op) {
    t.erase(trig);
    t.insert(t.op + 2, make(OpKind::kTrigger));
  }
  return t;
}

/// The trigger (if it came earlier) moved to right after op `i`.
Tracked trigger_after(Path const& p, int i) {
  Tracked t{p, i};
  int const trig = first_of(t.path, OpKind::kTrigger);
  if (trig >= 0 && trig < t.op) {
    t.erase(trig);
    t.insert(t.op + 1, make(OpKind::kTrigger));
  }
  return t;
}

class Checker {
public:
  explicit Checker(Chain const& c) : c_(c), u_(unroll(c)) {
    for (Kernel const& k : c.kernels) {
      int best = 0;
      for (std::size_t p = 1; p < k.paths.size(); ++p)
        if (wait_class(k.paths[p]) < wait_class(k.paths[best]))
          best = static_cast<int>(p);
      weakest_.push_back(best);
    }
  }

  Unrolled const& unrolled() const { return u_; }

  /// One CTA per instance up to `last`: the weakest path, except where overridden.
  std::vector<InstancePlan> plans(int last) const {
    std::vector<InstancePlan> pl(static_cast<std::size_t>(last) + 1);
    for (int m = 0; m <= last; ++m) {
      int const p = weakest_[u_.kernel(m)];
      pl[m].paths = {&c_.kernels[u_.kernel(m)].paths[p]};
      pl[m].path_index = {p};
    }
    return pl;
  }

  Path const& weakest(int m) const {
    return c_.kernels[u_.kernel(m)].paths[weakest_[u_.kernel(m)]];
  }

  /// Whether y (op yo of instance mb's only CTA) is ordered after x (op xo of instance ma's);
  /// fills `chain` with the events that order them.
  bool ordered(std::vector<InstancePlan> const& pl, std::vector<std::vector<InEdge>> const& edges,
               int ma, int xo, int mb, int yo, std::vector<int>* chain) {
    g_.build(edges, pl);
    int const ca = g_.cta_begin[ma], cb = g_.cta_begin[mb];
    Op const& x = (*g_.ctas[ca].ops)[xo];
    int const source = x.kind == OpKind::kWrite ? g_.visible_node(ca, xo) : g_.op_node(ca, xo);
    int const target = g_.op_node(cb, yo);
    return search(source, target, chain);
  }

  EventGraph const& graph() const { return g_; }

private:
  /// Backward breadth-first search from target; the shortest chain of facts from source.
  bool search(int source, int target, std::vector<int>* chain) {
    next_.assign(g_.size(), -2);
    queue_.clear();
    queue_.push_back(target);
    next_[target] = -1;
    for (std::size_t qi = 0; qi < queue_.size(); ++qi) {
      int const v = queue_[qi];
      if (v == source) {
        if (chain) {
          chain->clear();
          for (int w = source; w >= 0; w = next_[w])
            chain->push_back(w);
        }
        return true;
      }
      for (int const* p = g_.preds_begin(v); p != g_.preds_end(v); ++p)
        if (next_[*p] == -2) {
          next_[*p] = v;
          queue_.push_back(*p);
        }
    }
    return false;
  }

  Chain const& c_;
  Unrolled u_;
  std::vector<int> weakest_;
  EventGraph g_;
  std::vector<int> next_, queue_;
};

/// "gemm1's wait returns", "launch finalize", ... for one node of a chain of facts.
std::string node_text(Chain const& c, EventGraph const& g, int v) {
  Node const& n = g.nodes[v];
  std::string const inst = instance_name(c, n.instance);
  switch (n.kind) {
  case NodeKind::kLaunch:
    return "launch " + inst;
  case NodeKind::kStart:
    return inst + " starts";
  case NodeKind::kExit:
    return inst + " exits";
  case NodeKind::kTrigger:
    return inst + " triggered (all CTAs)";
  case NodeKind::kComplete:
    return inst + " completes (flushed)";
  case NodeKind::kOp:
    break;
  }
  Op const& o = (*g.ctas[n.cta].ops)[n.op];
  switch (o.kind) {
  case OpKind::kWait:
    return inst + "'s wait returns";
  case OpKind::kTrigger:
    return inst + " triggers";
  case OpKind::kFence:
    return inst + " fences (" + (o.scope == FenceScope::kGpu ? "gpu" : "sys") + ")";
  case OpKind::kRead:
    return inst + " reads " + c.buffers[o.buffer];
  case OpKind::kWrite:
    return inst + " writes " + c.buffers[o.buffer];
  }
  return "?";
}

/// The chain of facts without the steps that add nothing to a reader: starts, program order
/// inside one CTA (an op is shown where the chain enters or leaves its CTA), an exit followed by
/// its kernel's completion, a CTA trigger followed by its kernel's trigger.
std::string chain_text(Chain const& c, EventGraph const& g, std::vector<int> const& chain) {
  std::string s;
  auto const same_cta = [&](std::size_t i, std::size_t j) {
    return g.nodes[chain[i]].cta >= 0 && g.nodes[chain[i]].cta == g.nodes[chain[j]].cta;
  };
  for (std::size_t i = 0; i < chain.size(); ++i) {
    Node const& n = g.nodes[chain[i]];
    bool const end = i == 0 || i + 1 == chain.size();
    if (!end) {
      if (n.kind == NodeKind::kStart)
        continue;
      if (n.kind == NodeKind::kOp && same_cta(i, i - 1) && same_cta(i, i + 1))
        continue;
      if (n.kind == NodeKind::kExit && g.nodes[chain[i + 1]].kind == NodeKind::kComplete)
        continue;
      if (n.kind == NodeKind::kTrigger) {
        Node const& prev = g.nodes[chain[i - 1]];
        if (prev.instance == n.instance && prev.kind != NodeKind::kExit)
          continue;
      }
    }
    s += (s.empty() ? "" : " -> ") + node_text(c, g, chain[i]);
  }
  return s;
}

std::string source_text(Chain const& c, int ma, Path const& p, int xo) {
  if (p[xo].kind == OpKind::kRead)
    return "the read must happen before the later write, through a chain of facts";
  for (std::size_t j = static_cast<std::size_t>(xo) + 1; j < p.size(); ++j)
    if (p[j].kind == OpKind::kFence)
      return "the write is published by the fence after it (" + op_text(c, p[j]) + ")";
  return "the write is visible only once " + instance_name(c, ma) +
         " has completed (no release fence after it; a trigger publishes nothing)";
}

std::string target_text(Chain const& c, Unrolled const& u, int mb, Path const& q, int yo) {
  std::string after, covers;
  for (InEdge const& e : u.in_edges[mb]) {
    std::string const from = instance_name(c, e.from);
    if (after.size() > 200) {
      after += ", ...";
      break;
    }
    after += (after.empty() ? "" : ", ") + (e.port == Port::kProgrammatic ? "the trigger of " + from
                                            : e.port == Port::kDefault
                                                ? "the completion of " + from
                                                : "the start of " + from + "'s CTAs");
    if (e.port == Port::kProgrammatic)
      covers += (covers.empty() ? "" : ", ") + from;
  }
  std::string const inst = instance_name(c, mb);
  std::string const launch =
      "launch " + inst + (after.empty() ? " (first launch)" : " (after " + after + ")");
  int const w = first_of(q, OpKind::kWait);
  if (w < 0 || yo < w)
    return "the second access is not after a wait: it is ordered only after " + launch;
  if (covers.empty())
    return "the second access is after its wait, but the wait sees no programmatic primary; it "
           "is ordered only after " +
           launch;
  return "the second access is after its wait, which covers the completion of " + covers +
         " only; and after " + launch;
}

} // namespace

Report verify(Chain const& c, VerifyOptions const& o) {
  Checker ck(c);
  Unrolled const& u = ck.unrolled();
  Report rep;
  std::vector<int> chain;
  int const n = u.n;
  for (int ma = 0; ma < n; ++ma) {
    Kernel const& ka = c.kernels[ma];
    for (int mb = ma + 1; mb < u.size(); ++mb) {
      Kernel const& kb = c.kernels[u.kernel(mb)];
      for (std::size_t pa = 0; pa < ka.paths.size(); ++pa) {
        for (std::size_t pb = 0; pb < kb.paths.size(); ++pb) {
          Path const& P = ka.paths[pa];
          Path const& Q = kb.paths[pb];
          std::vector<InstancePlan> pl = ck.plans(mb);
          pl[ma] = {{&P}, {static_cast<int>(pa)}};
          pl[mb] = {{&Q}, {static_cast<int>(pb)}};
          for (std::size_t xo = 0; xo < P.size(); ++xo) {
            for (std::size_t yo = 0; yo < Q.size(); ++yo) {
              Hazard h;
              if (!conflict(P[xo], Q[yo], &h))
                continue;
              PairVerdict v;
              v.key = {P[xo].buffer,    ma,           static_cast<int>(pa), static_cast<int>(xo),
                       u.iteration(mb), u.kernel(mb), static_cast<int>(pb), static_cast<int>(yo)};
              v.hazard = h;
              v.first = access_text(c, ma, static_cast<int>(pa), static_cast<int>(xo));
              v.second = access_text(c, mb, static_cast<int>(pb), static_cast<int>(yo));
              int const x = static_cast<int>(xo), y = static_cast<int>(yo);
              v.ordered = ck.ordered(pl, u.in_edges, ma, x, mb, y, o.explain ? &chain : nullptr);
              if (o.explain && v.ordered)
                v.why.push_back(chain_text(c, ck.graph(), chain));
              if (o.explain && !v.ordered) {
                v.why.push_back(source_text(c, ma, P, x));
                v.why.push_back(target_text(c, u, mb, Q, y));
                std::string between;
                for (int m = ma + 1; m < mb; ++m)
                  between += (between.empty() ? "" : "; ") + instance_name(c, m) + " " +
                             wait_class_text(wait_class(ck.weakest(m))) +
                             (c.kernels[u.kernel(m)].paths.size() > 1 ? " (weakest path)" : "");
                if (!between.empty())
                  v.why.push_back("in between: " + between);

                // Single changes that would order the pair, each checked with the same rule.
                std::set<std::string> seen;
                auto add_fix = [&](std::string const& text, bool works) {
                  if (works && seen.insert(text).second)
                    v.fixes.push_back(text);
                };
                for (int m = ma + 1; m < mb; ++m) {
                  std::string const kname = c.kernels[u.kernel(m)].name;
                  WaitClass const wc = wait_class(ck.weakest(m));
                  if (wc != WaitClass::kWaitsBeforeTrigger) {
                    std::vector<Path> edited;
                    for (Path const& p : c.kernels[u.kernel(m)].paths)
                      edited.push_back(trigger_after_wait(p));
                    auto pl2 = pl;
                    pl2[m] = {{&edited[0]}, {-1}};
                    add_fix(kname + " waits before it triggers (every path)",
                            ck.ordered(pl2, u.in_edges, ma, x, mb, y, nullptr));
                  }
                  if (wc == WaitClass::kNoWait) {
                    Path const edited = add_wait(ck.weakest(m));
                    auto pl2 = pl;
                    pl2[m] = {{&edited}, {-1}};
                    add_fix(kname + " waits on every path (its trigger may stay before the wait)",
                            ck.ordered(pl2, u.in_edges, ma, x, mb, y, nullptr));
                  }
                }
                int const wq = first_of(Q, OpKind::kWait);
                if (wq < 0 || y < wq) {
                  Tracked const t = access_after_wait(Q, y);
                  auto pl2 = pl;
                  pl2[mb] = {{&t.path}, {-1}};
                  add_fix(kb.name + " does '" + op_text(c, Q[y]) + "' after its wait",
                          ck.ordered(pl2, u.in_edges, ma, x, mb, t.op, nullptr));
                }
                if (P[x].kind == OpKind::kWrite) {
                  Tracked const t = fence_after(P, x);
                  auto pl2 = pl;
                  pl2[ma] = {{&t.path}, {-1}};
                  int const trig = first_of(P, OpKind::kTrigger);
                  add_fix(ka.name + " fences (gpu) after '" + op_text(c, P[x]) + "'" +
                              (trig >= 0 && trig < x ? " and triggers after the fence" : ""),
                          ck.ordered(pl2, u.in_edges, ma, t.op, mb, y, nullptr));
                } else {
                  int const trig = first_of(P, OpKind::kTrigger);
                  if (trig >= 0 && trig < x) {
                    Tracked const t = trigger_after(P, x);
                    auto pl2 = pl;
                    pl2[ma] = {{&t.path}, {-1}};
                    add_fix(ka.name + " triggers after '" + op_text(c, P[x]) + "'",
                            ck.ordered(pl2, u.in_edges, ma, t.op, mb, y, nullptr));
                  }
                }
                for (int m = ma + 1; m <= mb; ++m) {
                  auto edges = u.in_edges;
                  bool changed = false;
                  for (InEdge& e : edges[m])
                    if (e.port != Port::kDefault) {
                      e.port = Port::kDefault;
                      changed = true;
                    }
                  if (changed)
                    add_fix((c.graph ? "default edges into " : "launch ") +
                                c.kernels[u.kernel(m)].name + (c.graph ? "" : " without PDL"),
                            ck.ordered(pl, edges, ma, x, mb, y, nullptr));
                  edges = u.in_edges;
                  changed = false;
                  for (InEdge& e : edges[m])
                    if (e.port == Port::kLaunchCompletion) {
                      e.port = Port::kProgrammatic;
                      changed = true;
                    }
                  if (changed)
                    add_fix("programmatic instead of launch-completion edges into " +
                                c.kernels[u.kernel(m)].name,
                            ck.ordered(pl, edges, ma, x, mb, y, nullptr));
                }
              }
              rep.pairs.push_back(std::move(v));
            }
          }
        }
      }
    }
  }
  return rep;
}

} // namespace moefin::pdl
