// small_batch_v2's geometry: the rule, the measured policy table and the candidates of its
// measurement. Host only (no CUDA), unit-tested without a GPU.

#include "kernels/finalize/finalize_policy.hpp"
#include "kernels/finalize/small_batch_v2.hpp"
#include "kernels/finalize/small_batch_v2_table.hpp"

#include "core/ops/errors.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <utility>

namespace moefin::finalize::v2 {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

int next_pow2(std::int64_t x) {
  int p = 1;
  while (p < x)
    p *= 2;
  return p;
}

bool pow2(int x) {
  return x > 0 && (x & (x - 1)) == 0;
}

int groups_for(std::int64_t top_k, int loads) {
  return next_pow2(ceil_div(top_k, loads));
}

/// Chunks clamped so that the CTA keeps kMinThreads..kMaxThreads threads.
int fit_chunks(int chunks, int groups) {
  int const lo = std::max(Limits::kMinChunks, Limits::kMinThreads / groups);
  int const hi = std::min(Limits::kMaxChunks, Limits::kMaxThreads / groups);
  return std::min(std::max(chunks, lo), hi);
}

} // namespace

Geometry make_geometry(std::int64_t top_k, int chunks, int loads, Trigger trigger,
                       bool warp_groups) {
  if (top_k < 1 || top_k > Limits::kMaxTopK)
    throw InputError("small_batch_v2: top_k " + std::to_string(top_k) + " out of range [1, " +
                     std::to_string(Limits::kMaxTopK) + "]");
  if (!pow2(chunks) || chunks < Limits::kMinChunks || chunks > Limits::kMaxChunks)
    throw InputError("small_batch_v2: chunks " + std::to_string(chunks) +
                     " not a power of two in [4, 128]");
  if (loads != 1 && loads != 2 && loads != 4 && loads != 8)
    throw InputError("small_batch_v2: loads " + std::to_string(loads) + " not one of {1, 2, 4, 8}");
  if (trigger != Trigger::kEntry && trigger != Trigger::kExit)
    throw InputError(std::string("small_batch_v2: table trigger ") + trigger_name(trigger) +
                     " is not entry or exit");
  if (warp_groups && trigger != Trigger::kEntry)
    throw InputError("small_batch_v2: the warp-groups layout triggers at entry only (no lean "
                     "exit kernel)");
  Geometry g;
  g.warp_groups = warp_groups;
  g.chunks = chunks;
  g.loads = loads;
  g.groups = groups_for(top_k, loads);
  g.trigger = trigger;
  if (g.groups > Limits::kMaxGroups)
    throw InputError("small_batch_v2: top_k " + std::to_string(top_k) + " with " +
                     std::to_string(loads) + " loads a thread needs " + std::to_string(g.groups) +
                     " groups (at most 32)");
  g.per_thread = static_cast<int>(ceil_div(top_k, g.groups));
  if (g.threads() < Limits::kMinThreads || g.threads() > Limits::kMaxThreads)
    throw InputError("small_batch_v2: " + std::to_string(chunks) + " chunks x " +
                     std::to_string(g.groups) + " groups = " + std::to_string(g.threads()) +
                     " threads, not in [32, 512]");
  return g;
}

Geometry released_geometry(std::int64_t top_k) {
  int const groups = groups_for(top_k, 4);
  return make_geometry(top_k, std::min(Limits::kMaxChunks, 256 / groups), 4);
}

Geometry rule_geometry(std::int64_t hidden, std::int64_t tokens, std::int64_t top_k) {
  int loads = Limits::kRuleLoads;
  while (groups_for(top_k, loads) > Limits::kMaxGroups)
    loads *= 2;
  int const groups = groups_for(top_k, loads);
  std::int64_t const total = std::max<std::int64_t>(1, hidden / Policy::kVecElems);
  int chunks = fit_chunks(Limits::kMaxChunks, groups);
  int const lo = fit_chunks(Limits::kMinChunks, groups);
  while (chunks > lo && ceil_div(total, chunks) * tokens < Limits::kRuleTargetCtas)
    chunks /= 2;
  return make_geometry(top_k, chunks, loads);
}

Geometry policy_geometry(std::int64_t hidden, std::int64_t tokens, std::int64_t top_k) {
  return table_geometry(table(), hidden, tokens, top_k);
}

Geometry table_geometry(std::vector<PolicyEntry> const& t, std::int64_t hidden, std::int64_t tokens,
                        std::int64_t top_k) {
  if (t.empty())
    return rule_geometry(hidden, tokens, top_k);
  std::int32_t max_t = 0;
  for (auto const& e : t)
    max_t = std::max(max_t, e.tokens);
  if (tokens > max_t)
    return rule_geometry(hidden, tokens, top_k);
  // Nearest token count (the smaller on a tie), then the smallest top-K >= K (else the
  // largest), then the nearest hidden size by ratio.
  std::int64_t best_t = -1;
  for (auto const& e : t)
    if (best_t < 0 || std::llabs(e.tokens - tokens) < std::llabs(best_t - tokens) ||
        (std::llabs(e.tokens - tokens) == std::llabs(best_t - tokens) && e.tokens < best_t))
      best_t = e.tokens;
  std::int64_t best_k = -1, largest_k = -1;
  for (auto const& e : t) {
    if (e.tokens != best_t)
      continue;
    largest_k = std::max<std::int64_t>(largest_k, e.top_k);
    if (e.top_k >= top_k && (best_k < 0 || e.top_k < best_k))
      best_k = e.top_k;
  }
  if (best_k < 0)
    best_k = largest_k;
  PolicyEntry const* pick = nullptr;
  double best_d = 0;
  for (auto const& e : t) {
    if (e.tokens != best_t || e.top_k != best_k)
      continue;
    double const d =
        std::fabs(std::log(static_cast<double>(e.hidden) / static_cast<double>(hidden)));
    if (!pick || d < best_d) {
      pick = &e;
      best_d = d;
    }
  }
  int loads = pick->loads;
  while (groups_for(top_k, loads) > Limits::kMaxGroups)
    loads *= 2;
  return make_geometry(top_k, fit_chunks(pick->chunks, groups_for(top_k, loads)), loads,
                       pick->trigger, pick->warp_groups);
}

std::vector<Geometry> candidates(std::int64_t top_k) {
  std::vector<Geometry> out;
  std::set<std::pair<int, int>> seen;
  for (int loads : {1, 2, 4, 8}) {
    int const groups = groups_for(top_k, loads);
    if (groups > Limits::kMaxGroups)
      continue;
    int const per = static_cast<int>(ceil_div(top_k, groups));
    if (!seen.insert({groups, per}).second)
      continue;
    for (int chunks = Limits::kMinChunks; chunks <= Limits::kMaxChunks; chunks *= 2) {
      int const threads = chunks * groups;
      if (threads >= Limits::kMinThreads && threads <= Limits::kMaxThreads)
        out.push_back(make_geometry(top_k, chunks, loads));
    }
  }
  return out;
}

std::string candidate_name(int chunks, int loads, Trigger trigger, bool warp_groups) {
  return "small_batch_v2/c" + std::to_string(chunks) + "/l" + std::to_string(loads) +
         (trigger == Trigger::kExit ? "/exit" : "") + (warp_groups ? "/w" : "");
}

bool parse_candidate(std::string const& name, int* chunks, int* loads, Trigger* trigger,
                     bool* warp_groups) {
  std::string const prefix = "small_batch_v2/c";
  if (name.compare(0, prefix.size(), prefix) != 0)
    return false;
  char const* s = name.c_str() + prefix.size();
  char* end = nullptr;
  long const c = std::strtol(s, &end, 10);
  if (end == s || end[0] != '/' || end[1] != 'l')
    return false;
  s = end + 2;
  long const l = std::strtol(s, &end, 10);
  if (end == s)
    return false;
  std::string const rest = end;
  if (rest != "" && rest != "/exit" && rest != "/w")
    return false;
  if (!pow2(static_cast<int>(c)) || c < Limits::kMinChunks || c > Limits::kMaxChunks ||
      (l != 1 && l != 2 && l != 4 && l != 8))
    return false;
  *chunks = static_cast<int>(c);
  *loads = static_cast<int>(l);
  *trigger = rest == "/exit" ? Trigger::kExit : Trigger::kEntry;
  *warp_groups = rest == "/w";
  return true;
}

bool is_v2(FinalizeVariant const& v) {
  return v.name.compare(0, 14, "small_batch_v2") == 0;
}

std::uint32_t ablation_bits(FinalizeVariant const& v) {
  if (v.name == "small_batch_v2_no_shuffle")
    return kShuffle;
  if (v.name == "small_batch_v2_no_broadcast")
    return kBroadcast;
  if (v.name == "small_batch_v2_anchor")
    return kAnchor;
  if (v.name == "small_batch_v2_fi_layout")
    return kWarpGroups;
  return 0;
}

LaunchPlan geometry(FinalizeParams const& p, Options const& o, FinalizeVariant const& v) {
  auto fail = [&](std::string const& why) {
    throw InputError(
        "finalize: variant " + v.name + " " + why + " (hidden=" + std::to_string(p.hidden) +
        ", tokens=" + std::to_string(p.num_tokens) + ", top_k=" + std::to_string(p.top_k) + ")");
  };
  if (p.num_tokens > Policy::kMaxGridY)
    fail("supports at most " + std::to_string(Policy::kMaxGridY) + " tokens");
  if (p.hidden_padded >= (std::int64_t(1) << 30))
    fail("supports hidden_padded < 2^30 (32-bit row offsets)");
  if ((o.v2_chunks == 0) != (o.v2_loads == 0))
    fail("takes v2_chunks and v2_loads together (both 0: the policy table)");
  bool const fi_layout = ablation_bits(v) == kWarpGroups;
  Geometry g;
  if (o.v2_chunks != 0)
    g = make_geometry(p.top_k, o.v2_chunks, o.v2_loads, Trigger::kEntry, fi_layout);
  else if (v.name == "small_batch_v2_fi_geometry" || fi_layout)
    g = released_geometry(p.top_k);
  else
    g = policy_geometry(p.hidden, p.num_tokens, p.top_k);
  LaunchPlan lp;
  lp.grid_x = static_cast<int>(ceil_div(p.hidden / Policy::kVecElems, g.chunks));
  lp.grid_y = static_cast<int>(p.num_tokens);
  lp.block_x = g.threads();
  lp.block_y = 1;
  lp.loads_per_thread = g.per_thread;
  lp.groups = g.groups;
  // The table's placement for small_batch_v2 itself; its ablations keep their entries' own.
  if (v.name == "small_batch_v2" && o.v2_chunks == 0)
    lp.policy_trigger = g.trigger;
  // The table's lane layout is small_batch_v2's own; its ablations switch their ingredient off
  // in v2's layout at the table's geometry (the warp-groups kernels have no ablations).
  lp.warp_groups = (v.name == "small_batch_v2" && g.warp_groups) || fi_layout;
  return lp;
}

bool has_lean(FinalizeVariant const& v, LaunchPlan const& lp) {
  if (!lp.meta_before_wait)
    return false;
  if (ablation_bits(v) == 0 && !lp.warp_groups)
    return lp.trigger == Trigger::kEntry || lp.trigger == Trigger::kExit;
  return lp.trigger == Trigger::kEntry;
}

std::vector<PolicyEntry> const& table() {
  static std::vector<PolicyEntry> const t(generated::kTable.begin(), generated::kTable.end());
  return t;
}

char const* table_source() {
  return generated::kSource;
}

} // namespace moefin::finalize::v2
