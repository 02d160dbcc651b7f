#define BOOST_TEST_MODULE decode_candidates
#include <boost/test/unit_test.hpp>

#include "core/ops/errors.hpp"
#include "kernels/gemm/decode_candidates.hpp"

#include <string>

// The candidate policies of `sweep gemm --candidates` (kernels/gemm/decode_candidates.hpp):
// their names are the variant column, so equal knobs must give one name and a bad spec must
// stop the sweep before the GPU run, naming the flag.

using namespace moefin;
using namespace moefin::gemm;

namespace {

bool names_flag(InputError const& e) {
  return std::string(e.what()).find("--candidates") != std::string::npos;
}

/// parse_candidate refuses `spec` with a message holding `says`.
void refused(char const* spec, char const* says) {
  try {
    parse_candidate(spec, "--candidates");
  } catch (InputError const& e) {
    BOOST_TEST(std::string(e.what()).find(says) != std::string::npos, e.what());
    return;
  }
  BOOST_ERROR("accepted " << spec);
}

} // namespace

BOOST_AUTO_TEST_CASE(knobs_in_any_order_give_one_canonical_name) {
  DecodeCandidate const a = parse_candidate("ks8+cta2", "--candidates");
  DecodeCandidate const b = parse_candidate("cta2+ks8", "--candidates");
  BOOST_TEST(a.name == "sk+cta2+ks8");
  BOOST_TEST(b.name == a.name);
  BOOST_TEST(a.split_k == 8);
  BOOST_TEST(a.ctas_per_sm == 2);
  BOOST_TEST(!a.loads_only);
  DecodeCandidate const l = parse_candidate("cta2+loads", "--candidates");
  BOOST_TEST(l.name == "sk+loads+cta2");
  BOOST_TEST(l.loads_only);
  BOOST_TEST(l.split_k == 0);
  BOOST_TEST(parse_candidate("ks1", "--candidates").split_k == 1);
  BOOST_TEST(parse_candidate("ks2", "--candidates").ctas_per_sm == 0);
}

BOOST_AUTO_TEST_CASE(bad_specs_are_input_errors_naming_the_flag) {
  for (char const* spec :
       {"", "ks3", "cta4", "cta2+cta2", "ks2+ks4", "ks4+", "+ks4", "ks4++cta2", "deep+cta2",
        "loads+deep", "deep+deep", "tscale+tscale", "tscale+deep", "loads+tscale", "lean",
        "lean+cta2", "tscale+lean+lean", "cta2+tscale+lean",
        "loads+cta2+ks8"}) // the last one: a name of 17 characters
    BOOST_CHECK_EXCEPTION(parse_candidate(spec, "--candidates"), InputError, names_flag);
  for (char const* list : {"ks4,ks4", "ks8+cta2,cta2+ks8", "ks4,", ",", "ks4,,ks8"})
    BOOST_CHECK_EXCEPTION(parse_candidates(list, "--candidates"), InputError, names_flag);
  BOOST_TEST(parse_candidates("none", "--candidates").empty());
}

BOOST_AUTO_TEST_CASE(the_default_list_parses_and_every_name_fits_the_variant_column) {
  auto const all = parse_candidates(kDefaultCandidates, "--candidates");
  BOOST_TEST(all.size() == 17u);
  for (auto const& c : all) {
    BOOST_TEST(c.name.size() <= kMaxCandidateName, c.name);
    BOOST_TEST(c.name.rfind("sk+", 0) == 0u, c.name);
  }
}

BOOST_AUTO_TEST_CASE(a_split_that_does_not_divide_the_k_steps_is_skipped_with_the_reason) {
  auto const ks8 = parse_candidate("ks8", "--candidates");
  auto const ks2 = parse_candidate("ks2", "--candidates");
  // fp4 steps of 128 k: k = 512 has 4 steps (ks8 no), k = 1280 has 10 (ks2 yes, ks4 no).
  std::string const why = candidate_skip_reason(ks8, WeightFormat::kFp4, 512, 16);
  BOOST_TEST(why.find("4 k steps") != std::string::npos, why);
  BOOST_TEST(candidate_skip_reason(ks2, WeightFormat::kFp4, 1280, 16).empty());
  BOOST_TEST(
      !candidate_skip_reason(parse_candidate("ks4", "--candidates"), WeightFormat::kFp4, 1280, 16)
           .empty());
  // bf16 steps of 32 k: k = 512 has 16 steps, ks8 runs.
  BOOST_TEST(candidate_skip_reason(ks8, WeightFormat::kBf16, 512, 16).empty());
  // The loads-only diagnostic exists for tile 16 only.
  auto const loads = parse_candidate("loads", "--candidates");
  BOOST_TEST(!candidate_skip_reason(loads, WeightFormat::kBf16, 512, 8).empty());
  BOOST_TEST(candidate_skip_reason(loads, WeightFormat::kBf16, 512, 16).empty());
  // The deep pipeline is an fp4 kernel at tile 16.
  auto const deep = parse_candidate("ks2+deep", "--candidates");
  BOOST_TEST(deep.name == "sk+deep+ks2");
  BOOST_TEST(deep.deep);
  BOOST_TEST(candidate_skip_reason(deep, WeightFormat::kFp4, 1280, 16).empty());
  BOOST_TEST(!candidate_skip_reason(deep, WeightFormat::kBf16, 1280, 16).empty());
  BOOST_TEST(!candidate_skip_reason(deep, WeightFormat::kFp4, 1280, 8).empty());
}

BOOST_AUTO_TEST_CASE(tscale_is_a_layout_of_fp4_scales_in_the_params_not_an_option) {
  auto const t = parse_candidate("tscale+cta2", "--candidates");
  BOOST_TEST(t.name == "sk+cta2+tscale");
  BOOST_TEST(t.tiled_scales);
  BOOST_TEST(t.ctas_per_sm == 2);
  BOOST_TEST(static_cast<int>(candidate_layout(t)) == static_cast<int>(fp4::ScaleLayout::kTiled));
  BOOST_TEST(static_cast<int>(candidate_layout(parse_candidate("cta2", "--candidates"))) ==
             static_cast<int>(fp4::ScaleLayout::kRowMajor));
  // Both tiles, any split; bf16 weights have no scales.
  BOOST_TEST(candidate_skip_reason(t, WeightFormat::kFp4, 1280, 8).empty());
  BOOST_TEST(candidate_skip_reason(t, WeightFormat::kFp4, 1280, 16).empty());
  std::string const why = candidate_skip_reason(t, WeightFormat::kBf16, 1280, 16);
  BOOST_TEST(why.find("fp4") != std::string::npos, why);
  auto const lean = parse_candidate("lean+tscale", "--candidates");
  BOOST_TEST(lean.name == "sk+tscale+lean");
  BOOST_TEST(candidate_options(lean, DecodeOptions{}).lean);
  BOOST_TEST(!candidate_options(t, DecodeOptions{}).lean);
  // The options of tscale alone are the base's.
  DecodeOptions base;
  base.split_k = 0;
  DecodeOptions const o = candidate_options(parse_candidate("tscale", "--candidates"), base);
  BOOST_TEST(o.split_k == 0);
  BOOST_TEST(!o.deep);
  BOOST_TEST(!o.loads_only);
  BOOST_TEST(o.pdl.ctas_per_sm == base.pdl.ctas_per_sm);
}

BOOST_AUTO_TEST_CASE(wpack_is_tscale_with_packed_values_and_names_itself_alone) {
  auto const w = parse_candidate("wpack+cta2", "--candidates");
  BOOST_TEST(w.name == "sk+cta2+wpack");
  BOOST_TEST(w.tiled_scales);
  BOOST_TEST(w.packed_values);
  BOOST_TEST(static_cast<int>(candidate_layout(w)) == static_cast<int>(fp4::ScaleLayout::kTiled));
  BOOST_TEST(static_cast<int>(candidate_value_layout(w)) ==
             static_cast<int>(fp4::ValueLayout::kPacked));
  auto const t = parse_candidate("tscale", "--candidates");
  BOOST_TEST(static_cast<int>(candidate_value_layout(t)) ==
             static_cast<int>(fp4::ValueLayout::kNibbles));
  // lean joins it; tscale beside it is a repetition; deep and loads are refused as with tscale.
  auto const lean = parse_candidate("lean+wpack", "--candidates");
  BOOST_TEST(lean.name == "sk+wpack+lean");
  BOOST_TEST(candidate_options(lean, DecodeOptions{}).lean);
  refused("wpack+tscale", "names tscale beside wpack");
  refused("wpack+deep", "combines wpack");
  refused("loads+wpack", "combines wpack");
  refused("wpack+wpack", "repeats wpack");
  refused("cta2+wpack+lean", "longer than");
  // fp4 only, both tiles.
  BOOST_TEST(candidate_skip_reason(w, WeightFormat::kFp4, 1280, 8).empty());
  BOOST_TEST(candidate_skip_reason(w, WeightFormat::kFp4, 1280, 16).empty());
  std::string const why = candidate_skip_reason(w, WeightFormat::kBf16, 1280, 16);
  BOOST_TEST(why.find("wpack") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(wide_is_wpack_with_two_warp_stages_a_stage_and_names_itself_alone) {
  auto const w = parse_candidate("wide+cta2", "--candidates");
  BOOST_TEST(w.name == "sk+cta2+wide");
  BOOST_TEST(w.wide);
  BOOST_TEST(w.packed_values);
  BOOST_TEST(w.tiled_scales);
  BOOST_TEST(w.ctas_per_sm == 2);
  BOOST_TEST(static_cast<int>(candidate_layout(w)) == static_cast<int>(fp4::ScaleLayout::kTiled));
  BOOST_TEST(static_cast<int>(candidate_value_layout(w)) ==
             static_cast<int>(fp4::ValueLayout::kPacked));
  DecodeOptions const o = candidate_options(w, DecodeOptions{});
  BOOST_TEST(o.wide);
  BOOST_TEST(!o.lean);
  BOOST_TEST(!candidate_options(parse_candidate("wpack", "--candidates"), DecodeOptions{}).wide);
  auto const lean = parse_candidate("lean+wide", "--candidates");
  BOOST_TEST(lean.name == "sk+wide+lean");
  BOOST_TEST(candidate_options(lean, DecodeOptions{}).lean);
  BOOST_TEST(parse_candidate("wide+ks2", "--candidates").name == "sk+wide+ks2");
  refused("wide+wpack", "names wpack or tscale beside wide");
  refused("tscale+wide", "names wpack or tscale beside wide");
  refused("wide+deep", "combines wide");
  refused("loads+wide", "combines wide");
  refused("wide+wide", "repeats wide");
  refused("cta2+wide+lean", "longer than");
  BOOST_TEST(candidate_skip_reason(w, WeightFormat::kFp4, 1280, 8).empty());
  BOOST_TEST(candidate_skip_reason(w, WeightFormat::kFp4, 512, 16).empty());
  std::string const why = candidate_skip_reason(w, WeightFormat::kBf16, 1280, 16);
  BOOST_TEST(why.find("wide") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(tiles_is_wide_on_tiled_values_and_names_itself_alone) {
  auto const t = parse_candidate("tiles+cta2", "--candidates");
  BOOST_TEST(t.name == "sk+cta2+tiles");
  BOOST_TEST(t.tiled_values);
  BOOST_TEST(t.wide);
  BOOST_TEST(t.packed_values);
  BOOST_TEST(t.tiled_scales);
  BOOST_TEST(t.ctas_per_sm == 2);
  BOOST_TEST(static_cast<int>(candidate_layout(t)) == static_cast<int>(fp4::ScaleLayout::kTiled));
  BOOST_TEST(static_cast<int>(candidate_value_layout(t)) ==
             static_cast<int>(fp4::ValueLayout::kTiles));
  BOOST_TEST(candidate_options(t, DecodeOptions{}).wide);
  // wide alone keeps row-major packed values.
  BOOST_TEST(static_cast<int>(candidate_value_layout(parse_candidate("wide", "--candidates"))) ==
             static_cast<int>(fp4::ValueLayout::kPacked));
  auto const lean = parse_candidate("lean+tiles", "--candidates");
  BOOST_TEST(lean.name == "sk+tiles+lean");
  BOOST_TEST(candidate_options(lean, DecodeOptions{}).lean);
  refused("tiles+wide", "beside tiles");
  refused("wpack+tiles", "beside tiles");
  refused("tiles+tscale", "beside tiles");
  refused("tiles+deep", "combines tiles");
  refused("loads+tiles", "combines tiles");
  refused("tiles+tiles", "repeats tiles");
  refused("cta2+tiles+lean", "longer than");
  BOOST_TEST(candidate_skip_reason(t, WeightFormat::kFp4, 1280, 8).empty());
  BOOST_TEST(candidate_skip_reason(t, WeightFormat::kFp4, 1280, 16).empty());
  std::string const why = candidate_skip_reason(t, WeightFormat::kBf16, 1280, 16);
  BOOST_TEST(why.find("tiles") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(candidate_options_change_only_the_knobs_they_name) {
  DecodeOptions base;
  base.pdl.pdl = true;
  base.pdl.ctas_per_sm = 1;
  base.pdl.max_shared_carveout = true;
  base.weights_before_wait = true;
  DecodeOptions const o = candidate_options(parse_candidate("cta2+ks4", "--candidates"), base);
  BOOST_TEST(o.split_k == 4);
  BOOST_TEST(o.pdl.ctas_per_sm == 2);
  BOOST_TEST(o.pdl.pdl);
  BOOST_TEST(o.pdl.max_shared_carveout);
  BOOST_TEST(o.weights_before_wait);
  BOOST_TEST(!o.loads_only);
  BOOST_TEST(!o.deep);
  BOOST_TEST(candidate_options(parse_candidate("deep", "--candidates"), base).deep);
  // Without cta2 the sweep's --ctas-per-sm stays.
  BOOST_TEST(candidate_options(parse_candidate("ks2", "--candidates"), base).pdl.ctas_per_sm == 1);
}

BOOST_AUTO_TEST_CASE(a_forced_split_is_the_one_the_kernel_plans_on_the_doubled_grid) {
  // top-8 GEMM1 fp4 at T = 1: 8 row tiles, n 1024, k 6144 (48 steps). One CTA per SM takes ks 4
  // (128 units); the cta2 grid of 264 takes ks 8 (256 units, one wave); ks2 forced stays ks 2.
  BOOST_TEST(plan_split(8, 1024, 6144, WeightFormat::kFp4, 132).ks == 4);
  DecodeSplit const two = plan_split(8, 1024, 6144, WeightFormat::kFp4, 264);
  BOOST_TEST(two.ks == 8);
  BOOST_TEST(two.units == 256);
  BOOST_TEST(two.waves == 1);
  BOOST_TEST(plan_split(8, 1024, 6144, WeightFormat::kFp4, 264, 2).ks == 2);
}
