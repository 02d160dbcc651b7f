#include "experiments/finalize/grid.hpp"

#include "core/cli.hpp"
#include "core/finalize_inputs.hpp"
#include "core/ops/errors.hpp"
#include "kernels/finalize/finalize_policy.hpp"
#include "kernels/finalize/small_batch_v2.hpp"

#include <algorithm>
#include <set>
#include <sstream>

namespace moefin::fin {

using finalize::Options;
using finalize::WeightType;

namespace {

std::vector<std::string> names_of(unsigned list) {
  std::vector<std::string> out;
  for (auto const* v : finalize::variants(list))
    out.push_back(v->name);
  return out;
}

} // namespace

std::vector<std::string> sweep_variant_names() {
  return names_of(finalize::kListSweep);
}

std::vector<std::string> check_variant_names() {
  return names_of(finalize::kListCheck);
}

Options variant_options(std::string const& name, std::string const& flag) {
  Options o;
  int chunks = 0, loads = 0;
  Trigger t = Trigger::kEntry;
  bool warp_groups = false;
  if (finalize::v2::parse_candidate(name, &chunks, &loads, &t, &warp_groups)) {
    // A small_batch_v2 geometry candidate of the policy measurement.
    o.variant = &finalize::variant(warp_groups           ? "small_batch_v2_fi_layout"
                                   : t == Trigger::kExit ? "small_batch_v2_late_trigger"
                                                         : "small_batch_v2",
                                   flag);
    o.v2_chunks = chunks;
    o.v2_loads = loads;
    return o;
  }
  if (name.compare(0, 15, "small_batch_v2/") == 0)
    throw InputError(flag + ": '" + name +
                     "' is not a small_batch_v2 geometry candidate (small_batch_v2/c<chunks>/"
                     "l<loads>[/exit|/w], chunks a power of two in [4, 128], loads 1, 2, 4 or 8)");
  o.variant = &finalize::variant(name, flag);
  return o;
}

std::string expand_v2_candidates(std::string const& list, std::vector<Shape> const& shapes) {
  std::string out;
  for (auto const& item : split_names("--variants", list)) {
    bool const entry = item == "small_batch_v2/candidates";
    bool const exit = item == "small_batch_v2/candidates/exit";
    bool const warp = item == "small_batch_v2/candidates/w";
    std::vector<std::string> names;
    if (entry || exit || warp) {
      std::set<std::string> seen;
      for (auto const& s : shapes)
        for (auto const& g : finalize::v2::candidates(s.top_k)) {
          auto const n = finalize::v2::candidate_name(
              g.chunks, g.loads, exit ? Trigger::kExit : Trigger::kEntry, warp);
          if (seen.insert(n).second)
            names.push_back(n);
        }
    } else {
      names.push_back(item);
    }
    for (auto const& n : names)
      out += (out.empty() ? "" : ",") + n;
  }
  return out;
}

std::vector<std::string> split_names(std::string const& flag, std::string const& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    out.push_back(item);
  if (out.empty() || std::any_of(out.begin(), out.end(), [](auto const& s) { return s.empty(); }))
    throw InputError(flag + ": '" + text + "' is not a comma-separated list of names");
  return out;
}

std::vector<std::string> parse_choices(std::string const& flag, std::string const& text,
                                       std::vector<std::string> const& allowed) {
  auto names = split_names(flag, text);
  for (auto const& n : names)
    cli::check_choice(flag, n, allowed);
  return names;
}

std::vector<NamedVariant> parse_variants(std::string const& flag, std::string const& text,
                                         bool bf16_only) {
  std::vector<NamedVariant> out;
  for (auto const& n : split_names(flag, text)) {
    Options const o = variant_options(n, flag);
    if (bf16_only && o.variant->fp8_output)
      throw InputError(flag + ": '" + n + "' writes E4M3 outputs; this experiment times bf16 ones");
    if (o.variant->inside_gemm2)
      throw InputError(flag + ": '" + n +
                       "' has no kernel of its own: it runs inside GEMM2, in the layer chain only "
                       "(e.g. sweep layer --finalize new," +
                       n + " --weights-format bf16-tiled)");
    if (std::none_of(out.begin(), out.end(), [&](auto const& v) { return v.name == n; }))
      out.push_back({n, o.variant, o});
  }
  return out;
}

std::vector<NamedVariant> with_baselines(std::vector<NamedVariant> variants) {
  std::vector<NamedVariant> out;
  auto has = [&](std::string const& n) {
    return std::any_of(out.begin(), out.end(), [&](auto const& v) { return v.name == n; });
  };
  for (auto const& v : variants) {
    auto const& b = finalize::baseline_of(*v.entry);
    if (!has(b.name))
      out.push_back({b.name, &b, variant_options(b.name)});
  }
  for (auto& v : variants)
    if (!has(v.name))
      out.push_back(std::move(v));
  return out;
}

int baseline_index(std::vector<NamedVariant> const& variants, std::size_t i) {
  auto const& b = finalize::baseline_of(*variants.at(i).entry);
  for (std::size_t j = 0; j < variants.size(); ++j)
    if (variants[j].entry == &b)
      return static_cast<int>(j);
  return -1;
}

std::string join(std::vector<std::string> const& names) {
  std::string s;
  for (auto const& n : names)
    s += (s.empty() ? "" : ",") + n;
  return s;
}

std::vector<std::int64_t> const& grid_hidden() {
  static std::vector<std::int64_t> const h{1024, 2048, 2880, 3584, 4096, 5120, 6144, 7168};
  return h;
}

std::vector<std::int64_t> const& grid_top_k() {
  static std::vector<std::int64_t> const k{1, 2, 4, 6, 8, 10, 16, 22, 32};
  return k;
}

namespace {

std::int64_t row_ctas(std::int64_t hidden) {
  return (hidden + finalize::Policy::kRuleColumns - 1) / finalize::Policy::kRuleColumns;
}

} // namespace

bool in_regime(std::int64_t hidden, std::int64_t tokens, int budget) {
  return row_ctas(hidden) * tokens < budget;
}

std::vector<std::int64_t> regime_tokens(std::int64_t hidden, int budget) {
  std::vector<std::int64_t> t;
  for (std::int64_t v = 1; v <= 256; v *= 2)
    if (in_regime(hidden, v, budget))
      t.push_back(v);
  std::int64_t const last = (budget - 1) / row_ctas(hidden);
  if (last >= 1 && (t.empty() || t.back() != last))
    t.push_back(last);
  return t;
}

std::vector<WeightType> parse_weights(std::string const& flag, std::string const& text) {
  std::vector<WeightType> out;
  for (auto const& n : parse_choices(flag, text, {"bf16", "fp32", "none"}))
    out.push_back(n == "bf16"   ? WeightType::kBf16
                  : n == "fp32" ? WeightType::kFp32
                                : WeightType::kNone);
  return out;
}

std::string shape_key(Shape const& s) {
  return "H=" + std::to_string(s.hidden) + ",T=" + std::to_string(s.tokens) +
         ",K=" + std::to_string(s.top_k) + ",w=" + weight_type_name(s.weights);
}

std::vector<Shape> make_shapes(std::vector<std::int64_t> const& hidden,
                               std::vector<std::int64_t> const& tokens,
                               std::vector<std::int64_t> const& top_k,
                               std::vector<WeightType> const& weights) {
  std::vector<Shape> out;
  for (auto h : hidden)
    for (auto t : tokens.empty() ? regime_tokens(h) : tokens)
      for (auto k : top_k)
        for (auto w : weights)
          out.push_back({h, t, k, w});
  return out;
}

finalize::FinalizeParams shape_params(Shape const& s, std::int64_t hidden_padded) {
  finalize::FinalizeParams p;
  p.num_tokens = s.tokens;
  p.hidden = s.hidden;
  p.hidden_padded = hidden_padded > 0 ? hidden_padded : s.hidden;
  p.top_k = s.top_k;
  p.weight_type = s.weights;
  return p;
}

std::string dispatch_name(Shape const& s, int budget) {
  Options o;
  o.cta_budget = budget;
  return finalize::select(shape_params(s), o).name;
}

GridAxes parse_grid_axes(GridFlags const& f) {
  GridAxes g;
  g.hidden =
      f.hidden.empty() ? grid_hidden() : cli::parse_int_list("--hidden", f.hidden, 1, 1 << 20);
  if (!f.tokens.empty() && f.tokens != "regime")
    g.tokens = cli::parse_int_list("--tokens", f.tokens, 1, 1 << 20);
  g.top_k = f.top_k.empty()
                ? grid_top_k()
                : cli::parse_int_list("--top-k", f.top_k, 1, finalize::Policy::kMaxTopK);
  g.weights = parse_weights("--weights", f.weights.empty() ? "bf16,fp32" : f.weights);
  return g;
}

std::vector<Shape> parse_grid(GridFlags const& f) {
  GridAxes const g = parse_grid_axes(f);
  return make_shapes(g.hidden, g.tokens, g.top_k, g.weights);
}

void add_grid_axes(bench::Benchmark& b, GridAxes const& g) {
  b.axis(bench::int_axis("H", g.hidden));
  bench::Axis t = bench::int_axis("T", g.tokens);
  if (g.tokens.empty())
    t.from = [](bench::Config const& c) {
      std::vector<bench::Value> v;
      for (auto x : regime_tokens(c.num("H")))
        v.emplace_back(x);
      return v;
    };
  b.axis(t);
  b.axis(bench::int_axis("K", g.top_k));
  std::vector<std::string> w;
  for (auto x : g.weights)
    w.push_back(weight_type_name(x));
  bench::Axis wa = bench::string_axis("weights", w);
  wa.key_label = "w";
  b.axis(wa);
}

Shape shape_of(bench::Config const& c) {
  Shape s{c.num("H"), c.num("T"), c.num("K"), WeightType::kBf16};
  if (!finalize::parse_weight_type(c.str("weights"), &s.weights))
    throw InputError("weights '" + c.str("weights") + "' is not none, bf16 or fp32");
  return s;
}

std::string unsupported_reason(finalize::FinalizeVariant const& v, Shape const& s,
                               std::int64_t hidden_padded) {
  if (v.needs_128bit_rows && (s.hidden % finalize::Policy::kVecElems != 0 ||
                              hidden_padded % finalize::Policy::kVecElems != 0))
    return "H=" + std::to_string(s.hidden) + " hidden_padded=" + std::to_string(hidden_padded) +
           " is not a multiple of 8: " + v.name +
           " reads 128-bit rows (select picks scalar; forcing it is an InputError)";
  if (v.max_top_k > 0 && s.top_k > v.max_top_k)
    return v.name + " supports top-K <= " + std::to_string(v.max_top_k);
  return "";
}

void add_grid_options(cli::po::options_description& desc, GridFlags& f) {
  desc.add_options()("hidden", cli::po::value(&f.hidden)->default_value(""),
                     "hidden sizes, e.g. 1024,7168 (default: 1024,2048,2880,3584,4096,5120,"
                     "6144,7168)")(
      "tokens", cli::po::value(&f.tokens)->default_value("regime"),
      "token counts, or 'regime': 1,2,4..256 inside ceil(H/256)*T < 1184 plus its last T")(
      "top-k", cli::po::value(&f.top_k)->default_value(""),
      "top-K values, 1..64 (default: 1,2,4,6,8,10,16,22,32)")(
      "weights", cli::po::value(&f.weights)->default_value("bf16,fp32"),
      "expert weight types: bf16, fp32, none");
}

void check_grid_options(cli::po::variables_map const& vm) {
  for (char const* name : {"hidden", "tokens", "top-k", "weights"})
    if (vm.count(name) && !vm[name].defaulted() && vm[name].as<std::string>().empty())
      throw InputError(std::string("--") + name + ": empty list");
}

} // namespace moefin::fin
