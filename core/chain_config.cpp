#include "core/chain_config.hpp"

#include "core/cli.hpp"
#include "core/errors.hpp"
#include "core/pdl/verifier.hpp"
#include "core/rng.hpp"
#include "core/router_scores.hpp"

#include <sstream>
#include <stdexcept>

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

std::array<char const*, kLayerBuffers> const& layer_buffer_names() {
  static constexpr std::array<char const*, kLayerBuffers> kNames = {"expert_ids",
                                                                    "expert_weights",
                                                                    "expanded_to_permuted",
                                                                    "permuted_to_token",
                                                                    "permuted_to_expanded",
                                                                    "expert_counts",
                                                                    "expert_offsets",
                                                                    "cta_to_expert",
                                                                    "total_padded_rows",
                                                                    "permuted",
                                                                    "gemm1_out",
                                                                    "act_out",
                                                                    "gemm2_out",
                                                                    "out"};
  return kNames;
}

FinalizeRun finalize_run(ChainConfig const& cfg, std::string const& variant) {
  bool const small_batch = variant == "small_batch";
  if (!small_batch && variant != "scalar" && variant != "vecload" && variant != "deepseek_fp8")
    throw InputError("finalize variant '" + variant +
                     "' not one of {scalar, vecload, small_batch, deepseek_fp8}");
  FinalizeRun r;
  Trigger const t = cfg.at(Kernel::kFinalize).trigger;
  r.trigger = t != Trigger::kDefault ? t : small_batch ? Trigger::kEntry : Trigger::kExit;
  r.metadata_before_wait = cfg.metadata_before_wait && (small_batch || variant == "vecload");
  return r;
}

namespace {

/// Buffers of the verifier chain that chain::buffer_name does not name.
constexpr char const* kInputs[] = {"scores", "hidden_states", "w1", "w2"};
constexpr char const* kSnapshot = "snapshot";
constexpr char const* kChecksums = "checksums";

std::vector<std::string> layer_buffers() {
  auto const& n = layer_buffer_names();
  return {n.begin(), n.end()};
}

std::string buffer_note(std::string const& b) {
  if (b == "scores")
    return "router logits of the layer (its own slice per iteration; written before the batch)";
  if (b == "hidden_states" || b == "w1" || b == "w2")
    return "layer input, written before the batch";
  if (b == kSnapshot)
    return "the permuted indices finalize used (when meta=before), for the stale-read count";
  if (b == kChecksums)
    return "per-iteration hashes of every buffer and the stale-read counts";
  return "chain buffer (kernels/chain/chain.hpp)";
}

} // namespace

std::vector<KernelDescription> describe_chain(ChainConfig const& cfg,
                                              std::string const& finalize_variant) {
  FinalizeRun const fin = finalize_run(cfg, finalize_variant);
  std::vector<std::string> const layer = layer_buffers();
  std::vector<std::string> const routing_out(layer.begin(), layer.begin() + 9);
  std::vector<KernelDescription> d;
  auto add = [&](std::string name, bool pdl, Trigger trigger, std::vector<std::string> before,
                 std::vector<std::string> after, std::vector<std::string> writes) {
    KernelDescription x;
    x.name = std::move(name);
    x.pdl = pdl;
    x.trigger = trigger_name(trigger);
    x.reads_before_wait = std::move(before);
    x.reads_after_wait = std::move(after);
    x.writes = std::move(writes);
    d.push_back(std::move(x));
  };
  auto knob = [&](Kernel k, std::vector<std::string> after, std::vector<std::string> writes) {
    add(kernel_name(k), cfg.at(k).pdl, cfg.trigger(k), {}, std::move(after), std::move(writes));
  };
  // Every chain kernel waits before its first routing-dependent read (pdl_wait_point); the
  // weights and the router scores are written before the batch starts.
  // Routing reads back the expert ids it wrote when it builds the layout (its SASS says so:
  // test_audit).
  knob(Kernel::kRouting, {"scores", "expert_ids"}, routing_out);
  knob(Kernel::kPermute, {"total_padded_rows", "permuted_to_token", "hidden_states"}, {"permuted"});
  knob(Kernel::kGemm1,
       {"total_padded_rows", "cta_to_expert", "permuted_to_token", "permuted", "w1"},
       {"gemm1_out"});
  knob(Kernel::kActivation, {"total_padded_rows", "gemm1_out"}, {"act_out"});
  knob(Kernel::kGemm2, {"total_padded_rows", "cta_to_expert", "permuted_to_token", "act_out", "w2"},
       {"gemm2_out"});
  std::vector<std::string> const meta = {"expanded_to_permuted", "expert_weights"};
  std::vector<std::string> fin_after = {"gemm2_out"};
  if (!fin.metadata_before_wait)
    fin_after.insert(fin_after.begin(), meta.begin(), meta.end());
  // The snapshot is taken (after the wait) only when the run asks for metadata before the wait,
  // whatever the variant does with it.
  std::vector<std::string> fin_writes = {"out"};
  if (cfg.metadata_before_wait)
    fin_writes.push_back(kSnapshot);
  add(kernel_name(Kernel::kFinalize), cfg.at(Kernel::kFinalize).pdl, fin.trigger,
      fin.metadata_before_wait ? meta : std::vector<std::string>{}, fin_after, fin_writes);
  std::vector<std::string> hashed = layer;
  if (cfg.metadata_before_wait)
    hashed.push_back(kSnapshot);
  add("checksum", true, Trigger::kExit, {}, hashed, {kChecksums});
  return d;
}

pdl::Chain verifier_chain(ChainConfig const& cfg, std::string const& finalize_variant, bool graph,
                          int iterations) {
  pdl::Chain c;
  c.name = "moefin_race_cell";
  c.description = describe(cfg) + " finalize_variant=" + finalize_variant;
  c.source = "kernels/chain/chain.cu (ChainRunner, checked layers), core/chain_config.cpp";
  for (char const* b : kInputs)
    c.buffers.push_back(b);
  for (auto const& b : layer_buffers())
    c.buffers.push_back(b);
  c.buffers.push_back(kSnapshot);
  c.buffers.push_back(kChecksums);
  for (auto const& b : c.buffers)
    c.buffer_notes.push_back(buffer_note(b));
  c.iterations = iterations;
  auto op = [&](pdl::OpKind kind, std::string const& buffer = {}) {
    pdl::Op o;
    o.kind = kind;
    if (!buffer.empty()) {
      o.buffer = c.buffer_index(buffer);
      if (o.buffer < 0)
        throw std::logic_error("verifier_chain: no buffer " + buffer);
    }
    return o;
  };
  for (KernelDescription const& k : describe_chain(cfg, finalize_variant)) {
    Trigger t = Trigger::kExit;
    if (!parse_trigger(k.trigger.c_str(), &t) || t == Trigger::kDefault)
      throw std::logic_error("verifier_chain: unresolved trigger of " + k.name);
    pdl::Path p;
    if (t == Trigger::kEntry)
      p.push_back(op(pdl::OpKind::kTrigger));
    for (auto const& b : k.reads_before_wait)
      p.push_back(op(pdl::OpKind::kRead, b));
    if (k.waits)
      p.push_back(op(pdl::OpKind::kWait));
    if (t == Trigger::kAfterWait)
      p.push_back(op(pdl::OpKind::kTrigger));
    for (auto const& b : k.reads_after_wait)
      p.push_back(op(pdl::OpKind::kRead, b));
    for (auto const& b : k.writes)
      p.push_back(op(pdl::OpKind::kWrite, b));
    if (t == Trigger::kAfterWrites)
      p.push_back(op(pdl::OpKind::kTrigger));
    pdl::Kernel kern;
    kern.name = k.name;
    kern.pdl = k.pdl;
    kern.ctas = 2; // one CTA on the weakest path decides (core/pdl/verifier.hpp); two show it
    kern.paths.push_back(std::move(p));
    c.kernels.push_back(std::move(kern));
  }
  return graph ? pdl::captured_graph(c, iterations) : c;
}

std::string chain_json(ChainConfig const& cfg, std::string const& finalize_variant, bool graph) {
  return pdl::to_json(verifier_chain(cfg, finalize_variant, graph));
}

CellVerdict verify_cell(ChainConfig const& cfg, std::string const& finalize_variant, bool graph) {
  pdl::Chain const c = verifier_chain(cfg, finalize_variant, graph);
  pdl::Report const r = pdl::verify(c, {false});
  CellVerdict v;
  v.chain = r.verdict();
  v.races = r.races();
  v.pairs = r.pairs.size();
  int const n = kNumKernels + 1; // the layer and its checksum
  std::vector<int> fin = {static_cast<int>(Kernel::kFinalize)};
  if (graph)
    for (int it = 1; it < kVerifierIterations; ++it)
      fin.push_back(it * n + static_cast<int>(Kernel::kFinalize));
  bool const before = finalize_run(cfg, finalize_variant).metadata_before_wait;
  for (char const* b : {"expanded_to_permuted", "expert_weights"})
    if (pdl::reads_verdict(c, r, fin, c.buffer_index(b), before) == pdl::Verdict::kRace)
      v.metadata = pdl::Verdict::kRace;
  return v;
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
