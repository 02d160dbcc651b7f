// Candidate launch policies of the split-K decode GEMM: parsing and applicability. Host-only,
// so that the sweep's validation is unit-tested without a GPU.

#include "kernels/gemm/decode_candidates.hpp"

#include "core/ops/errors.hpp"

#include <algorithm>
#include <sstream>

namespace moefin::gemm {

namespace {

[[noreturn]] void reject(std::string const& flag, std::string const& spec, std::string const& why) {
  throw InputError(flag + ": candidate '" + spec + "' " + why +
                   " (knobs: ks1, ks2, ks4, ks8, cta2, deep, loads, tscale, wpack, wide, tiles, "
                   "lean, "
                   "joined by '+')");
}

} // namespace

DecodeCandidate parse_candidate(std::string const& spec, std::string const& flag) {
  if (spec.empty())
    reject(flag, spec, "is empty");
  if (spec.back() == '+')
    reject(flag, spec, "ends with '+'");
  DecodeCandidate c;
  bool cta2 = false;
  std::stringstream ss(spec);
  std::string knob;
  while (std::getline(ss, knob, '+')) {
    if (knob == "loads" || knob == "cta2" || knob == "deep" || knob == "tscale" ||
        knob == "wpack" || knob == "wide" || knob == "tiles" || knob == "lean") {
      bool& on = knob == "loads"    ? c.loads_only
                 : knob == "cta2"   ? cta2
                 : knob == "deep"   ? c.deep
                 : knob == "tscale" ? c.tiled_scales
                 : knob == "wpack"  ? c.packed_values
                 : knob == "wide"   ? c.wide
                 : knob == "tiles"  ? c.tiled_values
                                    : c.lean;
      if (on)
        reject(flag, spec, "repeats " + knob);
      on = true;
    } else if (knob == "ks1" || knob == "ks2" || knob == "ks4" || knob == "ks8") {
      if (c.split_k != 0)
        reject(flag, spec, "names two splits");
      c.split_k = knob[2] - '0';
    } else {
      reject(flag, spec, "has an unknown knob '" + knob + "'");
    }
  }
  if (c.tiled_values && (c.wide || c.packed_values || c.tiled_scales))
    reject(flag, spec, "names wide, wpack or tscale beside tiles, which is wide itself");
  if (c.wide && (c.packed_values || c.tiled_scales))
    reject(flag, spec, "names wpack or tscale beside wide, which reads packed values itself");
  c.wide = c.wide || c.tiled_values;
  if (c.packed_values && c.tiled_scales)
    reject(flag, spec, "names tscale beside wpack, which reads tiled scales itself");
  c.packed_values = c.packed_values || c.wide;
  c.tiled_scales = c.tiled_scales || c.packed_values;
  if (c.deep && (cta2 || c.loads_only))
    reject(flag, spec, "combines deep (one CTA per SM, with math) with cta2 or loads");
  if (c.tiled_scales && (c.deep || c.loads_only))
    reject(flag, spec,
           std::string("combines ") +
               (c.tiled_values    ? "tiles"
                : c.wide          ? "wide"
                : c.packed_values ? "wpack"
                                  : "tscale") +
               " (built for the default pipeline, with math) with deep or loads");
  if (c.lean && !c.tiled_scales)
    reject(flag, spec, "has lean without tscale (built into the tiled-scale kernel only)");
  c.ctas_per_sm = cta2 ? 2 : 0;
  c.name = "sk";
  if (c.loads_only)
    c.name += "+loads";
  if (cta2)
    c.name += "+cta2";
  if (c.deep)
    c.name += "+deep";
  if (c.tiled_values)
    c.name += "+tiles";
  else if (c.wide)
    c.name += "+wide";
  else if (c.packed_values)
    c.name += "+wpack";
  else if (c.tiled_scales)
    c.name += "+tscale";
  if (c.lean)
    c.name += "+lean";
  if (c.split_k != 0)
    c.name += "+ks" + std::to_string(c.split_k);
  if (c.name.size() > kMaxCandidateName)
    reject(flag, spec,
           "makes the name " + c.name + ", longer than " + std::to_string(kMaxCandidateName) +
               " characters");
  return c;
}

std::vector<DecodeCandidate> parse_candidates(std::string const& list, std::string const& flag) {
  std::vector<DecodeCandidate> out;
  if (list == "none")
    return out;
  std::stringstream ss(list);
  std::string spec;
  while (std::getline(ss, spec, ',')) {
    DecodeCandidate c = parse_candidate(spec, flag);
    if (std::any_of(out.begin(), out.end(), [&](auto const& o) { return o.name == c.name; }))
      throw InputError(flag + ": candidate " + c.name + " given twice");
    out.push_back(std::move(c));
  }
  if (out.empty() || list.back() == ',')
    throw InputError(flag + ": '" + list + "' is not a comma-separated list of candidates");
  return out;
}

std::string candidate_skip_reason(DecodeCandidate const& c, WeightFormat f, std::int64_t k,
                                  std::int64_t tile_m) {
  if (c.loads_only && tile_m != 16)
    return "loads is built for tile_m 16 only";
  if (c.deep && (f != WeightFormat::kFp4 || tile_m != 16))
    return std::string("deep is built for fp4 weights at tile_m 16, not ") + weight_format_name(f) +
           " at tile_m " + std::to_string(tile_m);
  if (c.tiled_scales && f != WeightFormat::kFp4)
    return std::string(c.tiled_values    ? "tiles reads tiled fp4 values and scales"
                       : c.wide          ? "wide reads packed fp4 values and tiled scales"
                       : c.packed_values ? "wpack is a layout of fp4 values and scales"
                                         : "tscale is a layout of fp4 scales") +
           ", not of " + weight_format_name(f) + " weights";
  std::int64_t const steps = k / DecodePolicy::step_k(f);
  if (c.split_k != 0 && steps % c.split_k != 0)
    return "ks" + std::to_string(c.split_k) + " does not divide the " + std::to_string(steps) +
           " k steps of k = " + std::to_string(k) + " (" + weight_format_name(f) + ")";
  return {};
}

DecodeOptions candidate_options(DecodeCandidate const& c, DecodeOptions base) {
  base.split_k = c.split_k;
  base.loads_only = c.loads_only;
  base.deep = c.deep;
  base.lean = c.lean;
  base.wide = c.wide;
  if (c.ctas_per_sm > 0)
    base.pdl.ctas_per_sm = c.ctas_per_sm;
  return base;
}

} // namespace moefin::gemm
