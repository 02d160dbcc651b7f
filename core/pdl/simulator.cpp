#include "core/pdl/simulator.hpp"

#include "core/store/h5store.hpp"
#include "core/rng.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <stdexcept>

namespace moefin::pdl {

std::int64_t saturating_count(double x) {
  if (!(x >= 0.0)) // NaN
    return kSaturated;
  if (x >= static_cast<double>(kSaturated))
    return kSaturated;
  return static_cast<std::int64_t>(x);
}

std::int64_t saturating_product(std::int64_t a, std::int64_t b) {
  if (a < 0 || b < 0)
    throw std::invalid_argument("saturating_product of a negative count");
  if (a == 0 || b == 0)
    return 0;
  if (a >= kSaturated / b)
    return kSaturated;
  return a * b;
}

namespace {

std::string fmt(double t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", t);
  return buf;
}

} // namespace

WitnessBound witness_bound(Chain const& c, double miss) {
  WitnessBound b;
  b.miss = miss;
  Simulator const sim(c);
  b.pivots = static_cast<std::int64_t>(sim.pivots());
  // q in logarithms: a product of many 1/(2p) underflows to 0 long before its log does.
  double log_q = 0.0;
  for (int m = 0; m < sim.unrolled().size(); ++m) {
    auto const p = static_cast<double>(c.kernels[sim.unrolled().kernel(m)].paths.size());
    if (p > 1)
      log_q -= std::log(2.0 * p);
  }
  b.q = std::exp(log_q);
  double rounds = 1.0;
  if (log_q < 0.0) {
    // Once q is tiny (or has underflowed to 0), ln(1 - q) loses q; -ln(delta) / q >= R is then
    // computed through log_q instead, so the bound stays a bound (and may saturate).
    double const l1q = std::log1p(-b.q);
    rounds = b.q > 1e-12 && l1q < 0.0 ? std::ceil(std::log(miss) / l1q)
                                      : std::ceil(-std::log(miss) * std::exp(-log_q));
  }
  b.rounds = saturating_count(rounds);
  b.schedules = saturating_product(saturating_product(2, b.pivots), b.rounds);
  b.saturated = b.rounds == kSaturated || b.schedules == kSaturated;
  return b;
}

Simulator::Simulator(Chain const& c) : c_(c), u_(unroll(c)) {
  for (int m = 0; m < u_.size(); ++m) {
    pivots_.push_back({m, -1, -1});
    Kernel const& k = c.kernels[u_.kernel(m)];
    for (std::size_t p = 0; p < k.paths.size(); ++p)
      for (std::size_t j = 0; j < k.paths[p].size(); ++j)
        if (k.paths[p][j].kind == OpKind::kRead || k.paths[p][j].kind == OpKind::kFence)
          pivots_.push_back({m, static_cast<int>(p), static_cast<int>(j)});
  }
}

void Simulator::run(std::uint64_t seed, std::int64_t index, Schedule* s) const {
  Rng rng(Rng::mix(seed, static_cast<std::uint64_t>(index)));
  s->index = index;
  s->pivot_mode = index % 2 == 1;
  s->plans.resize(static_cast<std::size_t>(u_.size()));
  for (int m = 0; m < u_.size(); ++m) {
    Kernel const& k = c_.kernels[u_.kernel(m)];
    InstancePlan& pl = s->plans[m];
    pl.paths.resize(static_cast<std::size_t>(k.ctas));
    pl.path_index.resize(static_cast<std::size_t>(k.ctas));
    auto const np = static_cast<std::uint64_t>(k.paths.size());
    // Half the draws put every CTA on one path: the weakest behaviour of a kernel needs all its
    // CTAs on a weak path, which independent draws make rare for wide grids.
    bool const uniform = np > 1 && rng.below(2) == 0;
    int const shared = np > 1 ? static_cast<int>(rng.below(np)) : 0;
    for (int ci = 0; ci < k.ctas; ++ci) {
      int const p = np == 1 ? 0 : uniform ? shared : static_cast<int>(rng.below(np));
      pl.paths[ci] = &k.paths[p];
      pl.path_index[ci] = p;
    }
  }
  EventGraph& g = s->graph;
  g.build(u_.in_edges, s->plans);

  Pivot pv;
  s->pivot.clear();
  if (s->pivot_mode) {
    pv = pivots_[static_cast<std::size_t>((index / 2) % static_cast<std::int64_t>(pivots_.size()))];
    if (pv.path < 0)
      s->pivot = "the completion (flush) of " + instance_name(c_, pv.instance);
    else
      s->pivot = "'" + op_text(c_, c_.kernels[u_.kernel(pv.instance)].paths[pv.path][pv.op]) +
                 "' of " + instance_name(c_, pv.instance) + " path " + std::to_string(pv.path);
  }
  // Larger than any sum of the other (sub-unit) delays along a chain of events.
  double const huge = static_cast<double>(g.size()) + 1.0;
  static constexpr double kScales[3] = {0.01, 1.0, 100.0};
  s->time.assign(g.size(), 0.0);
  for (std::size_t v = 0; v < g.size(); ++v) {
    double base = 0.0;
    for (int const* p = g.preds_begin(static_cast<int>(v)); p != g.preds_end(static_cast<int>(v));
         ++p)
      base = std::max(base, s->time[*p]);
    Node const& n = g.nodes[v];
    double delay = 0.0;
    if (n.kind != NodeKind::kTrigger) {
      if (s->pivot_mode) {
        delay = rng.uniform();
        bool const hit = pv.path < 0 ? static_cast<int>(v) == g.complete[pv.instance]
                                     : n.kind == NodeKind::kOp && n.instance == pv.instance &&
                                           g.ctas[n.cta].path == pv.path && n.op == pv.op;
        if (hit)
          delay += huge + rng.uniform();
      } else {
        // Exponential delays at three scales: full support on [0, inf) for every event.
        delay = -std::log1p(-rng.uniform()) * kScales[rng.below(3)];
      }
    }
    s->time[v] = base + delay;
  }
}

std::vector<std::vector<AccessEvent>> Simulator::accesses(Schedule const& s) const {
  EventGraph const& g = s.graph;
  std::vector<std::vector<AccessEvent>> by_buffer(c_.buffers.size());
  std::vector<int> last_writer(c_.buffers.size(), -1), version(c_.buffers.size(), 0);
  for (std::size_t ci = 0; ci < g.ctas.size(); ++ci) {
    CtaNodes const& cn = g.ctas[ci];
    Path const& p = *cn.ops;
    for (std::size_t j = 0; j < p.size(); ++j) {
      if (!p[j].is_access())
        continue;
      AccessEvent a;
      a.instance = cn.instance;
      a.cta = static_cast<int>(ci);
      a.op = static_cast<int>(j);
      a.time = s.time[g.op_node(a.cta, a.op)];
      a.visible = a.time;
      int const b = p[j].buffer;
      if (p[j].kind == OpKind::kWrite) {
        // One version per writing instance: CTAs of one launch write the same version.
        if (last_writer[b] != cn.instance) {
          last_writer[b] = cn.instance;
          ++version[b];
        }
        a.version = version[b];
        a.visible = s.time[g.visible_node(a.cta, a.op)];
      }
      by_buffer[b].push_back(a);
    }
  }
  return by_buffer;
}

std::vector<HazardEvent> Simulator::hazards(Schedule const& s) const {
  EventGraph const& g = s.graph;
  std::map<PairKey, HazardEvent> found;
  auto const by_buffer = accesses(s);
  for (auto const& list : by_buffer) {
    for (AccessEvent const& a : list) {
      Op const& oa = (*g.ctas[a.cta].ops)[a.op];
      for (AccessEvent const& b : list) {
        if (b.instance <= a.instance)
          continue;
        Op const& ob = (*g.ctas[b.cta].ops)[b.op];
        Hazard h;
        if (!conflict(oa, ob, &h))
          continue;
        bool const bad = h == Hazard::kWar ? b.time < a.time : a.visible > b.time;
        if (!bad)
          continue;
        PairKey const k{oa.buffer,
                        u_.kernel(a.instance),
                        g.ctas[a.cta].path,
                        a.op,
                        u_.iteration(b.instance) - u_.iteration(a.instance),
                        u_.kernel(b.instance),
                        g.ctas[b.cta].path,
                        b.op};
        if (!found.count(k))
          found[k] = {k, h, a, b};
      }
    }
  }
  std::vector<HazardEvent> out;
  for (auto& kv : found)
    out.push_back(kv.second);
  return out;
}

SimReport simulate(Chain const& c, SimOptions const& o) {
  SimReport r;
  r.bound = witness_bound(c, o.miss);
  r.schedules = o.schedules > 0 ? o.schedules : r.bound.schedules;
  Simulator const sim(c);
  Schedule s;
  std::map<PairKey, HazardStat> stats;
  std::int64_t const step = std::max<std::int64_t>(1, r.schedules / 10);
  for (std::int64_t i = 0; i < r.schedules; ++i) {
    sim.run(o.seed, i, &s);
    auto const hs = sim.hazards(s);
    if (!hs.empty())
      ++r.stale_schedules;
    for (HazardEvent const& h : hs) {
      HazardStat& st = stats[h.key];
      if (st.schedules++ == 0) {
        st.key = h.key;
        st.hazard = h.hazard;
        st.first_schedule = i;
        st.first = h;
      }
    }
    if (o.progress && ((i + 1) % step == 0 || i + 1 == r.schedules))
      o.progress(i + 1, r.schedules);
  }
  for (auto& kv : stats)
    r.hazards.push_back(kv.second);
  return r;
}

namespace {

std::string access_of(Chain const& c, Schedule const& s, AccessEvent const& a) {
  return access_text(c, a.instance, s.graph.ctas[a.cta].path, a.op) + " (CTA " +
         std::to_string(s.graph.ctas[a.cta].index) + ")";
}

} // namespace

std::string hazard_text(Chain const& c, HazardEvent const& h) {
  std::string const first = access_text(c, h.first.instance, h.key.path_a, h.key.op_a);
  std::string const second = access_text(c, h.second.instance, h.key.path_b, h.key.op_b);
  std::string const writer = instance_name(c, h.first.instance);
  std::string const buf = c.buffers[h.key.buffer];
  switch (h.hazard) {
  case Hazard::kRaw:
    return "stale read: " + second + " at " + fmt(h.second.time) + "; version " +
           std::to_string(h.first.version) + " of " + buf + ", written by " + writer + " at " +
           fmt(h.first.time) + ", is visible only at " + fmt(h.first.visible);
  case Hazard::kWar:
    return "premature overwrite: " + second + " (version " + std::to_string(h.second.version) +
           ") at " + fmt(h.second.time) + ", before " + first + " at " + fmt(h.first.time);
  case Hazard::kWaw:
    return "lost write: " + second + " (version " + std::to_string(h.second.version) + ") at " +
           fmt(h.second.time) + ", before version " + std::to_string(h.first.version) +
           ", written by " + writer + " at " + fmt(h.first.time) + ", is visible at " +
           fmt(h.first.visible) + ": the older version may land last";
  }
  return "?";
}

void print_witness(std::ostream& os, Chain const& c, Schedule const& s, HazardEvent const& h) {
  EventGraph const& g = s.graph;
  os << "    schedule " << s.index << (s.pivot_mode ? ", delaying " + s.pivot : ", free delays")
     << ":\n";
  for (int m = h.first.instance; m <= h.second.instance; ++m) {
    os << "      " << instance_name(c, m) << ": launch " << fmt(s.time[g.launch[m]])
       << ", triggered " << fmt(s.time[g.trigger[m]]) << ", complete " << fmt(s.time[g.complete[m]])
       << "\n";
    for (int ci = g.cta_begin[m]; ci < g.cta_begin[m + 1]; ++ci) {
      CtaNodes const& cn = g.ctas[ci];
      os << "        CTA " << cn.index << " path " << cn.path << ": start "
         << fmt(s.time[cn.start]);
      for (std::size_t j = 0; j < cn.ops->size(); ++j) {
        bool const mark = (ci == h.first.cta && static_cast<int>(j) == h.first.op) ||
                          (ci == h.second.cta && static_cast<int>(j) == h.second.op);
        os << ", " << (mark ? "*" : "") << op_text(c, (*cn.ops)[j]) << " "
           << fmt(s.time[g.op_node(ci, static_cast<int>(j))]);
      }
      os << ", exit " << fmt(s.time[cn.exit]) << "\n";
    }
  }
  os << "      * " << access_of(c, s, h.first) << "\n      * " << access_of(c, s, h.second) << "\n";
}

void write_timeline(std::string const& file_path, std::string const& group, Chain const& c,
                    Schedule const& s, std::uint64_t seed) {
  EventGraph const& g = s.graph;
  auto const ns = [&](int node) {
    return static_cast<std::int64_t>(std::llround(s.time[node] * 1e3));
  };
  std::vector<std::int64_t> kernel, cta, path, start, wait, trig, end;
  for (std::size_t ci = 0; ci < g.ctas.size(); ++ci) {
    CtaNodes const& cn = g.ctas[ci];
    kernel.push_back(cn.instance);
    cta.push_back(cn.index);
    path.push_back(cn.path);
    start.push_back(ns(cn.start));
    int const w = first_of(*cn.ops, OpKind::kWait);
    int const t = first_of(*cn.ops, OpKind::kTrigger);
    wait.push_back(w < 0 ? -1 : ns(g.op_node(static_cast<int>(ci), w)));
    trig.push_back(t < 0 ? -1 : ns(g.op_node(static_cast<int>(ci), t)));
    end.push_back(ns(cn.exit));
  }
  std::vector<std::int64_t> launch, complete;
  std::string names;
  for (std::size_t m = 0; m < g.launch.size(); ++m) {
    launch.push_back(ns(g.launch[m]));
    complete.push_back(ns(g.complete[m]));
    names += (m ? "," : "") + instance_name(c, static_cast<int>(m));
  }
  std::filesystem::path const parent = std::filesystem::path(file_path).parent_path();
  if (!parent.empty())
    std::filesystem::create_directories(parent);
  auto file = h5::ResultWriter::create(file_path, h5::collect_provenance(seed));
  std::vector<std::size_t> const rows{kernel.size()}, insts{launch.size()};
  file.write_array(group, "kernel", kernel, rows);
  file.write_array(group, "cta", cta, rows);
  file.write_array(group, "path", path, rows);
  file.write_array(group, "start_ns", start, rows);
  file.write_array(group, "wait_ns", wait, rows);
  file.write_array(group, "trigger_ns", trig, rows);
  file.write_array(group, "end_ns", end, rows);
  file.write_array(group, "launch_ns", launch, insts);
  file.write_array(group, "complete_ns", complete, insts);
  file.set_attr(group, "kernels", names);
  file.set_attr(group, "chain", c.name);
  file.set_attr(group, "chain_file", c.origin);
  file.set_attr(group, "schedule", std::to_string(s.index));
  file.set_attr(group, "schedule_mode", s.pivot_mode ? "pivot: delays " + s.pivot : "free");
  file.set_attr(group, "time_unit", "simulated time: 1 unit is written as 1000 ns");
  file.set_attr(group, "source", "moefin simulate");
  file.commit();
}

} // namespace moefin::pdl
