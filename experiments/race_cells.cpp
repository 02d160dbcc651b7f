#include "experiments/race_cells.hpp"

#include <set>

namespace moefin::race {

using chain::Kernel;

namespace {

constexpr Trigger kGemmPlacements[] = {Trigger::kExit, Trigger::kEntry, Trigger::kAfterWait,
                                       Trigger::kAfterWrites};
constexpr Trigger kEntryOrWait[] = {Trigger::kEntry, Trigger::kAfterWait};

char const* short_name(Trigger t) {
  switch (t) {
  case Trigger::kExit:
    return "ex";
  case Trigger::kEntry:
    return "en";
  case Trigger::kAfterWait:
    return "aw";
  case Trigger::kAfterWrites:
    return "ar";
  default:
    return "df";
  }
}

/// The triggers in a row key (the key column holds 160 bytes with the shape in front).
std::string short_triggers(chain::ChainConfig const& c) {
  return std::string("p=") + short_name(c.trigger(Kernel::kPermute)) +
         ",g1=" + short_name(c.trigger(Kernel::kGemm1)) +
         ",a=" + short_name(c.trigger(Kernel::kActivation)) +
         ",g2=" + short_name(c.trigger(Kernel::kGemm2));
}

} // namespace

std::vector<chain::ChainConfig> trigger_variants(chain::ChainConfig const& base, bool full) {
  std::vector<chain::ChainConfig> out;
  std::set<std::string> seen;
  auto add = [&](chain::ChainConfig const& c) {
    if (seen.insert(chain::between_triggers(c)).second)
      out.push_back(c);
  };
  add(base);
  if (full) {
    for (Trigger p : kEntryOrWait)
      for (Trigger g1 : kGemmPlacements)
        for (Trigger a : kEntryOrWait)
          for (Trigger g2 : kGemmPlacements) {
            chain::ChainConfig c = base;
            c.at(Kernel::kPermute).trigger = p;
            c.at(Kernel::kGemm1).trigger = g1;
            c.at(Kernel::kActivation).trigger = a;
            c.at(Kernel::kGemm2).trigger = g2;
            add(c);
          }
    return out;
  }
  for (Kernel k : {Kernel::kGemm1, Kernel::kGemm2})
    for (Trigger t : kGemmPlacements) {
      chain::ChainConfig c = base;
      c.at(k).trigger = t;
      add(c);
    }
  for (Kernel k : {Kernel::kPermute, Kernel::kActivation})
    for (Trigger t : kEntryOrWait) {
      chain::ChainConfig c = base;
      c.at(k).trigger = t;
      add(c);
    }
  for (Trigger t : kEntryOrWait) {
    chain::ChainConfig c = base;
    for (Kernel k : chain::kBetweenKernels)
      c.at(k).trigger = t;
    add(c);
  }
  return out;
}

std::vector<Cell> cells(Axes const& axes) {
  std::vector<Cell> out;
  for (chain::Preset p : axes.presets) {
    chain::ChainConfig base = chain::preset_config(p);
    base.finalize = axes.finalize;
    chain::apply_overrides(base, axes.overrides);
    auto const variants = trigger_variants(base, axes.full);
    for (std::size_t vi = 0; vi < variants.size(); ++vi)
      for (std::string const& meta : axes.metas)
        for (std::int64_t delay : axes.delays) {
          std::vector<Kernel> ks = axes.delay_kernels;
          if (delay == 0)
            ks = {Kernel::kRouting}; // one undelayed cell, whatever the kernel list
          for (Kernel dk : ks) {
            Cell c;
            c.cfg = variants[vi];
            c.own = vi == 0;
            c.cfg.metadata_before_wait = meta == "before";
            c.cfg.at(dk).delay_ns = delay;
            c.triggers = chain::between_triggers(c.cfg);
            c.meta = meta;
            c.delay_ns = delay;
            c.delayed_kernel = delay == 0 ? "none" : chain::kernel_name(dk);
            c.key = std::string(chain::preset_name(p)) + "," + short_triggers(c.cfg) +
                    ",meta=" + meta + ",d=" + std::to_string(delay) + "@" + c.delayed_kernel;
            bool early = true;
            for (Kernel k : chain::kBetweenKernels)
              early = early && c.cfg.trigger(k) == Trigger::kEntry;
            c.benchmark =
                early && c.cfg.metadata_before_wait && dk == Kernel::kRouting && delay >= 20000;
            out.push_back(std::move(c));
          }
        }
  }
  return out;
}

} // namespace moefin::race
