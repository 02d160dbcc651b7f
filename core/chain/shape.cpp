#include "core/chain/shape.hpp"

#include "core/chain/presets.hpp"
#include "core/cli.hpp"
#include "core/ops/errors.hpp"
#include "core/ops/ranges.hpp"
#include "core/rng.hpp"
#include "core/router_scores.hpp"

#include <algorithm>
#include <sstream>

namespace moefin::chain {

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

std::vector<LayerShape> parse_shapes(std::string const& text, std::string const& flag) {
  std::vector<LayerShape> out;
  for (auto const& item : split_list(text, flag))
    out.push_back(parse_shape(item, flag));
  return out;
}

void validate(LayerShape const& s, std::int64_t tokens, std::int64_t tile_m) {
  std::string const n = "shape " + s.name + ": ";
  ranges::check_range<std::int64_t>(n + "hidden", s.hidden, 64, 16384);
  ranges::check_multiple(n + "hidden", s.hidden, 64);
  ranges::check_range<std::int64_t>(n + "intermediate", s.inter, 64, 8192);
  ranges::check_multiple(n + "intermediate", s.inter, 64);
  ranges::check_range<std::int64_t>(n + "top-K", s.top_k, 1, 32);
  ranges::check_range<std::int64_t>(n + "experts", s.experts, s.top_k, 1024);
  ranges::check_range<std::int64_t>("--tokens", tokens, 1, 128);
  if (tile_m != 8 && tile_m != 16 && tile_m != 32 && tile_m != 64 && tile_m != 128)
    throw InputError("--tile-m: value " + std::to_string(tile_m) +
                     " not one of {8, 16, 32, 64, 128}");
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
