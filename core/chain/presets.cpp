#include "core/chain/presets.hpp"

#include "core/ops/errors.hpp"
#include "core/ops/layer_plan.hpp"

#include <sstream>

namespace moefin::chain {

char const* preset_name(Preset p) {
  switch (p) {
  case Preset::kSeedBefore:
    return "seed-before";
  case Preset::kSeedAfter:
    return "seed-after";
  case Preset::kAllEarly:
    return "all-early";
  case Preset::kSafe:
    return "safe";
  }
  return "?";
}

bool parse_preset(std::string const& s, Preset* out) {
  for (Preset p : kAllPresets)
    if (s == preset_name(p)) {
      *out = p;
      return true;
    }
  return false;
}

ChainConfig preset_config(Preset p) {
  ChainConfig c;
  c.preset = preset_name(p);
  for (Kernel k : kAllKernels)
    c.at(k).trigger = default_trigger(k);
  // The placements of the seed (docs/design/seed.md); finalize keeps its variant's own in
  // seed-after.
  switch (p) {
  case Preset::kSeedBefore:
    c.at(Kernel::kRouting).trigger = Trigger::kAfterWrites;
    c.at(Kernel::kFinalize).trigger = Trigger::kExit;
    c.metadata_before_wait = false;
    break;
  case Preset::kSeedAfter:
    break;
  case Preset::kAllEarly:
    for (Kernel k : kAllKernels)
      c.at(k).trigger = Trigger::kEntry;
    break;
  case Preset::kSafe:
    for (Kernel k : kAllKernels)
      c.at(k).trigger = Trigger::kAfterWait;
    break;
  }
  return c;
}

namespace {

std::string allowed_keys() {
  return "<kernel>.trigger|delay_ns|pdl, finalize.meta, finalize.variant; kernels: routing, "
         "permute, gemm1, act, gemm2, finalize";
}

bool parse_on_off(std::string const& v, bool* out) {
  if (v == "on" || v == "1" || v == "true") {
    *out = true;
    return true;
  }
  if (v == "off" || v == "0" || v == "false") {
    *out = false;
    return true;
  }
  return false;
}

} // namespace

void apply_overrides(ChainConfig& cfg, std::string const& text, std::string const& flag) {
  if (text.empty())
    return;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto const eq = item.find('=');
    auto const dot = item.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq)
      throw InputError(flag + ": '" + item + "' is not KEY=VALUE with KEY one of " +
                       allowed_keys());
    std::string const kname = item.substr(0, dot);
    std::string const field = item.substr(dot + 1, eq - dot - 1);
    std::string const value = item.substr(eq + 1);
    Kernel k;
    if (!parse_kernel(kname, &k))
      throw InputError(flag + ": unknown kernel '" + kname + "' in '" + item +
                       "' (routing, permute, gemm1, act, gemm2, finalize)");
    if (field == "trigger") {
      Trigger t;
      if (!parse_trigger(value, &t))
        throw InputError(flag + ": '" + item +
                         "': trigger not one of {default, exit, entry, after_wait, after_writes}");
      cfg.at(k).trigger = t;
    } else if (field == "delay_ns") {
      std::size_t used = 0;
      long long d = -1;
      try {
        d = std::stoll(value, &used);
      } catch (std::exception const&) {
        used = 0;
      }
      if (value.empty() || used != value.size() || d < 0 || d > 1000000000)
        throw InputError(flag + ": '" + item + "': delay_ns takes one integer in [0, 1000000000]");
      cfg.at(k).delay_ns = d;
    } else if (field == "pdl") {
      if (!parse_on_off(value, &cfg.at(k).pdl))
        throw InputError(flag + ": '" + item + "': pdl takes on or off");
    } else if (field == "meta" && k == Kernel::kFinalize) {
      if (value != "before" && value != "after")
        throw InputError(flag + ": '" + item + "': finalize.meta takes before or after");
      cfg.metadata_before_wait = value == "before";
    } else if (field == "variant" && k == Kernel::kFinalize) {
      if (value == "new" || value == "previous") {
        cfg.finalize.forced = nullptr;
        cfg.finalize.previous = value == "previous";
      } else if (auto const* v = finalize::find_variant(value)) {
        cfg.finalize = FinalizeChoice::of(*v);
      } else {
        throw InputError(flag + ": '" + item +
                         "': finalize.variant takes new, previous or a "
                         "finalize variant (" +
                         finalize::variant_names(finalize::variants()) + ")");
      }
    } else {
      throw InputError(flag + ": unknown key '" + kname + "." + field + "' (" + allowed_keys() +
                       ")");
    }
  }
}

std::string between_triggers(ChainConfig const& cfg) {
  std::string s;
  for (Kernel k : kBetweenKernels)
    s += std::string(s.empty() ? "" : ",") + kernel_name(k) + "=" + trigger_name(cfg.trigger(k));
  return s;
}

void set_flavour(ChainConfig& cfg, std::string const& name) {
  ChainFlavour const& f = chain_flavour(name);
  cfg.flavour = f.name;
  for (std::size_t i = 0; i < f.kernels.size(); ++i)
    if (f.kernels[i].fixed)
      cfg.at(kAllKernels[i]).trigger = f.kernels[i].default_trigger;
}

std::string describe(ChainConfig const& cfg) {
  std::ostringstream os;
  os << "preset=" << cfg.preset << " finalize=" << cfg.finalize.name()
     << " meta=" << (cfg.metadata_before_wait ? "before" : "after");
  for (Kernel k : kAllKernels) {
    auto const& n = cfg.at(k);
    os << " " << kernel_name(k) << "{trigger=" << trigger_name(cfg.trigger(k))
       << (n.pdl ? "" : ",pdl=off");
    if (n.delay_ns)
      os << ",delay_ns=" << n.delay_ns;
    os << "}";
  }
  if (cfg.flavour != "moefin") // moefin's descriptions stay as every file so far has them
    os << " flavour=" << cfg.flavour;
  return os.str();
}

std::vector<std::string> split_list(std::string const& text, std::string const& flag) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty())
      out.push_back(item);
  if (out.empty())
    throw InputError(flag + ": empty list");
  return out;
}

std::vector<Preset> parse_presets(std::string const& text, std::string const& flag) {
  std::vector<Preset> out;
  for (auto const& item : split_list(text, flag)) {
    Preset p;
    if (!parse_preset(item, &p))
      throw InputError(flag + ": value '" + item +
                       "' not one of {seed-before, seed-after, all-early, safe}");
    out.push_back(p);
  }
  return out;
}

} // namespace moefin::chain
