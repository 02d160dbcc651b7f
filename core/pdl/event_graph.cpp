#include "core/pdl/event_graph.hpp"

namespace moefin::pdl {

Unrolled unroll(Chain const& c) {
  Unrolled u;
  u.n = static_cast<int>(c.kernels.size());
  u.iterations = c.iterations;
  u.in_edges.assign(static_cast<std::size_t>(u.size()), {});
  if (!c.graph) {
    for (int m = 1; m < u.size(); ++m) {
      bool const pdl = c.kernels[u.kernel(m)].pdl;
      u.in_edges[m].push_back({m - 1, pdl ? Port::kProgrammatic : Port::kDefault});
    }
    return u;
  }
  std::vector<bool> root(c.kernels.size(), true);
  for (Edge const& e : c.edges)
    root[e.to] = false;
  for (int r = 0; r < u.iterations; ++r) {
    for (Edge const& e : c.edges)
      u.in_edges[r * u.n + e.to].push_back({r * u.n + e.from, e.port});
    if (r == 0)
      continue;
    for (int k = 0; k < u.n; ++k)
      if (root[k])
        for (int j = 0; j < u.n; ++j)
          u.in_edges[r * u.n + k].push_back({(r - 1) * u.n + j, Port::kDefault});
  }
  return u;
}

std::string instance_name(Chain const& c, int m) {
  int const n = static_cast<int>(c.kernels.size());
  std::string s = c.kernels[m % n].name;
  if (m >= n)
    s += "@" + std::to_string(m / n);
  return s;
}

void EventGraph::build(std::vector<std::vector<InEdge>> const& in_edges,
                       std::vector<InstancePlan> const& plans) {
  nodes.clear();
  preds.clear();
  pred_begin.clear();
  ctas.clear();
  std::size_t const ni = plans.size();
  launch.assign(ni, -1);
  trigger.assign(ni, -1);
  complete.assign(ni, -1);
  cta_begin.assign(ni + 1, 0);

  auto add = [&](NodeKind kind, int inst, int cta, int op) {
    nodes.push_back({kind, inst, cta, op});
    pred_begin.push_back(static_cast<int>(preds.size()));
    return static_cast<int>(nodes.size()) - 1;
  };

  for (std::size_t mi = 0; mi < ni; ++mi) {
    int const m = static_cast<int>(mi);
    launch[m] = add(NodeKind::kLaunch, m, -1, -1);
    for (InEdge const& e : in_edges[m]) {
      if (e.port == Port::kProgrammatic)
        preds.push_back(trigger[e.from]);
      else if (e.port == Port::kDefault)
        preds.push_back(complete[e.from]);
      else
        for (int c = cta_begin[e.from]; c < cta_begin[e.from + 1]; ++c)
          preds.push_back(ctas[c].start);
    }
    cta_begin[m] = static_cast<int>(ctas.size());
    InstancePlan const& plan = plans[m];
    for (std::size_t ci = 0; ci < plan.paths.size(); ++ci) {
      Path const& path = *plan.paths[ci];
      int const cta = static_cast<int>(ctas.size());
      CtaNodes cn;
      cn.instance = m;
      cn.index = static_cast<int>(ci);
      cn.path = plan.path_index.empty() ? -1 : plan.path_index[ci];
      cn.ops = &path;
      cn.start = add(NodeKind::kStart, m, cta, -1);
      preds.push_back(launch[m]);
      int prev = cn.start;
      int trig = -1;
      for (std::size_t j = 0; j < path.size(); ++j) {
        int const v = add(NodeKind::kOp, m, cta, static_cast<int>(j));
        preds.push_back(prev);
        if (path[j].kind == OpKind::kWait)
          for (InEdge const& e : in_edges[m])
            if (e.port == Port::kProgrammatic)
              preds.push_back(complete[e.from]);
        if (path[j].kind == OpKind::kTrigger && trig < 0)
          trig = v;
        prev = v;
      }
      cn.exit = add(NodeKind::kExit, m, cta, -1);
      preds.push_back(prev);
      cn.trigger = trig >= 0 ? trig : cn.exit;
      ctas.push_back(cn);
    }
    cta_begin[m + 1] = static_cast<int>(ctas.size());
    trigger[m] = add(NodeKind::kTrigger, m, -1, -1);
    for (int c = cta_begin[m]; c < cta_begin[m + 1]; ++c)
      preds.push_back(ctas[c].trigger);
    complete[m] = add(NodeKind::kComplete, m, -1, -1);
    for (int c = cta_begin[m]; c < cta_begin[m + 1]; ++c)
      preds.push_back(ctas[c].exit);
  }
  pred_begin.push_back(static_cast<int>(preds.size()));
}

int EventGraph::visible_node(int cta, int op) const {
  Path const& p = *ctas[cta].ops;
  for (std::size_t j = static_cast<std::size_t>(op) + 1; j < p.size(); ++j)
    if (p[j].kind == OpKind::kFence)
      return op_node(cta, static_cast<int>(j));
  return complete[ctas[cta].instance];
}

WaitClass wait_class(Path const& p) {
  int const w = first_of(p, OpKind::kWait);
  if (w < 0)
    return WaitClass::kNoWait;
  int const t = first_of(p, OpKind::kTrigger);
  return t >= 0 && t < w ? WaitClass::kTriggersFirst : WaitClass::kWaitsBeforeTrigger;
}

char const* wait_class_text(WaitClass c) {
  switch (c) {
  case WaitClass::kNoWait:
    return "never waits";
  case WaitClass::kTriggersFirst:
    return "triggers before its wait";
  case WaitClass::kWaitsBeforeTrigger:
    return "waits before it triggers";
  }
  return "?";
}

} // namespace moefin::pdl
