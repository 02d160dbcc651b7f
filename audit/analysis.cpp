#include "audit/analysis.hpp"

#include "audit/cfg.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace moefin::audit {

char const* access_kind_name(AccessKind k) {
  switch (k) {
  case AccessKind::kRead:
    return "read";
  case AccessKind::kWrite:
    return "write";
  case AccessKind::kAtomic:
    return "atomic";
  }
  return "?";
}

namespace {

// kSync: any other barrier or mbarrier instruction (BAR with a count or a name, SYNCS.*): a point
// where another thread's wait may come to order this thread.
enum class Site : std::uint8_t { kNone, kWait, kTrigger, kExit, kBarrier, kSync, kAccess };

struct MemInfo {
  bool is = false;
  AccessKind kind = AccessKind::kRead;
  bool descriptor = false;
  bool generic = false; // LD/ST/ATOM: global only when the address comes from a parameter
  int mem = -1;         // operand index of the address
};

MemInfo mem_info(Instr const& ins) {
  MemInfo m;
  std::string const& op = ins.op;
  auto mem_operand = [&](bool last) {
    int found = -1;
    for (std::size_t i = 0; i < ins.ops.size(); ++i)
      if (ins.ops[i].kind == Operand::Kind::kMem) {
        found = static_cast<int>(i);
        if (!last)
          break;
      }
    return found;
  };
  if (op == "LDG") {
    m.is = true;
    m.mem = mem_operand(false);
  } else if (op == "STG") {
    m.is = true;
    m.kind = AccessKind::kWrite;
    m.mem = mem_operand(false);
  } else if (op == "ATOMG" || op == "REDG" || (op == "RED" && !ins.has_mod("SHARED"))) {
    m.is = true;
    m.kind = AccessKind::kAtomic;
    m.mem = mem_operand(false);
  } else if (op == "LDGSTS") {
    m.is = true; // cp.async: global source, shared destination
    m.mem = mem_operand(true);
  } else if (op == "LD" || op == "ST" || op == "ATOM") {
    m.is = true;
    m.generic = true;
    m.kind = op == "LD" ? AccessKind::kRead : op == "ST" ? AccessKind::kWrite : AccessKind::kAtomic;
    m.mem = mem_operand(false);
  } else if (op == "UTMALDG" || op == "UTMASTG" || op == "UTMAREDG") {
    m.is = true;
    m.descriptor = true;
    m.kind = op == "UTMALDG"   ? AccessKind::kRead
             : op == "UTMASTG" ? AccessKind::kWrite
                               : AccessKind::kAtomic;
    m.mem = mem_operand(true); // [smem], [descriptor]
  } else if (op == "UBLKCP") {
    m.is = true; // UBLKCP.S.G [smem], [global], size; UBLKCP.G.S [global], [smem], size
    bool const to_global = ins.has_mod("G") && ins.opcode.find(".G.S") != std::string::npos;
    m.kind = to_global ? AccessKind::kWrite : AccessKind::kRead;
    int first = -1, second = -1;
    for (std::size_t i = 0; i < ins.ops.size(); ++i)
      if (ins.ops[i].kind == Operand::Kind::kMem)
        (first < 0 ? first : second) = static_cast<int>(i);
    m.mem = to_global ? first : second;
  } else if (op == "UBLKRED") {
    m.is = true;
    m.kind = AccessKind::kAtomic;
    m.mem = mem_operand(false);
  }
  if (m.is && m.mem < 0)
    m.is = false;
  return m;
}

bool full_barrier(Instr const& ins) {
  // bar.sync 0 without a thread count (__syncthreads): every thread of the CTA.
  if (ins.op != "BAR" || !(ins.has_mod("SYNC") || ins.has_mod("SYNCALL")))
    return false;
  if (ins.has_mod("SYNCALL"))
    return true;
  return ins.ops.size() == 1 && ins.ops[0].kind == Operand::Kind::kImm && ins.ops[0].imm == 0;
}

Site site_of(Instr const& ins, int context) {
  if (ins.op == "ACQBULK")
    return Site::kWait;
  if (ins.op == "PREEXIT")
    return Site::kTrigger;
  if (ins.op == "EXIT" || ins.op == "KILL" || (ins.op == "RET" && context == 0))
    return Site::kExit;
  if (full_barrier(ins))
    return Site::kBarrier;
  if (ins.op == "BAR" || ins.op.rfind("SYNCS", 0) == 0)
    return Site::kSync;
  if (mem_info(ins).is)
    return Site::kAccess;
  return Site::kNone;
}

struct SiteRec {
  std::size_t index = 0;
  Site site = Site::kNone;
  PredValue guard;
  Value base, ubase; // address registers (accesses)
};

long long site_id(std::size_t node, std::size_t offset) {
  return (static_cast<long long>(node) << 20) | static_cast<long long>(offset);
}

/// One pass of the dataflow (the thread-level one, or one warp's) and its path facts.
struct Pass {
  Cfg const& cfg;
  Dataflow df;
  std::vector<std::vector<SiteRec>> sites; // per node
  std::vector<char> mnw, mw, mt;           // flags entering each node
  std::vector<char> mns; // may not have waited nor passed any barrier (entering each node)
  std::vector<long long> last_barrier;     // per node entry: -2 undef, -1 none, else site id

  /// `keep_states`: keep the dataflow's per-node states (find_switches replays them).
  Pass(Cfg const& c, Environment const& env, bool keep_states = false)
      : cfg(c), df(run_dataflow(c, env)) {
    std::size_t const n = cfg.nodes.size();
    sites.resize(n);
    for (std::size_t id = 0; id < n; ++id) {
      if (!df.reachable(static_cast<int>(id)))
        continue;
      Node const& nd = cfg.nodes[id];
      State s = df.in[id];
      for (std::size_t i = nd.begin; i < nd.end; ++i) {
        Instr const& ins = nd.fn->code[i];
        Site const st = site_of(ins, nd.context);
        if (st != Site::kNone) {
          SiteRec r;
          r.index = i;
          r.site = st;
          r.guard = guard_value(ins, s);
          if (st == Site::kAccess) {
            // Only a guarded access needs its own view (a copy of the whole state).
            std::optional<State> view;
            if (ins.guarded())
              view = guarded_view(ins, s);
            State const& sv = view ? *view : s;
            MemInfo const m = mem_info(ins);
            Operand const& mo = ins.ops[static_cast<std::size_t>(m.mem)];
            if (mo.base_reg >= 0) {
              Operand b;
              b.kind = Operand::Kind::kReg;
              b.file = mo.base_file;
              b.reg = mo.base_reg;
              r.base = operand_value(b, env, sv);
            }
            if (mo.ubase_reg >= 0) {
              Operand b;
              b.kind = Operand::Kind::kReg;
              b.file = RegFile::kUR;
              b.reg = mo.ubase_reg;
              r.ubase = operand_value(b, env, sv);
            }
          }
          sites[id].push_back(r);
        }
        step(ins, env, s);
      }
    }
    flags();
    if (!keep_states)
      df.drop_states();
  }

  bool feasible_edge(std::size_t id, std::size_t k) const { return df.feasible[id][k]; }

  static bool may(PredValue const& g) { return g.kind != PredValue::kFalse; }
  static bool must(PredValue const& g) { return g.kind == PredValue::kTrue; }

  void flags() {
    std::size_t const n = cfg.nodes.size();
    mnw.assign(n, 0);
    mw.assign(n, 0);
    mt.assign(n, 0);
    mns.assign(n, 0);
    last_barrier.assign(n, -2);
    if (n == 0 || !df.reachable(0))
      return;
    mnw[0] = 1;
    mns[0] = 1;
    last_barrier[0] = -1;
    std::deque<std::size_t> work = {0};
    std::vector<char> queued(n, 0);
    queued[0] = 1;
    while (!work.empty()) {
      std::size_t const id = work.front();
      work.pop_front();
      queued[id] = 0;
      char a = mnw[id], b = mw[id], c = mt[id], d = mns[id];
      long long lb = last_barrier[id];
      for (SiteRec const& r : sites[id]) {
        if (r.site == Site::kWait) {
          if (must(r.guard))
            a = d = 0;
          if (may(r.guard))
            b = 1;
        } else if (r.site == Site::kTrigger && may(r.guard)) {
          c = 1;
        } else if (r.site == Site::kBarrier) {
          if (must(r.guard))
            lb = site_id(id, r.index - cfg.nodes[id].begin);
          else if (may(r.guard))
            lb = -1;
          if (must(r.guard))
            d = 0;
        } else if (r.site == Site::kSync && must(r.guard)) {
          d = 0;
        }
      }
      Node const& nd = cfg.nodes[id];
      for (std::size_t k = 0; k < nd.succ.size(); ++k) {
        if (!feasible_edge(id, k))
          continue;
        auto const to = static_cast<std::size_t>(nd.succ[k].to);
        bool changed = false;
        if (a && !mnw[to]) {
          mnw[to] = 1;
          changed = true;
        }
        if (b && !mw[to]) {
          mw[to] = 1;
          changed = true;
        }
        if (c && !mt[to]) {
          mt[to] = 1;
          changed = true;
        }
        if (d && !mns[to]) {
          mns[to] = 1;
          changed = true;
        }
        long long const old = last_barrier[to];
        long long const merged = old == -2 ? lb : (old == lb ? old : -1);
        if (merged != old) {
          last_barrier[to] = merged;
          changed = true;
        }
        if ((changed || old == -2) && !queued[to]) {
          queued[to] = 1;
          work.push_back(to);
        }
      }
    }
  }

  /// BFS from the entry over thread paths that have not waited, to (node, index).
  std::vector<std::uint32_t> witness(std::size_t target, std::size_t index) const {
    std::size_t const n = cfg.nodes.size();
    auto blocks_before = [&](std::size_t id, std::size_t limit) {
      for (SiteRec const& r : sites[id])
        if (r.index < limit && r.site == Site::kWait && must(r.guard))
          return true;
      return false;
    };
    std::vector<int> parent(n, -2);
    std::deque<std::size_t> q = {0};
    parent[0] = -1;
    while (!q.empty()) {
      std::size_t const id = q.front();
      q.pop_front();
      if (id == target && !blocks_before(id, index))
        break;
      if (blocks_before(id, cfg.nodes[id].end))
        continue;
      Node const& nd = cfg.nodes[id];
      for (std::size_t k = 0; k < nd.succ.size(); ++k) {
        auto const to = static_cast<std::size_t>(nd.succ[k].to);
        if (feasible_edge(id, k) && parent[to] == -2) {
          parent[to] = static_cast<int>(id);
          q.push_back(to);
        }
      }
    }
    std::vector<std::uint32_t> path;
    if (parent[target] == -2)
      return path;
    for (int id = static_cast<int>(target); id >= 0; id = parent[static_cast<std::size_t>(id)])
      path.push_back(cfg.nodes[static_cast<std::size_t>(id)]
                         .fn->code[cfg.nodes[static_cast<std::size_t>(id)].begin]
                         .addr);
    std::reverse(path.begin(), path.end());
    std::uint32_t const at = cfg.nodes[target].fn->code[index].addr;
    if (path.empty() || path.back() != at)
      path.push_back(at);
    return path;
  }

  /// Nodes reachable from (node, index) onwards; `whole_start` says whether the start node
  /// itself is re-entered (then all of it counts).
  std::vector<char> reach_from(std::size_t start) const {
    std::vector<char> seen(cfg.nodes.size(), 0);
    std::deque<std::size_t> q;
    Node const& nd = cfg.nodes[start];
    for (std::size_t k = 0; k < nd.succ.size(); ++k)
      if (feasible_edge(start, k)) {
        auto const to = static_cast<std::size_t>(nd.succ[k].to);
        if (!seen[to]) {
          seen[to] = 1;
          q.push_back(to);
        }
      }
    while (!q.empty()) {
      std::size_t const id = q.front();
      q.pop_front();
      Node const& m = cfg.nodes[id];
      for (std::size_t k = 0; k < m.succ.size(); ++k)
        if (feasible_edge(id, k)) {
          auto const to = static_cast<std::size_t>(m.succ[k].to);
          if (!seen[to]) {
            seen[to] = 1;
            q.push_back(to);
          }
        }
    }
    return seen;
  }

  /// Whether a thread at (node, index) can exit without executing the barrier at
  /// (barrier_node, barrier_index). A basic block ends at an EXIT, so entering the barrier's
  /// block executes the barrier.
  bool exits_avoiding(std::size_t node, std::size_t index, std::size_t barrier_node,
                      std::size_t barrier_index) const {
    if (node == barrier_node && index < barrier_index)
      return false;
    auto exit_in = [&](std::size_t id, std::size_t from) {
      for (SiteRec const& r : sites[id])
        if (r.index >= from && r.site == Site::kExit && may(r.guard))
          return true;
      return false;
    };
    if (exit_in(node, index))
      return true;
    std::vector<char> seen(cfg.nodes.size(), 0);
    std::deque<std::size_t> q;
    auto push_succ = [&](std::size_t id) {
      Node const& m = cfg.nodes[id];
      for (std::size_t k = 0; k < m.succ.size(); ++k)
        if (feasible_edge(id, k)) {
          auto const to = static_cast<std::size_t>(m.succ[k].to);
          if (!seen[to] && to != barrier_node) {
            seen[to] = 1;
            q.push_back(to);
          }
        }
    };
    push_succ(node);
    while (!q.empty()) {
      std::size_t const id = q.front();
      q.pop_front();
      if (exit_in(id, cfg.nodes[id].begin))
        return true;
      push_succ(id);
    }
    return false;
  }
};

struct InstrKey {
  SassFunction const* fn;
  std::size_t index;
  friend bool operator<(InstrKey const& a, InstrKey const& b) {
    return a.fn != b.fn ? a.fn < b.fn : a.index < b.index;
  }
};

/// Thread-level facts of one pass.
struct PassFacts {
  bool has_wait = false, has_trigger = false;
  bool exit_without_wait = false, trigger_without_wait = false;
  std::vector<std::uint32_t> exit_witness, trigger_witness;
};

PassFacts pass_facts(Pass const& p) {
  PassFacts f;
  std::size_t ex_node = 0, ex_idx = 0, tr_node = 0, tr_idx = 0;
  for (std::size_t id = 0; id < p.cfg.nodes.size(); ++id) {
    if (!p.df.reachable(static_cast<int>(id)))
      continue;
    char a = p.mnw[id];
    for (SiteRec const& r : p.sites[id]) {
      if (r.site == Site::kWait) {
        if (Pass::may(r.guard))
          f.has_wait = true;
        if (Pass::must(r.guard))
          a = 0;
      } else if (r.site == Site::kTrigger && Pass::may(r.guard)) {
        f.has_trigger = true;
        if (a && !f.trigger_without_wait) {
          f.trigger_without_wait = true;
          tr_node = id;
          tr_idx = r.index;
        }
      } else if (r.site == Site::kExit && Pass::may(r.guard) && a && !f.exit_without_wait) {
        f.exit_without_wait = true;
        ex_node = id;
        ex_idx = r.index;
      }
    }
  }
  if (f.exit_without_wait)
    f.exit_witness = p.witness(ex_node, ex_idx);
  if (f.trigger_without_wait)
    f.trigger_witness = p.witness(tr_node, tr_idx);
  return f;
}

/// Runtime PDL switches: conditional branches on a parameter comparison (value unknown) of
/// which exactly one side reaches a wait.
std::vector<PdlSwitch> find_switches(Pass const& p, Environment const& env) {
  std::vector<PdlSwitch> out;
  std::size_t const n = p.cfg.nodes.size();
  // Nodes from which a wait is reachable (a wait in the node itself counts).
  std::vector<char> reaches(n, 0);
  for (std::size_t id = 0; id < n; ++id)
    for (SiteRec const& r : p.sites[id])
      if (r.site == Site::kWait && Pass::may(r.guard))
        reaches[id] = 1;
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t id = 0; id < n; ++id) {
      if (reaches[id] || !p.df.reachable(static_cast<int>(id)))
        continue;
      Node const& nd = p.cfg.nodes[id];
      for (std::size_t k = 0; k < nd.succ.size(); ++k)
        if (p.feasible_edge(id, k) && reaches[static_cast<std::size_t>(nd.succ[k].to)]) {
          reaches[id] = 1;
          changed = true;
          break;
        }
    }
  }
  std::set<std::uint32_t> seen;
  for (std::size_t id = 0; id < n; ++id) {
    if (!p.df.reachable(static_cast<int>(id)))
      continue;
    Node const& nd = p.cfg.nodes[id];
    Instr const& last = nd.last();
    if (last.op != "BRA" || nd.succ.size() != 2)
      continue;
    State s = p.df.in[id];
    for (std::size_t i = nd.begin; i + 1 < nd.end; ++i)
      step(nd.fn->code[i], env, s);
    PredValue const c = branch_condition(last, s);
    if (c.kind != PredValue::kCmp)
      continue;
    int taken = -1, fall = -1;
    for (std::size_t k = 0; k < 2; ++k)
      (nd.succ[k].kind == EdgeKind::kTaken ? taken : fall) = nd.succ[k].to;
    if (taken < 0 || fall < 0)
      continue;
    bool const rt = reaches[static_cast<std::size_t>(taken)] != 0;
    bool const rf = reaches[static_cast<std::size_t>(fall)] != 0;
    if (rt == rf || !seen.insert(last.addr).second)
      continue;
    PdlSwitch sw;
    sw.branch = last.addr;
    sw.offset = c.offset;
    sw.size = c.size;
    sw.op = c.op;
    sw.k = c.k;
    sw.is_unsigned = c.is_unsigned;
    // The condition holds on the taken edge: it is (cmp != neg).
    sw.waits_when = rt ? !c.neg : c.neg;
    out.push_back(sw);
  }
  return out;
}

bool switch_outcome(PdlSwitch const& sw, Environment const& env, bool* outcome) {
  std::uint64_t v = 0;
  if (!env.param_value(sw.offset, sw.size, &v))
    return false;
  auto const x = static_cast<std::uint32_t>(v);
  bool r = false;
  auto const sx = static_cast<std::int32_t>(x), sk = static_cast<std::int32_t>(sw.k);
  switch (sw.op) {
  case PredValue::kEq:
    r = x == sw.k;
    break;
  case PredValue::kNe:
    r = x != sw.k;
    break;
  case PredValue::kLt:
    r = sw.is_unsigned ? x < sw.k : sx < sk;
    break;
  case PredValue::kLe:
    r = sw.is_unsigned ? x <= sw.k : sx <= sk;
    break;
  case PredValue::kGt:
    r = sw.is_unsigned ? x > sw.k : sx > sk;
    break;
  case PredValue::kGe:
    r = sw.is_unsigned ? x >= sw.k : sx >= sk;
    break;
  }
  *outcome = r;
  return true;
}

} // namespace

KernelFacts analyze_kernel(SassModule const& module, SassFunction const& kernel,
                           Environment const& env_in, AnalysisOptions const& opt) {
  KernelFacts f;
  f.name = kernel.name;
  f.arch = module.arch;
  Cfg const cfg = build_cfg(module, kernel);
  for (auto const& nd : cfg.nodes)
    f.instructions += nd.end - nd.begin;
  f.notes = cfg.notes;
  if (cfg.indirect_unannotated)
    f.notes.push_back(std::to_string(cfg.indirect_unannotated) +
                      " indirect branch(es) without annotated targets: taken to reach every "
                      "labelled instruction");

  // Runtime PDL switches: found with the parameters' values unknown, then decided by an
  // assumed value or, by default, towards the wait.
  Environment env = env_in;
  {
    Environment blind = env_in;
    blind.known.clear();
    blind.constraints.clear();
    Pass const detect(cfg, blind, true);
    for (PdlSwitch sw : find_switches(detect, blind)) {
      bool outcome = false;
      if (switch_outcome(sw, env_in, &outcome)) {
        sw.by_assumption = true;
        sw.taken_waits = outcome == sw.waits_when;
      } else if (opt.pdl_default) {
        Constraint c;
        c.offset = sw.offset;
        c.size = static_cast<std::uint8_t>(sw.size);
        c.op = sw.op;
        c.is_unsigned = sw.is_unsigned;
        c.k = sw.k;
        c.truth = sw.waits_when;
        env.constraints.push_back(c);
        sw.taken_waits = true;
      } else {
        continue;
      }
      f.switches.push_back(sw);
    }
  }

  std::vector<Pass> passes;
  passes.emplace_back(cfg, env);
  int const warps = opt.threads > 0 ? std::min(32, (opt.threads + 31) / 32) : 0;
  PassFacts const thread = pass_facts(passes[0]);
  std::vector<PassFacts> per_warp;
  if (warps > 0) {
    for (int w = 0; w < warps; ++w) {
      Environment ew = env;
      ew.warp = w;
      passes.emplace_back(cfg, ew);
      per_warp.push_back(pass_facts(passes.back()));
    }
    f.warps = warps;
  }
  // The passes that describe the CTA: one per warp when known, else the thread-level one.
  std::size_t const first = warps > 0 ? 1 : 0;
  std::vector<PassFacts> const& use = warps > 0 ? per_warp : std::vector<PassFacts>{thread};

  f.has_wait = false;
  f.has_trigger = false;
  bool some_warp_waits = false;
  for (std::size_t i = 0; i < use.size(); ++i) {
    PassFacts const& pf = use[i];
    f.has_wait = f.has_wait || pf.has_wait;
    f.has_trigger = f.has_trigger || pf.has_trigger;
    if (pf.trigger_without_wait && !f.trigger_before_wait) {
      f.trigger_before_wait = true;
      f.trigger_without_wait = pf.trigger_witness;
    }
    if (!pf.exit_without_wait) {
      some_warp_waits = true;
      if (warps > 0)
        f.waiting_warps.push_back(static_cast<int>(i));
    } else if (f.exit_without_wait.empty()) {
      f.exit_without_wait = pf.exit_witness;
    }
  }
  // Thread level: every path waits. CTA level: some warp waits on all of its paths.
  f.waits_every_path = warps > 0 ? some_warp_waits : !thread.exit_without_wait;
  if (f.waits_every_path)
    f.exit_without_wait.clear();
  f.wait_before_trigger = f.waits_every_path && !f.trigger_before_wait;

  // Trigger sites of the CTA (every pass that describes it) and the barrier guarding each.
  struct TriggerSite {
    InstrKey barrier{nullptr, 0};
    bool guarded = false;
  };
  std::vector<TriggerSite> triggers;
  for (std::size_t pi = first; pi < passes.size(); ++pi) {
    Pass const& p = passes[pi];
    for (std::size_t id = 0; id < cfg.nodes.size(); ++id) {
      if (!p.df.reachable(static_cast<int>(id)))
        continue;
      long long lb = p.last_barrier[id];
      for (SiteRec const& r : p.sites[id]) {
        if (r.site == Site::kBarrier) {
          if (Pass::must(r.guard))
            lb = site_id(id, r.index - cfg.nodes[id].begin);
          else if (Pass::may(r.guard))
            lb = -1;
        } else if (r.site == Site::kTrigger && Pass::may(r.guard)) {
          TriggerSite t;
          if (lb >= 0) {
            std::size_t const bn = static_cast<std::size_t>(lb >> 20);
            t.barrier = {cfg.nodes[bn].fn,
                         cfg.nodes[bn].begin + static_cast<std::size_t>(lb & 0xfffff)};
            t.guarded = true;
          }
          triggers.push_back(t);
        }
      }
    }
  }

  // Accesses, merged over calling contexts and passes.
  std::map<InstrKey, Access> acc;
  for (std::size_t pi = first; pi < passes.size(); ++pi) {
    Pass const& p = passes[pi];
    // Nodes holding each guarding barrier, and what a thread can do after it, in this pass.
    std::map<InstrKey, std::vector<std::pair<std::size_t, std::vector<char>>>> after_barrier;
    for (auto const& t : triggers)
      if (t.guarded && !after_barrier.count(t.barrier)) {
        auto& v = after_barrier[t.barrier];
        for (std::size_t id = 0; id < cfg.nodes.size(); ++id) {
          Node const& nd = cfg.nodes[id];
          if (nd.fn == t.barrier.fn && t.barrier.index >= nd.begin && t.barrier.index < nd.end &&
              p.df.reachable(static_cast<int>(id)))
            v.emplace_back(id, p.reach_from(id));
        }
      }
    for (std::size_t id = 0; id < cfg.nodes.size(); ++id) {
      if (!p.df.reachable(static_cast<int>(id)))
        continue;
      Node const& nd = cfg.nodes[id];
      char a = p.mnw[id], b = p.mw[id], c = p.mt[id], d = p.mns[id];
      for (SiteRec const& r : p.sites[id]) {
        if (r.site == Site::kWait) {
          if (Pass::must(r.guard))
            a = d = 0;
          if (Pass::may(r.guard))
            b = 1;
          continue;
        }
        if ((r.site == Site::kBarrier || r.site == Site::kSync) && Pass::must(r.guard)) {
          d = 0;
          continue;
        }
        if (r.site == Site::kTrigger) {
          if (Pass::may(r.guard))
            c = 1;
          continue;
        }
        if (r.site != Site::kAccess || !Pass::may(r.guard))
          continue;
        Instr const& ins = nd.fn->code[r.index];
        MemInfo const m = mem_info(ins);
        Value origin = r.base;
        if (m.descriptor || r.base.kind == Value::kUndef)
          origin = r.ubase;
        else if (r.ubase.kind != Value::kUndef)
          origin.add_origins(r.ubase);
        if (m.generic && origin.norig == 0)
          continue; // a generic access not from a parameter: shared or local as likely
        Access& x = acc[{nd.fn, r.index}];
        if (x.opcode.empty()) {
          x.addr = ins.addr;
          x.opcode = ins.opcode;
          x.kind = m.kind;
          x.descriptor = m.descriptor;
        }
        x.guarded = x.guarded || !Pass::must(r.guard);
        if (origin.norig == Value::kManyOrigins)
          x.many = true;
        else
          for (std::uint8_t k = 0; k < origin.norig; ++k)
            if (std::find(x.params.begin(), x.params.end(), origin.orig[k]) == x.params.end())
              x.params.push_back(origin.orig[k]);
        x.before_wait = x.before_wait || a;
        x.before_any_sync = x.before_any_sync || d;
        x.after_wait = x.after_wait || !a || b;
        bool late = c != 0;
        if (!late) {
          // Another thread's trigger: ordered before it only through a barrier that this
          // thread reaches after the access, on every path, and never passes before it.
          for (auto const& t : triggers) {
            if (!t.guarded) {
              late = true;
              break;
            }
            auto const& holders = after_barrier[t.barrier];
            if (holders.empty()) {
              late = true;
              break;
            }
            for (auto const& [bn, reach] : holders) {
              std::size_t const bi = t.barrier.index;
              bool const after = (bn == id && r.index > bi) || reach[id];
              if (after || p.exits_avoiding(id, r.index, bn, bi)) {
                late = true;
                break;
              }
            }
            if (late)
              break;
          }
        }
        x.after_trigger = x.after_trigger || late;
      }
    }
  }
  for (auto& [k, a] : acc) {
    std::sort(a.params.begin(), a.params.end());
    f.accesses.push_back(a);
  }
  std::sort(f.accesses.begin(), f.accesses.end(),
            [](Access const& a, Access const& b) { return a.addr < b.addr; });
  return f;
}

} // namespace moefin::audit
