#include "experiments/chain/race_cells.hpp"

#include "core/ops/errors.hpp"
#include "core/ops/layer_plan.hpp"
#include "kernels/finalize/finalize.hpp"

#include <algorithm>
#include <set>
#include <sstream>

namespace moefin::race {

using chain::Kernel;

namespace {

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
      for (Trigger g1 : kPlacements)
        for (Trigger a : kEntryOrWait)
          for (Trigger g2 : kPlacements) {
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
    for (Trigger t : kPlacements) {
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
  chain::ChainFlavour const& flavour = chain::chain_flavour(axes.flavour);
  for (chain::Kernel dk : axes.delay_kernels)
    if (dk != Kernel::kFinalize && flavour.kernels[static_cast<std::size_t>(dk)].fixed &&
        std::any_of(axes.delays.begin(), axes.delays.end(), [](std::int64_t d) { return d != 0; }))
      throw InputError(std::string("--delay-kernels: ") + chain::kernel_name(dk) + " is " +
                       flavour.kernels[static_cast<std::size_t>(dk)].name + " in --flavour " +
                       flavour.name + ", which has no injected delay (give --delay-ns 0 or delay "
                       "another kernel)");
  std::set<std::string> keys; // a fixed placement makes some trigger variants the same cell
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
            chain::set_flavour(c.cfg, axes.flavour);
            c.own = vi == 0;
            c.cfg.metadata_before_wait = meta == "before";
            c.cfg.at(dk).delay_ns = delay;
            c.triggers = chain::between_triggers(c.cfg);
            c.meta = meta;
            c.delay_ns = delay;
            c.delayed_kernel = delay == 0 ? "none" : chain::kernel_name(dk);
            c.key = std::string(chain::preset_name(p)) + "," + short_triggers(c.cfg) +
                    ",meta=" + meta + ",d=" + std::to_string(delay) + "@" + c.delayed_kernel;
            c.benchmark = is_benchmark(c.cfg);
            if (keys.insert(c.key).second)
              out.push_back(std::move(c));
          }
        }
  }
  return out;
}

bool is_benchmark(chain::ChainConfig const& cfg) {
  bool early = true;
  for (Kernel k : chain::kBetweenKernels)
    early = early && cfg.trigger(k) == Trigger::kEntry;
  Trigger const routing = cfg.trigger(Kernel::kRouting);
  bool const before_writes = routing == Trigger::kEntry || routing == Trigger::kAfterWait;
  return early && before_writes && cfg.metadata_before_wait &&
         cfg.at(Kernel::kRouting).delay_ns >= 20000;
}

finalize::FinalizeVariant const& planned_finalize_variant(chain::LayerShape const& shape,
                                                          std::int64_t tokens,
                                                          chain::ChainConfig const& cfg) {
  finalize::ShapeQuery q; // the chain's buffers come from cudaMalloc: 16-byte aligned rows
  q.hidden = shape.hidden;
  q.hidden_padded = shape.hidden;
  q.tokens = tokens;
  q.top_k = shape.top_k;
  finalize::Options o;
  o.variant = cfg.finalize.forced;
  o.allow_small_batch = !cfg.finalize.previous;
  return finalize::select(q, o);
}

namespace {

std::string const& column(h5::Table const& t, char const* name, std::size_t row) {
  auto const it = t.strings.find(name);
  if (it == t.strings.end())
    throw InputError(std::string("race_matrix: no string column '") + name + "'");
  return it->second.at(row);
}

std::int64_t int_column(h5::Table const& t, char const* name, std::size_t row) {
  auto const it = t.ints.find(name);
  if (it == t.ints.end())
    throw InputError(std::string("race_matrix: no integer column '") + name + "'");
  return it->second.at(row);
}

} // namespace

chain::ChainConfig row_config(h5::Table const& t, std::size_t row, h5::Provenance const& root) {
  std::string const preset = column(t, "preset", row);
  chain::Preset p;
  if (!chain::parse_preset(preset, &p))
    throw InputError("race_matrix row " + std::to_string(row) + ": preset '" + preset +
                     "' not one of {seed-before, seed-after, all-early, safe}");
  chain::ChainConfig c = chain::preset_config(p);
  auto const ov = root.find("overrides");
  if (ov != root.end()) {
    chain::apply_overrides(c, ov->second, "overrides attribute");
  } else {
    auto const cl = root.find("command_line");
    if (cl != root.end() && cl->second.find("--set") != std::string::npos)
      throw InputError("race_matrix: the run used --set (" + cl->second +
                       ") but the file has no 'overrides' attribute: its chains cannot be rebuilt");
  }
  // "permute=entry,gemm1=exit,..." as cells() wrote it (chain::between_triggers).
  std::string triggers;
  std::stringstream ss(column(t, "triggers", row));
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto const eq = item.find('=');
    if (eq == std::string::npos)
      throw InputError("race_matrix row " + std::to_string(row) + ": triggers item '" + item +
                       "' is not kernel=placement");
    triggers +=
        (triggers.empty() ? "" : ",") + item.substr(0, eq) + ".trigger=" + item.substr(eq + 1);
  }
  chain::apply_overrides(c, triggers, "race_matrix triggers");
  std::string const meta = column(t, "meta", row);
  if (meta != "before" && meta != "after")
    throw InputError("race_matrix row " + std::to_string(row) + ": meta '" + meta +
                     "' not one of {before, after}");
  c.metadata_before_wait = meta == "before";
  auto const fl = root.find("flavour"); // absent: files written before the released flavour
  chain::set_flavour(c, fl == root.end() ? std::string("moefin") : fl->second);
  std::string const dk = column(t, "delayed_kernel", row);
  std::int64_t const delay = int_column(t, "delay_ns", row);
  if (dk != "none") {
    chain::Kernel k;
    if (!chain::parse_kernel(dk, &k))
      throw InputError("race_matrix row " + std::to_string(row) + ": delayed_kernel '" + dk +
                       "' not a chain kernel");
    c.at(k).delay_ns = delay;
  }
  return c;
}

chain::CellVerdict row_verdict(h5::Table const& t, std::size_t row, h5::Provenance const& root) {
  auto const launch = root.find("launch");
  bool const graph = launch == root.end() || launch->second == "graph";
  if (!graph && launch->second != "stream")
    throw InputError("race_matrix: launch attribute '" + launch->second +
                     "' not one of {graph, stream}");
  // The flavour of the file's weights format (bf16-tiled for files written before it existed).
  auto const format = root.find("weights_format");
  chain::ChainFlavour const* flavour = chain::flavour_for_format(
      format == root.end() ? std::string(chain::kDefaultWeightsFormat) : format->second);
  if (!flavour)
    throw InputError("race_matrix: weights_format attribute '" + format->second +
                     "' not one of {bf16-tiled, bf16, fp4}");
  return chain::verify_cell(row_config(t, row, root),
                            finalize::variant(column(t, "finalize", row), "race_matrix finalize"),
                            graph, *flavour);
}

std::size_t fill_verdicts(h5::Table& t, h5::Provenance const& root) {
  auto& col = t.strings.at("verifier");
  std::size_t filled = 0;
  for (std::size_t i = 0; i < t.rows; ++i)
    if (col[i] == "unknown") {
      col[i] = pdl::verdict_name(row_verdict(t, i, root).chain);
      ++filled;
    }
  return filled;
}

} // namespace moefin::race
