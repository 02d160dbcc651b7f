#include "experiments/routing/routing_file.hpp"

#include "core/finalize_inputs.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace moefin::cmd {

namespace po = cli::po;

namespace {

char const* const kRoutingFlags[] = {
    "tokens",       "experts",        "top-k",         "distribution",  "zipf-s", "hot-expert",
    "score-method", "no-renormalize", "drop-fraction", "local-experts", "tile"};

/// "BEGIN:COUNT" -> {begin, count}; InputError naming --local-experts otherwise.
LocalRange parse_local_range(std::string const& text) {
  auto const colon = text.find(':');
  auto bad = [&]() {
    return InputError("--local-experts: value '" + text +
                      "' is not BEGIN:COUNT (e.g. 0:32, the first 32 experts)");
  };
  if (colon == std::string::npos)
    throw bad();
  LocalRange l;
  try {
    std::size_t used_a = 0, used_b = 0;
    std::string const a = text.substr(0, colon), b = text.substr(colon + 1);
    l.begin = std::stoll(a, &used_a);
    l.count = std::stoll(b, &used_b);
    if (used_a != a.size() || used_b != b.size())
      throw bad();
  } catch (std::logic_error const&) {
    throw bad();
  }
  return l;
}

std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

template <class T> std::vector<T> to_vector(std::vector<std::int64_t> const& v) {
  return std::vector<T>(v.begin(), v.end());
}

} // namespace

void add_routing_options(po::options_description& desc) {
  desc.add_options()("tokens", po::value<std::int64_t>()->default_value(16),
                     "tokens T, 1..1048576")(
      "experts", po::value<std::int64_t>()->default_value(64), "experts E, 1..65536")(
      "top-k", po::value<std::int64_t>()->default_value(8), "experts per token K, 1..min(64, E)")(
      "distribution", po::value<std::string>()->default_value("uniform"),
      "uniform | zipf | hot | round_robin | scores (router scores through softmax and top-K)")(
      "zipf-s", po::value<double>()->default_value(1.2),
      "zipf: P(expert e) ~ 1/(e+1)^s, s in [0, 16]")("hot-expert",
                                                     po::value<std::int64_t>()->default_value(0),
                                                     "hot: the expert every token takes, 0..E-1")(
      "score-method", po::value<std::string>()->default_value("softmax_topk"),
      "scores: softmax_topk (softmax, top-K, renormalize) | topk_softmax")(
      "no-renormalize", po::bool_switch(), "keep raw weights instead of summing to 1 per token")(
      "drop-fraction", po::value<double>()->default_value(0.0),
      "fraction of experts that are not local (the highest ids), 0..1")(
      "local-experts", po::value<std::string>(),
      "BEGIN:COUNT, the local expert range (expert parallelism); default all")(
      "tile", po::value<std::int64_t>()->default_value(128),
      "GEMM tile rows; expert groups are padded to a multiple, 1..4096");
}

void add_result_file_options(po::options_description& desc, std::string const& seed_help,
                             std::string const& default_out) {
  desc.add_options()("seed", po::value<std::uint64_t>()->default_value(2026), seed_help.c_str())(
      "out,o", po::value<std::string>()->default_value(default_out),
      "result file to create (HDF5)")("overwrite", po::bool_switch(),
                                      "replace the result file if it exists");
}

RoutingSpec routing_spec_from(po::variables_map const& vm, std::uint64_t seed,
                              finalize::WeightType weights) {
  RoutingSpec s;
  s.num_tokens = vm["tokens"].as<std::int64_t>();
  s.num_experts = vm["experts"].as<std::int64_t>();
  s.top_k = vm["top-k"].as<std::int64_t>();
  std::string const dist = vm["distribution"].as<std::string>();
  if (!parse_distribution(dist, &s.distribution))
    cli::check_choice("--distribution", dist, {"uniform", "zipf", "hot", "round_robin", "scores"});
  std::string const method = vm["score-method"].as<std::string>();
  if (!parse_method(method, &s.score_method))
    cli::check_choice("--score-method", method, {"softmax_topk", "topk_softmax"});
  s.zipf_s = vm["zipf-s"].as<double>();
  s.hot_expert = vm["hot-expert"].as<std::int64_t>();
  s.renormalize = !vm["no-renormalize"].as<bool>();
  s.drop_fraction = vm["drop-fraction"].as<double>();
  if (vm.count("local-experts")) {
    LocalRange const l = parse_local_range(vm["local-experts"].as<std::string>());
    s.local_expert_begin = l.begin;
    s.num_local_experts = l.count;
  }
  s.seed = seed;
  s.weight_type = weights;
  validate(s);
  cli::check_range<std::int64_t>("--tile", vm["tile"].as<std::int64_t>(), 1, 1 << 12);
  return s;
}

std::string explicit_routing_flag(po::variables_map const& vm) {
  for (char const* f : kRoutingFlags)
    if (vm.count(f) && !vm[f].defaulted() &&
        !(std::string(f) == "no-renormalize" && !vm[f].as<bool>()))
      return std::string("--") + f;
  return "";
}

void write_routing(h5::ResultWriter& file, std::string const& g, RoutingSpec const& spec,
                   Routing const& r, RoutingLayout const& L) {
  auto const T = static_cast<std::size_t>(r.num_tokens), K = static_cast<std::size_t>(r.top_k);
  auto const rows = static_cast<std::size_t>(L.total_padded_rows);
  auto const n_local = static_cast<std::size_t>(L.num_local_experts);
  file.write_array(g, "expert_ids", r.expert_ids, {T, K});
  file.write_array(g, "weights_fp32", r.weights, {T, K});
  file.write_array(g, "weights_bf16", r.weights_bf16, {T, K});
  file.write_array(g, "expanded_to_permuted", L.expanded_to_permuted, {T, K});
  file.write_array(g, "permuted_to_token", L.permuted_to_token, {rows});
  file.write_array(g, "permuted_to_expanded", L.permuted_to_expanded, {rows});
  file.write_array(g, "expert_counts", L.expert_counts, {n_local});
  file.write_array(g, "expert_offsets", L.expert_offsets, {n_local + 1});
  file.write_array(g, "cta_to_expert", L.cta_to_expert, {L.cta_to_expert.size()});
  file.write_array(g, "total_padded_rows", std::vector<std::int64_t>{L.total_padded_rows}, {1});
  if (spec.distribution == Distribution::kScores)
    file.write_array(g, "scores", router_scores(r.num_tokens, r.num_experts, spec.seed),
                     {T, static_cast<std::size_t>(r.num_experts)});

  std::map<std::string, std::string> const attrs{
      {"tokens", std::to_string(r.num_tokens)},
      {"experts", std::to_string(r.num_experts)},
      {"top_k", std::to_string(r.top_k)},
      {"distribution", distribution_name(spec.distribution)},
      {"zipf_s", num(spec.zipf_s)},
      {"hot_expert", std::to_string(spec.hot_expert)},
      {"score_method", method_name(spec.score_method)},
      {"renormalize", spec.renormalize ? "true" : "false"},
      {"weights", weight_type_name(spec.weight_type)},
      {"drop_fraction", num(spec.drop_fraction)},
      {"local_expert_begin", std::to_string(L.local_expert_begin)},
      {"num_local_experts", std::to_string(L.num_local_experts)},
      {"tile", std::to_string(L.tile)},
      {"seed", std::to_string(spec.seed)},
      {"dropped_entries", std::to_string(dropped_entries(L))},
      {"total_padded_rows", std::to_string(L.total_padded_rows)},
  };
  for (auto const& kv : attrs)
    file.set_attr(g, kv.first, kv.second);
}

StoredRouting read_routing(std::string const& path, std::string const& g) {
  h5::ResultReader reader(path);
  if (!reader.has_group(g))
    throw FileError(path, "no /" + g + " group (not written by 'moefin route'?)");
  StoredRouting s;
  s.attrs = reader.group_attrs(g);
  auto attr_int = [&](char const* name) -> std::int64_t {
    auto it = s.attrs.find(name);
    if (it == s.attrs.end())
      throw FileError(path, "/" + g + " lacks the attribute " + name);
    try {
      return std::stoll(it->second);
    } catch (std::logic_error const&) {
      throw FileError(path,
                      "/" + g + " attribute " + name + " = '" + it->second + "' is not an integer");
    }
  };
  auto read = [&](char const* name, std::vector<std::size_t> const& want) {
    std::vector<std::size_t> dims;
    auto v = reader.read_ints(g, name, &dims);
    if (dims != want) {
      std::string shape;
      for (auto d : want)
        shape += (shape.empty() ? "" : ", ") + std::to_string(d);
      throw FileError(path, "/" + g + "/" + name + " does not have the shape [" + shape + "]");
    }
    return v;
  };

  Routing& r = s.routing;
  r.num_tokens = attr_int("tokens");
  r.num_experts = attr_int("experts");
  r.top_k = attr_int("top_k");
  if (r.num_tokens < 1 || r.top_k < 1 || r.num_experts < 1)
    throw FileError(path, "/" + g + " has non-positive tokens, experts or top_k");
  auto const T = static_cast<std::size_t>(r.num_tokens), K = static_cast<std::size_t>(r.top_k);
  r.expert_ids = to_vector<std::int32_t>(read("expert_ids", {T, K}));
  r.weights_bf16 = to_vector<std::uint16_t>(read("weights_bf16", {T, K}));
  std::vector<std::size_t> dims;
  auto const w = reader.read_reals(g, "weights_fp32", &dims);
  if (dims != std::vector<std::size_t>{T, K})
    throw FileError(path, "/" + g + "/weights_fp32 does not have the shape [T, K]");
  r.weights.assign(w.begin(), w.end());
  try {
    s.layout = build_layout(r, attr_int("tile"), attr_int("local_expert_begin"),
                            attr_int("num_local_experts"));
  } catch (InputError const& e) {
    throw FileError(path, "/" + g + ": " + e.what());
  }
  RoutingSpec& spec = s.spec;
  spec.num_tokens = r.num_tokens;
  spec.num_experts = r.num_experts;
  spec.top_k = r.top_k;
  parse_distribution(s.attrs["distribution"], &spec.distribution);
  parse_method(s.attrs["score_method"], &spec.score_method);
  parse_weight_type(s.attrs["weights"], &spec.weight_type);
  spec.renormalize = s.attrs["renormalize"] != "false";
  try {
    spec.seed = std::stoull(s.attrs["seed"]);
  } catch (std::logic_error const&) {
    throw FileError(path, "/" + g + " attribute seed = '" + s.attrs["seed"] + "' is not a seed");
  }
  spec.hot_expert = attr_int("hot_expert");
  spec.zipf_s = std::strtod(s.attrs["zipf_s"].c_str(), nullptr);
  spec.drop_fraction = std::strtod(s.attrs["drop_fraction"].c_str(), nullptr);
  spec.local_expert_begin = s.layout.local_expert_begin;
  spec.num_local_experts = s.layout.num_local_experts;

  RoutingLayout const& L = s.layout;
  auto check_same = [&](char const* name, std::vector<std::int32_t> const& derived,
                        std::vector<std::size_t> const& dims) {
    auto const stored = read(name, dims);
    if (!std::equal(stored.begin(), stored.end(), derived.begin()))
      throw FileError(path, "/" + g + "/" + name +
                                " is not the layout build_layout derives from its expert_ids");
  };
  check_same("expanded_to_permuted", L.expanded_to_permuted, {T, K});
  check_same("permuted_to_token", L.permuted_to_token, {L.permuted_to_token.size()});
  check_same("permuted_to_expanded", L.permuted_to_expanded, {L.permuted_to_expanded.size()});
  check_same("expert_counts", L.expert_counts, {L.expert_counts.size()});
  check_same("expert_offsets", L.expert_offsets, {L.expert_offsets.size()});
  check_same("cta_to_expert", L.cta_to_expert, {L.cta_to_expert.size()});
  return s;
}

std::string describe_layout(Routing const& r, RoutingLayout const& L) {
  std::int64_t used = 0;
  for (auto c : L.expert_counts)
    used += c > 0;
  std::ostringstream os;
  os << r.num_tokens * r.top_k << " entries, " << dropped_entries(L) << " dropped; local experts ["
     << L.local_expert_begin << ", " << L.local_expert_begin + L.num_local_experts << "), " << used
     << " with tokens; " << L.total_padded_rows << " padded rows (tile " << L.tile << ")";
  return os.str();
}

void check_can_create(std::string const& path, bool overwrite) {
  auto const parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec)
      throw FileError(path, "cannot create its directory (" + ec.message() + ")");
  }
  if (!overwrite && std::filesystem::exists(path))
    throw FileError(path, "exists already (pass --overwrite to replace it)");
}

h5::ResultWriter create_result_file(std::string const& path, std::uint64_t seed, bool overwrite) {
  check_can_create(path, overwrite);
  return h5::ResultWriter::create(path, h5::collect_provenance(seed), overwrite);
}

} // namespace moefin::cmd
