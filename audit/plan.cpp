#include "audit/plan.hpp"

#include "audit/report.hpp"
#include "audit/text.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

namespace moefin::audit {

namespace {

std::vector<std::string> sorted(std::set<std::string> const& s) {
  return {s.begin(), s.end()};
}

std::string list(std::vector<std::string> const& v) {
  if (v.empty())
    return "none";
  std::string s;
  for (auto const& x : v)
    s += (s.empty() ? "" : ", ") + x;
  return s;
}

} // namespace

ObservedKernel observe(AuditedKernel const& k,
                       std::function<std::vector<std::string>(std::uint32_t)> const& buffer) {
  KernelFacts const& f = k.facts;
  ObservedKernel o;
  o.waits = f.has_wait && f.waits_every_path;
  std::set<std::string> before, after, writes, untraced;
  bool late_write = false;
  for (Access const& a : f.accesses) {
    if (a.params.empty())
      untraced.insert(std::string(access_kind_name(a.kind)) + " at " + hex(a.addr));
    for (std::uint32_t p : a.params)
      for (std::string const& b : buffer(p)) {
        // An atomic counts as a write, as chain descriptions have it.
        if (a.kind == AccessKind::kRead)
          (a.before_wait ? before : after).insert(b);
        else {
          writes.insert(b);
          late_write = late_write || a.after_trigger;
        }
      }
  }
  for (auto const& b : before)
    after.erase(b);
  o.reads_before_wait = sorted(before);
  o.reads_after_wait = sorted(after);
  o.writes = sorted(writes);
  o.untraced = sorted(untraced);
  if (!f.has_trigger)
    o.trigger = "exit";
  else if (f.trigger_before_wait)
    o.trigger = "entry";
  else
    o.trigger = late_write ? "after_wait" : "after_writes";
  return o;
}

std::vector<std::string> compare_plan(PlannedKernel const& plan, ObservedKernel const& seen) {
  std::vector<std::string> d;
  // A kernel that writes nothing cannot tell after_wait from after_writes.
  std::string pt = plan.trigger, st = seen.trigger;
  if (seen.writes.empty() && pt == "after_writes")
    pt = "after_wait";
  if (seen.writes.empty() && st == "after_writes")
    st = "after_wait";
  if (pt != st)
    d.push_back("trigger: planned " + plan.trigger + ", the binary " + seen.trigger);
  if (plan.waits != seen.waits)
    d.push_back(std::string("waits on every path: planned ") + (plan.waits ? "yes" : "no") +
                ", the binary " + (seen.waits ? "yes" : "no"));
  auto cmp = [&](char const* what, std::vector<std::string> p, std::vector<std::string> const& s) {
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    if (p != s)
      d.push_back(std::string(what) + ": planned " + list(p) + "; the binary " + list(s));
  };
  cmp("reads before the wait", plan.reads_before_wait, seen.reads_before_wait);
  cmp("reads after the wait", plan.reads_after_wait, seen.reads_after_wait);
  cmp("writes", plan.writes, seen.writes);
  return d;
}

} // namespace moefin::audit
