#include "audit/report.hpp"

#include "audit/text.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cxxabi.h>
#include <iomanip>
#include <map>
#include <memory>
#include <set>
#include <sstream>

namespace moefin::audit {

namespace {

std::string join(std::vector<std::string> const& v, char const* sep = ", ") {
  std::string s;
  for (auto const& x : v)
    s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string path_text(std::vector<std::uint32_t> const& p) {
  std::vector<std::string> parts;
  std::size_t const n = p.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (n > 10 && i == 4) {
      parts.push_back("... (" + std::to_string(n - 8) + " blocks)");
      i = n - 5;
      continue;
    }
    parts.push_back(hex(p[i]));
  }
  return join(parts, " -> ");
}

} // namespace

std::string short_name(std::string const& symbol) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(
      abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !d)
    return symbol;
  std::string s = d.get();
  // Drop the parameter list: the last top-level '(' group.
  int depth = 0;
  for (std::size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')')
      ++depth;
    else if (s[i] == '(' && --depth == 0) {
      s = s.substr(0, i);
      break;
    }
  }
  if (s.rfind("void ", 0) == 0)
    s = s.substr(5);
  return s;
}

std::string trigger_text(KernelFacts const& f) {
  if (!f.has_trigger)
    return "none (implicit at exit)";
  return f.trigger_before_wait ? "before the wait" : "after the wait";
}

std::vector<std::string> access_names(AuditedKernel const& k,
                                      std::function<bool(Access const&)> const& pick) {
  std::map<std::uint32_t, std::string> named;
  bool untraced = false;
  for (Access const& a : k.facts.accesses) {
    if (!pick(a))
      continue;
    if (a.params.empty())
      untraced = true;
    for (std::uint32_t p : a.params)
      named.emplace(p, k.names.name(p) + (a.descriptor ? " (TMA)" : ""));
  }
  std::vector<std::string> out;
  for (auto const& [off, n] : named)
    out.push_back(n);
  if (untraced)
    out.push_back("(untraced address)");
  return out;
}

void print_table(std::ostream& os, std::vector<AuditedKernel> const& kernels) {
  std::vector<std::array<std::string, 6>> rows;
  rows.push_back(
      {"kernel", "arch", "waits", "wait before trigger", "pre-wait reads", "post-trigger writes"});
  for (AuditedKernel const& k : kernels) {
    KernelFacts const& f = k.facts;
    std::string waits = !f.has_wait          ? "never"
                        : f.waits_every_path ? "every path"
                                             : "NOT every path";
    std::string wbt = f.wait_before_trigger   ? (f.has_trigger ? "yes" : "yes (implicit at exit)")
                      : f.trigger_before_wait ? "NO: triggers first"
                      : !f.has_wait           ? "NO: never waits"
                                              : "NO: exits before waiting";
    auto pre = access_names(
        k, [](Access const& a) { return a.before_wait && a.kind != AccessKind::kWrite; });
    auto pre_w = access_names(
        k, [](Access const& a) { return a.before_wait && a.kind != AccessKind::kRead; });
    for (auto const& w : pre_w)
      pre.push_back(w + " (write)");
    auto post = access_names(
        k, [](Access const& a) { return a.after_trigger && a.kind != AccessKind::kRead; });
    rows.push_back({short_name(f.name), f.arch, waits, wbt, pre.empty() ? "-" : join(pre),
                    post.empty() ? "-" : join(post)});
  }
  std::array<std::size_t, 6> w{};
  for (auto const& r : rows)
    for (std::size_t i = 0; i < 5; ++i)
      w[i] = std::max(w[i], std::min<std::size_t>(r[i].size(), i == 0 ? 60 : 48));
  for (auto const& r : rows) {
    std::ostringstream line;
    for (std::size_t i = 0; i < 6; ++i) {
      std::string c = r[i];
      if (i == 0 && c.size() > 60)
        c = c.substr(0, 57) + "...";
      line << c;
      if (i < 5)
        line << std::string(w[i] > c.size() ? w[i] - c.size() + 2 : 2, ' ');
    }
    std::string s = line.str();
    s.erase(s.find_last_not_of(' ') + 1);
    os << s << "\n";
  }
  bool header = false;
  auto note = [&](AuditedKernel const& k, std::string const& text) {
    if (!header) {
      os << "notes:\n";
      header = true;
    }
    os << "  " << short_name(k.facts.name) << ": " << text << "\n";
  };
  for (AuditedKernel const& k : kernels) {
    KernelFacts const& f = k.facts;
    if (!f.has_wait && !f.has_trigger)
      note(k, "no PDL instructions (no griddepcontrol.wait or launch_dependents in the SASS; a "
              "target below sm_90 compiles them out): a PDL launch of it orders nothing");
    if (f.trigger_before_wait)
      note(k, "PREEXIT before the wait on path " + path_text(f.trigger_without_wait));
    if (f.has_wait && !f.waits_every_path)
      note(k, "exits without waiting on path " + path_text(f.exit_without_wait));
    if (f.warps > 0 && f.has_wait)
      note(k, "analysed warp by warp (" + std::to_string(f.warps) +
                  " warps); warps that wait on "
                  "every path: " +
                  (f.waiting_warps.empty() ? std::string("none") : [&] {
                    std::vector<std::string> v;
                    for (int x : f.waiting_warps)
                      v.push_back(std::to_string(x));
                    return join(v, " ");
                  }()));
    for (PdlSwitch const& s : f.switches) {
      std::ostringstream t;
      t << "runtime PDL switch at " << hex(s.branch) << ": " << k.names.name(s.offset) << " "
        << cmp_text(s.op) << " " << s.k << " decides the wait; "
        << (s.by_assumption ? std::string("by the assumed value it ") +
                                  (s.taken_waits ? "waits" : "skips the wait")
                            : std::string("assumed: a PDL launch takes the branch that waits"));
      note(k, t.str());
    }
    if (!k.hoisted.empty()) {
      std::vector<std::string> v;
      for (std::uint32_t p : k.hoisted)
        v.push_back(k.names.name(p));
      note(k, "the SASS loads " + join(v) + " before the wait; the PTX loads it after");
    }
    if (!k.assumed.empty())
      note(k, "assumed " + join(k.assumed));
    for (auto const& n : f.notes)
      note(k, n);
  }
}

namespace {

nlohmann::ordered_json access_list(AuditedKernel const& k,
                                   std::function<bool(Access const&)> const& pick) {
  // One entry per (parameter, kind): where it may run, and the instructions.
  struct Agg {
    std::string kind;
    bool descriptor = false, before = false, unsynced = false, after = false, late = false;
    bool guarded = false;
    std::vector<std::string> addrs;
    std::uint32_t offset = 0;
    bool traced = true;
  };
  std::map<std::pair<std::int64_t, std::string>, Agg> agg;
  for (Access const& a : k.facts.accesses) {
    if (!pick(a))
      continue;
    std::vector<std::int64_t> ps(a.params.begin(), a.params.end());
    if (ps.empty())
      ps.push_back(-1);
    for (std::int64_t p : ps) {
      Agg& g = agg[{p, access_kind_name(a.kind)}];
      g.kind = access_kind_name(a.kind);
      g.offset = p < 0 ? 0 : static_cast<std::uint32_t>(p);
      g.traced = p >= 0;
      g.descriptor = g.descriptor || a.descriptor;
      g.before = g.before || a.before_wait;
      g.unsynced = g.unsynced || a.before_any_sync;
      g.after = g.after || a.after_wait;
      g.late = g.late || a.after_trigger;
      g.guarded = g.guarded || a.guarded;
      if (g.addrs.size() < 8)
        g.addrs.push_back(hex(a.addr) + " " + a.opcode);
    }
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (auto const& [key, g] : agg) {
    nlohmann::ordered_json j;
    j["param"] = g.traced ? nlohmann::ordered_json(k.names.name(g.offset))
                          : nlohmann::ordered_json(nullptr);
    j["offset"] = g.traced ? nlohmann::ordered_json(g.offset) : nlohmann::ordered_json(nullptr);
    j["kind"] = g.kind;
    j["descriptor"] = g.descriptor;
    j["before_wait"] = g.before;
    j["before_any_sync"] = g.unsynced;
    j["after_wait"] = g.after;
    j["after_trigger"] = g.late;
    j["predicated"] = g.guarded;
    j["instructions"] = g.addrs;
    out.push_back(j);
  }
  return out;
}

std::vector<std::string> hex_path(std::vector<std::uint32_t> const& p) {
  std::vector<std::string> v;
  for (auto a : p)
    v.push_back(hex(a));
  return v;
}

} // namespace

nlohmann::ordered_json facts_json(AuditedKernel const& k) {
  KernelFacts const& f = k.facts;
  nlohmann::ordered_json j;
  j["name"] = f.name;
  j["short_name"] = short_name(f.name);
  j["input"] = k.input;
  j["cubin"] = k.cubin;
  j["sha256"] = k.sha256;
  j["arch"] = f.arch;
  j["instructions"] = f.instructions;
  nlohmann::ordered_json params = nlohmann::ordered_json::array();
  for (ParamInfo const& p : k.params)
    params.push_back({{"ordinal", p.ordinal},
                      {"offset", p.offset},
                      {"size", p.size},
                      {"name", k.names.name(p.offset)}});
  j["params"] = params;
  j["param_cbank_offset"] = k.param_base;
  j["assume"] = k.assumed;
  j["warps"] = f.warps;
  j["waiting_warps"] = f.waiting_warps;
  j["has_wait"] = f.has_wait;
  j["has_trigger"] = f.has_trigger;
  j["waits_every_path"] = f.waits_every_path;
  j["wait_before_trigger"] = f.wait_before_trigger;
  j["trigger"] = trigger_text(f);
  j["exit_without_wait"] = hex_path(f.exit_without_wait);
  j["trigger_without_wait"] = hex_path(f.trigger_without_wait);
  j["pre_wait"] = access_list(k, [](Access const& a) { return a.before_wait; });
  j["post_trigger_writes"] = access_list(
      k, [](Access const& a) { return a.after_trigger && a.kind != AccessKind::kRead; });
  j["accesses"] = access_list(k, [](Access const&) { return true; });
  nlohmann::ordered_json sw = nlohmann::ordered_json::array();
  for (PdlSwitch const& s : f.switches)
    sw.push_back({{"branch", hex(s.branch)},
                  {"param", k.names.name(s.offset)},
                  {"test", std::string(cmp_text(s.op)) + " " + std::to_string(s.k)},
                  {"waits_when", s.waits_when},
                  {"decided_by", s.by_assumption ? "assumed value" : "PDL launch (waits)"},
                  {"waits", s.taken_waits}});
  j["switches"] = sw;
  j["ptx"] = k.ptx;
  std::vector<std::string> hoisted;
  for (std::uint32_t p : k.hoisted)
    hoisted.push_back(k.names.name(p));
  j["hoisted_above_wait"] = hoisted;
  j["fragment"] = {{"name", short_name(f.name)}, {"paths", fragment_paths(k)}};
  j["notes"] = f.notes;
  return j;
}

std::vector<std::vector<std::string>>
fragment_paths(AuditedKernel const& k,
               std::function<std::vector<std::string>(std::uint32_t)> const& buffer,
               std::vector<std::string>* unmapped) {
  KernelFacts const& f = k.facts;
  struct Op {
    std::string text;
    bool before = false, late = false;
  };
  std::vector<Op> ops;
  std::set<std::string> seen, missing;
  for (Access const& a : f.accesses) {
    std::string const verb = a.kind == AccessKind::kRead ? "read" : "write";
    for (std::uint32_t p : a.params) {
      std::vector<std::string> const bufs =
          buffer ? buffer(p) : std::vector<std::string>{k.names.name(p)};
      if (bufs.empty()) {
        missing.insert(k.names.name(p));
        continue;
      }
      std::vector<std::string> verbs = {verb};
      if (a.kind == AccessKind::kAtomic)
        verbs = {"read", "write"};
      for (auto const& b : bufs)
        for (auto const& v : verbs) {
          std::string const t = v + " " + b;
          std::string const key =
              t + (a.before_wait ? "|b" : "|a") + (a.after_trigger ? "|l" : "|e");
          if (seen.insert(key).second)
            ops.push_back({t, a.before_wait, a.after_trigger});
        }
    }
  }
  if (unmapped)
    unmapped->assign(missing.begin(), missing.end());
  auto emit = [](std::vector<std::string>& path, std::vector<Op> const& from, bool before,
                 bool late) {
    std::set<std::string> done(path.begin(), path.end());
    for (Op const& o : from)
      if (o.before == before && o.late == late && done.insert(o.text).second)
        path.push_back(o.text);
  };
  std::vector<std::vector<std::string>> paths;
  if (f.has_wait) {
    std::vector<std::string> p;
    emit(p, ops, true, false);
    if (f.trigger_before_wait)
      p.push_back("trigger");
    emit(p, ops, true, true);
    p.push_back("wait");
    std::vector<std::string> q;
    emit(q, ops, false, false);
    p.insert(p.end(), q.begin(), q.end());
    if (f.has_trigger && !f.trigger_before_wait)
      p.push_back("trigger");
    std::vector<std::string> r;
    emit(r, ops, false, true);
    p.insert(p.end(), r.begin(), r.end());
    paths.push_back(p);
  }
  if (!f.has_wait || !f.waits_every_path) {
    std::vector<std::string> p;
    emit(p, ops, true, false);
    if (f.trigger_before_wait || (!f.has_wait && f.has_trigger))
      p.push_back("trigger");
    emit(p, ops, true, true);
    if (!f.has_wait) {
      std::vector<std::string> q;
      emit(q, ops, false, false);
      p.insert(p.end(), q.begin(), q.end());
      std::vector<std::string> r;
      emit(r, ops, false, true);
      p.insert(p.end(), r.begin(), r.end());
    }
    paths.push_back(p);
  }
  return paths;
}

} // namespace moefin::audit
