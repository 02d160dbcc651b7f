#include "core/chain_config.hpp"

#include "core/cli.hpp"
#include "core/errors.hpp"
#include "core/rng.hpp"
#include "core/router_scores.hpp"

#include <nlohmann/json.hpp>

#include <sstream>

namespace moefin::chain {

char const* kernel_name(Kernel k) {
  switch (k) {
  case Kernel::kRouting:
    return "routing";
  case Kernel::kPermute:
    return "permute";
  case Kernel::kGemm1:
    return "gemm1";
  case Kernel::kActivation:
    return "act";
  case Kernel::kGemm2:
    return "gemm2";
  case Kernel::kFinalize:
    return "finalize";
  }
  return "?";
}

bool parse_kernel(std::string const& s, Kernel* out) {
  for (Kernel k : kAllKernels)
    if (s == kernel_name(k)) {
      *out = k;
      return true;
    }
  return false;
}

Trigger default_trigger(Kernel k) {
  switch (k) {
  case Kernel::kRouting:
    return Trigger::kAfterWait;
  case Kernel::kPermute:
  case Kernel::kActivation:
    return Trigger::kEntry;
  case Kernel::kFinalize:
    return Trigger::kDefault; // finalize::run resolves it per variant
  case Kernel::kGemm1:
  case Kernel::kGemm2:
    return Trigger::kExit;
  }
  return Trigger::kExit;
}

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

char const* finalize_choice_name(FinalizeChoice f) {
  return f == FinalizeChoice::kNew ? "new" : "previous";
}

char const* activation_name(activation::Type t) {
  return t == activation::Type::kSwiGlu ? "swiglu" : "relu2";
}

Trigger ChainConfig::trigger(Kernel k) const {
  Trigger const t = at(k).trigger;
  return t == Trigger::kDefault ? default_trigger(k) : t;
}

ChainConfig preset_config(Preset p) {
  ChainConfig c;
  c.preset = preset_name(p);
  for (Kernel k : kAllKernels)
    c.at(k).trigger = default_trigger(k);
  // The placements of DESIGN.md section 2; finalize keeps its variant's own in seed-after.
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
      if (!parse_trigger(value.c_str(), &t))
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
      if (value != "new" && value != "previous")
        throw InputError(flag + ": '" + item + "': finalize.variant takes new or previous");
      cfg.finalize = value == "new" ? FinalizeChoice::kNew : FinalizeChoice::kPrevious;
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

std::string describe(ChainConfig const& cfg) {
  std::ostringstream os;
  os << "preset=" << cfg.preset << " finalize=" << finalize_choice_name(cfg.finalize)
     << " meta=" << (cfg.metadata_before_wait ? "before" : "after");
  for (Kernel k : kAllKernels) {
    auto const& n = cfg.at(k);
    os << " " << kernel_name(k) << "{trigger=" << trigger_name(cfg.trigger(k))
       << (n.pdl ? "" : ",pdl=off");
    if (n.delay_ns)
      os << ",delay_ns=" << n.delay_ns;
    os << "}";
  }
  return os.str();
}

std::vector<KernelDescription> describe_chain(ChainConfig const& cfg) {
  std::vector<std::string> const routing_out = {
      "expert_ids",        "expert_weights",       "expanded_to_permuted",
      "permuted_to_token", "permuted_to_expanded", "expert_counts",
      "expert_offsets",    "cta_to_expert",        "total_padded_rows"};
  std::vector<KernelDescription> d;
  auto add = [&](Kernel k, std::vector<std::string> before, std::vector<std::string> after,
                 std::vector<std::string> writes) {
    KernelDescription x;
    x.name = kernel_name(k);
    x.pdl = cfg.at(k).pdl;
    x.trigger = trigger_name(cfg.trigger(k));
    x.reads_before_wait = std::move(before);
    x.reads_after_wait = std::move(after);
    x.writes = std::move(writes);
    d.push_back(std::move(x));
  };
  add(Kernel::kRouting, {}, {"scores"}, routing_out);
  add(Kernel::kPermute, {}, {"hidden_states", "permuted_to_token", "total_padded_rows"},
      {"permuted"});
  add(Kernel::kGemm1, {}, {"permuted", "cta_to_expert", "total_padded_rows", "w1"}, {"gemm1_out"});
  add(Kernel::kActivation, {}, {"gemm1_out", "total_padded_rows"}, {"act_out"});
  add(Kernel::kGemm2, {}, {"act_out", "cta_to_expert", "total_padded_rows", "w2"}, {"gemm2_out"});
  std::vector<std::string> const meta = {"expanded_to_permuted", "expert_weights"};
  if (cfg.metadata_before_wait)
    add(Kernel::kFinalize, meta, {"gemm2_out"}, {"out"});
  else
    add(Kernel::kFinalize, {}, {"expanded_to_permuted", "expert_weights", "gemm2_out"}, {"out"});
  return d;
}

std::string chain_json(ChainConfig const& cfg) {
  nlohmann::json j;
  j["description"] = describe(cfg);
  j["kernels"] = nlohmann::json::array();
  for (auto const& k : describe_chain(cfg))
    j["kernels"].push_back({{"name", k.name},
                            {"pdl", k.pdl},
                            {"trigger", k.trigger},
                            {"waits", k.waits},
                            {"reads_before_wait", k.reads_before_wait},
                            {"reads_after_wait", k.reads_after_wait},
                            {"writes", k.writes}});
  return j.dump(2);
}

std::vector<LayerShape> published_shapes() {
  return {{"H6144/I512/E256/top-8", 6144, 512, 256, 8, activation::Type::kSwiGlu},
          {"H2048/I1280/E512/top-22", 2048, 1280, 512, 22, activation::Type::kRelu2},
          {"H3584/I" + std::to_string(kTop16Inter) + "/E896/top-16", 3584, kTop16Inter, 896, 16,
           activation::Type::kSwiGlu}};
}

namespace {

std::int64_t shape_number(std::string const& part, char const* prefix, std::string const& text,
                          std::string const& flag) {
  std::string const p(prefix);
  if (part.rfind(p, 0) != 0 || part.size() == p.size())
    throw InputError(flag + ": '" + text + "': expected " + p + "<n> in '" + part +
                     "' (shape format H<h>/I<i>/E<e>/top-<k>[/relu2])");
  return cli::parse_int_list(flag, part.substr(p.size()), 1, 1 << 20).at(0);
}

} // namespace

LayerShape parse_shape(std::string const& text, std::string const& flag) {
  auto const shapes = published_shapes();
  for (auto const& s : shapes)
    if (text == "top-" + std::to_string(s.top_k) || text == s.name)
      return s;
  std::vector<std::string> parts;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, '/'))
    parts.push_back(part);
  if (parts.size() != 4 && parts.size() != 5)
    throw InputError(flag + ": '" + text +
                     "' is not a shape (top-8, top-22, top-16 or H<h>/I<i>/E<e>/top-<k>[/relu2])");
  LayerShape s;
  s.hidden = shape_number(parts[0], "H", text, flag);
  s.inter = shape_number(parts[1], "I", text, flag);
  s.experts = shape_number(parts[2], "E", text, flag);
  s.top_k = shape_number(parts[3], "top-", text, flag);
  if (parts.size() == 5) {
    if (parts[4] == "relu2")
      s.act = activation::Type::kRelu2;
    else if (parts[4] != "swiglu")
      throw InputError(flag + ": '" + text + "': activation '" + parts[4] +
                       "' not one of {swiglu, relu2}");
  }
  s.name = "H" + std::to_string(s.hidden) + "/I" + std::to_string(s.inter) + "/E" +
           std::to_string(s.experts) + "/top-" + std::to_string(s.top_k) +
           (s.act == activation::Type::kRelu2 ? "/relu2" : "");
  return s;
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

std::vector<LayerShape> parse_shapes(std::string const& text, std::string const& flag) {
  std::vector<LayerShape> out;
  for (auto const& item : split_list(text, flag))
    out.push_back(parse_shape(item, flag));
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

void validate(LayerShape const& s, std::int64_t tokens, std::int64_t tile_m) {
  std::string const n = "shape " + s.name + ": ";
  cli::check_range<std::int64_t>(n + "hidden", s.hidden, 64, 16384);
  cli::check_multiple(n + "hidden", s.hidden, 64);
  cli::check_range<std::int64_t>(n + "intermediate", s.inter, 64, 8192);
  cli::check_multiple(n + "intermediate", s.inter, 64);
  cli::check_range<std::int64_t>(n + "top-K", s.top_k, 1, 32);
  cli::check_range<std::int64_t>(n + "experts", s.experts, s.top_k, 1024);
  cli::check_range<std::int64_t>("--tokens", tokens, 1, 128);
  if (tile_m != 16 && tile_m != 32 && tile_m != 64 && tile_m != 128)
    throw InputError("--tile-m: value " + std::to_string(tile_m) + " not one of {16, 32, 64, 128}");
}

std::int64_t max_padded_rows(LayerShape const& s, std::int64_t tokens, std::int64_t tile_m) {
  std::int64_t const routed = tokens * s.top_k;
  std::int64_t const groups = std::min(routed, s.experts);
  std::int64_t const bound = routed + groups * (tile_m - 1);
  return (bound + tile_m - 1) / tile_m * tile_m;
}

std::uint64_t routing_seed(std::uint64_t base, LayerShape const& s, std::int64_t tokens,
                           std::int64_t index) {
  std::uint64_t h = base;
  for (char c : s.name)
    h = Rng::mix(h, static_cast<std::uint64_t>(static_cast<unsigned char>(c)));
  h = Rng::mix(h, static_cast<std::uint64_t>(tokens));
  return Rng::mix(h, static_cast<std::uint64_t>(index) + 0x100000000ULL);
}

std::uint64_t weight_seed(std::uint64_t base, LayerShape const& s) {
  return routing_seed(Rng::mix(base, 0x77656967687473ULL), s, 0, 0); // "weights"
}

std::uint64_t replay_predecessor(std::uint64_t seed) {
  return Rng::mix(seed, 0x7265706c6179ULL); // "replay"
}

std::vector<float> router_scores(std::uint64_t seed, std::int64_t tokens, std::int64_t experts) {
  std::vector<float> s(static_cast<std::size_t>(tokens * experts));
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t x = 0; x < experts; ++x)
      s[static_cast<std::size_t>(t * experts + x)] = router_score(seed, t, x, experts);
  return s;
}

} // namespace moefin::chain
