#define BOOST_TEST_MODULE finalize
#include <boost/test/unit_test.hpp>

// Host-only behaviour of the finalize part: the dispatch rule on the seed's boundaries, the
// shape checks and geometry of plan(), the knob and axis parsers, and the seed-format table
// rendered from synthetic result files.

#include "core/store/h5store.hpp"
#include "core/ops/errors.hpp"
#include "core/ops/pdl_knobs.hpp"
#include "experiments/finalize/cases.hpp"
#include "experiments/finalize/grid.hpp"
#include "experiments/report/finalize_tables.hpp"
#include "kernels/finalize/finalize.hpp"
#include "kernels/finalize/finalize_policy.hpp"
#include "tests/sweep_file.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <tuple>

using namespace moefin;
using finalize::Options;
using finalize::WeightType;
using moefin::test::provenance;
using moefin::test::RowSpec;
using moefin::test::write_sweep;
namespace fs = std::filesystem;

namespace {

// Stand-ins for device pointers: never dereferenced on the host, 256-byte aligned like cudaMalloc.
void* const kPtr = reinterpret_cast<void*>(std::uintptr_t(1) << 20);
float* const kScales = reinterpret_cast<float*>(std::uintptr_t(1) << 21);

finalize::FinalizeParams shape(std::int64_t h, std::int64_t t, std::int64_t k,
                               std::int64_t hp = 0) {
  finalize::FinalizeParams p;
  p.hidden = h;
  p.hidden_padded = hp ? hp : h;
  p.num_tokens = t;
  p.top_k = k;
  p.num_rows = t * k;
  p.gemm_out = kPtr;
  p.out = kPtr;
  p.expert_weights = kPtr;
  p.expanded_to_permuted = static_cast<std::int32_t const*>(kPtr);
  return p;
}

std::string pick(std::int64_t h, std::int64_t t, std::int64_t k, int budget) {
  Options o;
  o.cta_budget = budget;
  return finalize::select(shape(h, t, k), o).name;
}

finalize::FinalizeVariant const* entry(char const* name) {
  return &finalize::variant(name, "test");
}

template <class Fn> std::string input_error(Fn fn) {
  try {
    fn();
  } catch (InputError const& e) {
    return e.what();
  }
  return "";
}

bool contains(std::string const& s, std::string const& sub) {
  return s.find(sub) != std::string::npos;
}

/// The first line of `text` that contains `needle` (empty when none does).
std::string line_of(std::string const& text, std::string const& needle) {
  auto const at = text.find(needle);
  if (at == std::string::npos)
    return "";
  auto const begin = text.rfind('\n', at);
  auto const end = text.find('\n', at);
  return text.substr(begin == std::string::npos ? 0 : begin + 1,
                     end == std::string::npos ? std::string::npos : end - begin - 1);
}

} // namespace

BOOST_AUTO_TEST_CASE(dispatch_rule_matches_the_seed_at_its_boundaries) {
  for (int budget : {finalize::kPublishedCtaBudget, 132 * 8}) {
    BOOST_TEST_CONTEXT("budget " << budget) {
      // (H, ceil(H/256)): the last T inside ceil(H/256) * T < budget picks small_batch for
      // 4 < K <= 64, the next one leaves the regime.
      for (std::int64_t h : {1024, 2880, 7168, 256}) {
        std::int64_t const ctas = (h + 255) / 256;
        std::int64_t const last = (budget - 1) / ctas;
        BOOST_TEST_CONTEXT("H " << h << " last T " << last) {
          BOOST_TEST((pick(h, last, 8, budget) == "small_batch"));
          BOOST_TEST((pick(h, last, 5, budget) == "small_batch"));
          BOOST_TEST((pick(h, last, 64, budget) == "small_batch"));
          BOOST_TEST((pick(h, last, 4, budget) == "scalar"));
          BOOST_TEST((pick(h, last, 1, budget) == "scalar"));
          BOOST_TEST((pick(h, last + 1, 8, budget) == "vecload"));
          BOOST_TEST((pick(h, last + 1, 4, budget) == "vecload"));
          BOOST_TEST((pick(h, 1, 65, budget) == "scalar")); // beyond the staged top-K
        }
      }
    }
  }
  // The two budgets disagree exactly between 1056 and 1184 CTAs: H=1024, T=264..295.
  BOOST_TEST((pick(1024, 295, 8, 1184) == "small_batch"));
  BOOST_TEST((pick(1024, 264, 8, 1056) == "vecload"));
  BOOST_TEST((pick(1024, 263, 8, 1056) == "small_batch"));
  // min(8192, T): beyond 8192 tokens the scalar rule counts 8192 rows of CTAs.
  BOOST_TEST((pick(128, 10000, 2, 1184) == "vecload"));
  BOOST_TEST((pick(128, 10000, 2, 8193) == "scalar"));
}

BOOST_AUTO_TEST_CASE(dispatch_rule_honours_its_switches_and_alignment) {
  Options o;
  o.allow_small_batch = false; // the rule before the seed's change
  BOOST_TEST((finalize::select(shape(1024, 8, 8), o).name == "scalar"));
  BOOST_TEST((finalize::select(shape(1024, 296, 8), o).name == "vecload"));
  Options ds;
  ds.deepseek_fp8 = true;
  BOOST_TEST((finalize::select(shape(1000, 8, 8), ds).name == "deepseek_fp8"));
  // Rows that 128-bit accesses cannot serve go to scalar at any size.
  BOOST_TEST((finalize::select(shape(1002, 8, 8), Options{}).name == "scalar"));
  BOOST_TEST((finalize::select(shape(1002, 5000, 8), Options{}).name == "scalar"));
  BOOST_TEST((finalize::select(shape(1024, 8, 8, 1028), Options{}).name == "scalar"));
  auto p = shape(1024, 8, 8);
  p.gemm_out = static_cast<char const*>(kPtr) + 8;
  BOOST_TEST((finalize::select(p, Options{}).name == "scalar"));
  Options forced;
  forced.variant = entry("vecload");
  BOOST_TEST((finalize::select(shape(1024, 1, 8), forced).name == "vecload"));
}

BOOST_AUTO_TEST_CASE(vector_variants_refuse_shapes_they_cannot_read) {
  for (char const* v : {"vecload", "small_batch"}) {
    Options o;
    o.variant = entry(v);
    BOOST_TEST_CONTEXT(v) {
      auto const unaligned = input_error([&] { finalize::plan(shape(1002, 4, 8), o); });
      BOOST_TEST(contains(unaligned, "multiples of 8 (128-bit loads)"), unaligned);
      BOOST_TEST(contains(unaligned, std::string("variant ") + v), unaligned);
      BOOST_TEST(contains(unaligned, "hidden=1002"), unaligned);
      auto const padded = input_error([&] { finalize::plan(shape(1024, 4, 8, 1030), o); });
      BOOST_TEST(contains(padded, "hidden_padded=1030"), padded);
      auto const big_k = input_error([&] { finalize::plan(shape(1024, 4, 65), o); });
      BOOST_TEST(contains(big_k, "top_k <= 64"), big_k);
      auto p = shape(1024, 4, 8);
      p.out = static_cast<char*>(kPtr) + 2;
      BOOST_TEST(contains(input_error([&] { finalize::plan(p, o); }), "16-byte aligned"));
    }
  }
  Options sb;
  sb.variant = entry("small_batch");
  BOOST_TEST(contains(input_error([&] { finalize::plan(shape(1024, 70000, 8), sb); }),
                      "at most 65535 tokens"));
  // Scalar serves all of them.
  Options sc;
  sc.variant = entry("scalar");
  BOOST_TEST(finalize::plan(shape(1002, 4, 65), sc).ctas() == 4 * 4);
}

BOOST_AUTO_TEST_CASE(plan_rejects_missing_pointers_and_bad_knobs) {
  Options o;
  auto p = shape(1024, 4, 8);
  p.expert_weights = nullptr;
  BOOST_TEST(contains(input_error([&] { finalize::plan(p, o); }), "expert_weights"));
  p.weight_type = WeightType::kNone; // unweighted sums need no pointer
  BOOST_TEST(finalize::plan(p, o).ctas() > 0);
  auto q = shape(1024, 4, 8);
  q.out = nullptr;
  BOOST_TEST(contains(input_error([&] { finalize::plan(q, o); }), "one is null"));
  BOOST_TEST(contains(input_error([&] { finalize::plan(shape(1024, 0, 8), o); }),
                      "num_tokens 0 out of range"));
  BOOST_TEST(contains(input_error([&] { finalize::plan(shape(1024, 4, 8, 1000), o); }),
                      "hidden_padded 1000 out of range"));
  Options bad_slice;
  bad_slice.slice_chunks = 12;
  BOOST_TEST(contains(input_error([&] { finalize::plan(shape(1024, 4, 8), bad_slice); }),
                      "slice_chunks 12"));
  Options ds;
  ds.variant = entry("deepseek_fp8");
  BOOST_TEST(contains(input_error([&] { finalize::plan(shape(1024, 4, 8), ds); }), "in_scales"));
  auto r = shape(1000, 3, 8);
  r.in_scales = kScales;
  r.out_scales = kScales;
  auto const lp = finalize::plan(r, ds);
  BOOST_TEST(lp.grid_x == 8); // ceil(1000 / 128) scale blocks
  BOOST_TEST(lp.grid_y == 3);
}

BOOST_AUTO_TEST_CASE(small_batch_geometry_keeps_four_loads_and_fills_the_gpu_at_one_token) {
  Options o;
  o.variant = entry("small_batch");
  for (auto h : fin::grid_hidden())
    for (std::int64_t k : {1, 2, 4, 5, 6, 8, 10, 16, 22, 32, 33, 64}) {
      BOOST_TEST_CONTEXT("H " << h << " K " << k) {
        auto const lp = finalize::plan(shape(h, 1, k), o);
        BOOST_TEST(lp.loads_per_thread <= finalize::Policy::kMaxLoads);
        BOOST_TEST(lp.loads_per_thread * lp.block_y >= k); // the groups cover the top-K
        BOOST_TEST(lp.block_y == (k + 3) / 4);
        BOOST_TEST(lp.block_x * lp.block_y <= finalize::Policy::kMaxThreads);
        BOOST_TEST(lp.ctas() >= 16);                 // "tens of CTAs" even at H = 1024
        BOOST_TEST(lp.block_x * 8 * lp.grid_x >= h); // every column has a thread
        BOOST_TEST((lp.trigger == Trigger::kEntry));
      }
    }
  Options nosplit = o;
  nosplit.variant = entry("small_batch_nosplit");
  BOOST_TEST(finalize::plan(shape(1024, 1, 32), nosplit).block_y == 1);
  Options wide = o;
  wide.slice_chunks = 32;
  BOOST_TEST(finalize::plan(shape(7168, 1, 8), wide).grid_x == 28); // ceil(H/256), the rule's CTAs
  // Defaults: scalar and vecload never trigger; an explicit placement wins.
  BOOST_TEST(finalize::plan(shape(1024, 1, 8), Options{}).variant->name == "small_batch");
  Options sc;
  sc.variant = entry("scalar");
  auto const s = finalize::plan(shape(7168, 9000, 8), sc);
  BOOST_TEST(s.grid_x == 28);
  BOOST_TEST(s.grid_y == 8192);
  BOOST_TEST((s.trigger == Trigger::kExit));
  sc.pdl.trigger = Trigger::kAfterWait;
  BOOST_TEST((finalize::plan(shape(7168, 9000, 8), sc).trigger == Trigger::kAfterWait));
}

BOOST_AUTO_TEST_CASE(trigger_names_round_trip) {
  for (Trigger t : {Trigger::kDefault, Trigger::kExit, Trigger::kEntry, Trigger::kAfterWait,
                    Trigger::kAfterWrites}) {
    Trigger back = Trigger::kDefault;
    BOOST_TEST(parse_trigger(trigger_name(t), &back));
    BOOST_TEST((back == t));
  }
  Trigger out = Trigger::kEntry;
  BOOST_TEST(!parse_trigger("start", &out));
  BOOST_TEST(!parse_trigger(nullptr, &out));
  BOOST_TEST((out == Trigger::kEntry));
  BOOST_TEST(std::string(trigger_name(Trigger::kAfterWrites)) == "after_writes");
}

BOOST_AUTO_TEST_CASE(grid_axes_follow_the_regime) {
  using V = std::vector<std::int64_t>;
  BOOST_TEST(fin::regime_tokens(1024) == (V{1, 2, 4, 8, 16, 32, 64, 128, 256, 295}),
             boost::test_tools::per_element());
  BOOST_TEST(fin::regime_tokens(2880) == (V{1, 2, 4, 8, 16, 32, 64, 98}),
             boost::test_tools::per_element());
  BOOST_TEST(fin::regime_tokens(7168) == (V{1, 2, 4, 8, 16, 32, 42}),
             boost::test_tools::per_element());
  BOOST_TEST(fin::regime_tokens(7168, 132 * 8) == (V{1, 2, 4, 8, 16, 32, 37}),
             boost::test_tools::per_element());
  BOOST_TEST(fin::in_regime(7168, 42));
  BOOST_TEST(!fin::in_regime(7168, 43));
  // The full default grid: 64 (H, T) pairs x 9 top-K x 2 weight types.
  auto const all = fin::parse_grid({});
  BOOST_TEST(all.size() == 1152u);
  BOOST_TEST(fin::shape_key(all.front()) == "H=1024,T=1,K=1,w=bf16");
  auto const some = fin::parse_grid({"2048,4096", "1,3", "8", "none"});
  BOOST_TEST(some.size() == 4u);
  BOOST_TEST(fin::shape_key(some.back()) == "H=4096,T=3,K=8,w=none");
  BOOST_TEST(fin::dispatch_name(fin::Shape{1024, 295, 8, WeightType::kBf16}, 1184) ==
             "small_batch");
  BOOST_TEST(fin::dispatch_name(fin::Shape{1024, 295, 8, WeightType::kBf16}, 1056) == "vecload");
}

BOOST_AUTO_TEST_CASE(option_parsers_name_the_flag_and_the_allowed_values) {
  auto const w = input_error([] { fin::parse_weights("--weights", "bf16,fp16"); });
  BOOST_TEST(contains(w, "--weights: value 'fp16' not one of {bf16, fp32, none}"), w);
  BOOST_TEST(contains(input_error([] {
                        fin::parse_grid({"", "", "65", ""});
                      }),
                      "--top-k: value 65 out of range [1, 64]"));
  BOOST_TEST(contains(input_error([] { fin::split_names("--modes", "a,,b"); }), "--modes"));
  auto const v = input_error([] { fin::parse_variants("--variants", "scalar,fast"); });
  BOOST_TEST(contains(v, "--variants: 'fast' is not a finalize variant (scalar, small_batch"), v);
  BOOST_TEST(contains(input_error([] { fin::parse_variants("--variants", "deepseek_fp8", true); }),
                      "E4M3"));
  // The finalize inside GEMM2 has no launch of its own: refused while parsing, not on the GPU.
  auto const fused = input_error([] { fin::parse_variants("--variants", "scalar,fused"); });
  BOOST_TEST(contains(fused, "--variants: 'fused' has no kernel of its own"), fused);
  auto const vs = fin::parse_variants("--variants", "small_batch_nosplit,scalar,scalar");
  BOOST_TEST(vs.size() == 2u); // duplicates collapse
  BOOST_TEST(vs[0].entry->name == "small_batch_nosplit");
  BOOST_TEST((vs[0].options.variant == vs[0].entry));
  auto const with = fin::with_baselines(fin::parse_variants("--variants", "small_batch,vecload"));
  BOOST_TEST(with.size() == 3u); // scalar, the baseline of both, comes first
  BOOST_TEST(with[0].name == "scalar");
  BOOST_TEST(fin::baseline_index(with, 2) == 0);
  BOOST_TEST(fin::baseline_index(with, 0) == 0);
  auto const late = fin::variant_options("small_batch_late_trigger");
  BOOST_TEST((late.variant->default_trigger == Trigger::kExit));
  BOOST_TEST(!fin::variant_options("small_batch_meta_after_wait").variant->meta_before_wait);
  auto const ep = fin::parse_routing_case("--routings", "zipf/ep4");
  BOOST_TEST((ep.distribution == Distribution::kZipf));
  BOOST_TEST(ep.ep == 4);
  BOOST_TEST(contains(input_error([] { fin::parse_routing_case("--routings", "uniform/ep3"); }),
                      "must divide 256"));
  BOOST_TEST(contains(input_error([] { fin::parse_routing_case("--routings", "skewed"); }),
                      "'skewed' is not a routing distribution"));
}

BOOST_AUTO_TEST_CASE(host_cases_poison_what_finalize_must_not_read) {
  fin::RowPool pool(1000, 1008, 7);
  auto const c =
      fin::make_case(fin::Shape{1000, 6, 8, WeightType::kBf16}, 1008,
                     fin::parse_routing_case("--routings", "uniform/ep2"), 11, pool, true);
  BOOST_TEST(c.dropped > 0.2); // half the experts are remote
  BOOST_TEST(c.dropped < 0.8);
  std::int64_t nan_rows = 0;
  for (std::int64_t r = 0; r < c.num_rows(); ++r) {
    bool const routed = c.layout.permuted_to_token[static_cast<std::size_t>(r)] >= 0;
    auto const* row = c.inputs.gemm_out.data() + r * 1008;
    bool const nan_row = std::all_of(row, row + 1008, [](auto b) { return (b & 0x7fff) > 0x7f80; });
    nan_rows += nan_row;
    BOOST_TEST((routed ? !nan_row : nan_row));
    if (routed) {
      BOOST_TEST(std::none_of(row, row + 1000, [](auto b) { return (b & 0x7fff) == 0; }));
      BOOST_TEST(std::all_of(row + 1000, row + 1008, [](auto b) { return (b & 0x7fff) > 0x7f80; }));
    }
  }
  BOOST_TEST(nan_rows == c.num_rows() - c.valid_rows);
  BOOST_TEST(c.inputs.in_scales.size() == static_cast<std::size_t>(c.num_rows() * 8));
  // The same seed builds the same case.
  auto const again = fin::make_case(c.shape, 1008, c.routing, 11, pool, true);
  BOOST_TEST((again.inputs.gemm_out == c.inputs.gemm_out));
  BOOST_TEST((again.layout.expanded_to_permuted == c.layout.expanded_to_permuted));
}

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("moefin_fin_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

} // namespace

BOOST_AUTO_TEST_CASE(mode_b_of_a_file_without_the_waiting_producer_is_tabulated_as_b0) {
  TempDir dir;
  std::string const old_file = (dir.path / "old.h5").string();
  std::string const new_file = (dir.path / "new.h5").string();
  std::vector<RowSpec> rows{{1024, 1, 8, "a", "small_batch", "small_batch", 2.0, 1.5},
                            {1024, 1, 8, "b", "small_batch", "small_batch", 2.0, 1.25}};
  write_sweep(old_file, provenance("NVIDIA H200", "sm_90", ""), rows);
  std::string const csv = std::string(MOEFIN_SOURCE_DIR) + "/data/published/finalize_only_speedup.csv";
  std::string const text = fin::render_finalize_tables({old_file}, csv);
  BOOST_TEST(contains(text, "mode b0 ("), text);
  BOOST_TEST(!contains(text, "mode b ("), text);
  BOOST_TEST(contains(line_of(text, "1.25x (1.25)"), "8 "), text);
  // Another GPU's file of today beside it: its mode b is mode b, the old file's stays b0.
  write_sweep(new_file, provenance("NVIDIA B200", "sm_100"),
              {{1024, 1, 8, "b", "small_batch", "small_batch", 1.0, 1.75}});
  std::string const both = fin::render_finalize_tables({old_file, new_file}, csv);
  BOOST_TEST(contains(both, "mode b ("), both);
  BOOST_TEST(contains(both, "mode b0 ("), both);
  BOOST_TEST(fin::tabulated_mode("b", "plain") == "b0");
  BOOST_TEST(fin::tabulated_mode("b", "pdl-wait") == "b");
  BOOST_TEST(fin::tabulated_mode("a", "plain") == "a");
  h5::Provenance none;
  BOOST_TEST(fin::mode_b_producer(none) == "plain");
}

BOOST_AUTO_TEST_CASE(seed_format_table_shows_median_and_minimum_per_architecture) {
  TempDir dir;
  std::string const h200 = (dir.path / "h200.h5").string();
  std::string const b200 = (dir.path / "b200.h5").string();
  std::vector<RowSpec> rows{{1024, 1, 8, "a", "small_batch", "small_batch", 2.0, 1.5},
                            {1024, 2, 8, "a", "small_batch", "small_batch", 2.0, 2.5},
                            {1024, 4, 8, "a", "small_batch", "small_batch", 2.0, 2.0},
                            {1024, 1, 8, "a", "scalar", "small_batch", 3.0, 1.0},
                            {7168, 1, 16, "a", "small_batch", "small_batch", 1.4, 3.25},
                            {1024, 1, 1, "a", "small_batch", "scalar", 2.0, 0.9},
                            {1024, 1, 8, "a", "small_batch_nosplit", "small_batch", 2.5, 1.25},
                            {1024, 1, 8, "b", "small_batch", "small_batch", 2.0, 1.2},
                            {1024, 1, 8, "c", "small_batch", "small_batch", 3.0, 1.1},
                            {1024, 1, 8, "c", "torch_gather", "small_batch", 30.0, 0.0}};
  std::vector<RowSpec> repeat{{1024, 1, 8, "a", "small_batch", "small_batch", 2.2, 1.65}};
  write_sweep(h200, provenance("NVIDIA H200", "sm_90"), rows, repeat);
  write_sweep(b200, provenance("NVIDIA B200", "sm_100"),
              {{1024, 1, 8, "a", "small_batch", "small_batch", 1.0, 1.75}});
  std::string const text = fin::render_finalize_tables(
      {h200, b200}, std::string(MOEFIN_SOURCE_DIR) + "/data/published/finalize_only_speedup.csv");
  BOOST_TEST_MESSAGE(text);
  // One column per architecture, the published ones beside them.
  BOOST_TEST(contains(text, "H200 (sm_90)"));
  BOOST_TEST(contains(text, "B200 (sm_100)"));
  BOOST_TEST(contains(text, "GB200 (SM100)*"));
  // K = 8, mode a: median of 1.5, 2.5, 2.0 with the minimum; B200's single value; GB200 published.
  auto const k8 = line_of(text, "2.00x (1.50)");
  BOOST_TEST(k8.rfind("8 ", 0) == 0, k8);
  BOOST_TEST(contains(k8, "small_batch"), k8); // the dispatcher's pick
  BOOST_TEST(contains(k8, "1.75x (1.75)"), k8);
  BOOST_TEST(contains(k8, "1.14x (1.06)"), k8); // GB200, K = 8, published
  BOOST_TEST(contains(text, "3.25x (3.25)"));
  auto const k1 = line_of(text, "0.90x (0.90)");
  BOOST_TEST(contains(k1, "scalar"), k1);     // K = 1: the dispatcher keeps scalar ...
  BOOST_TEST(contains(k1, "kept"), k1);       // ... as the seed did
  BOOST_TEST(contains(text, "1.20x (1.20)")); // mode b has its own table
  BOOST_TEST(contains(text, "mode b ("));
  BOOST_TEST(contains(text, "10.00x (10.00)")); // torch_gather 30 us over small_batch 3 us, mode c
  BOOST_TEST(contains(text, "lowest speedup is 1.500x (H200 (sm_90), H=1024 T=1 K=8 w=bf16)"),
             text);
  BOOST_TEST(contains(text, "1.25x (1.25)")); // the ablation table
  // T = 1: largest per-launch time and smallest speedup over H.
  BOOST_TEST(contains(text, "T = 1, mode a"));
  // The repeated configuration: 2.2 us against 2.0 us, speedup 1.65 against 1.5: 10% both.
  BOOST_TEST(contains(text, "per-launch time median 10.00%, max 10.00%; speedup median 10.00%"),
             text);
}

BOOST_AUTO_TEST_CASE(table_command_needs_no_gpu) {
  TempDir dir;
  std::string const f = (dir.path / "one.h5").string();
  write_sweep(f, provenance("NVIDIA H200", "sm_90"),
              {{2048, 1, 32, "a", "small_batch", "small_batch", 1.5, 4.5}});
  std::string const cmd = std::string(MOEFIN_BINARY) + " sweep finalize --print " + f + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  BOOST_REQUIRE(p != nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
    out.append(buf.data(), n);
  int const st = ::pclose(p);
  BOOST_TEST(WEXITSTATUS(st) == 0, out);
  BOOST_TEST(contains(out, "4.50x (4.50)"), out);
  BOOST_TEST(contains(out, "1.97x (1.75)"), out); // Rubin, K = 32, published
  auto const missing = ::system((std::string(MOEFIN_BINARY) + " sweep finalize --print " +
                                 (dir.path / "none.h5").string() + " >/dev/null 2>&1")
                                    .c_str());
  BOOST_TEST(WEXITSTATUS(missing) == 1); // a missing file is a FileError
}

BOOST_AUTO_TEST_CASE(v2_tables_compare_with_the_released_kernel_the_floor_and_the_ablation) {
  TempDir dir;
  std::string const f = (dir.path / "v2.h5").string();
  std::vector<RowSpec> rows;
  // K = 8: v2 1.0 us, the released kernel 1.3 (T = 1) and 1.2 us (T = 4); mode b 1.1 and 1.0.
  for (auto const& [t, fi_a, fi_b] : {std::tuple{1, 1.3, 1.1}, std::tuple{4, 1.2, 1.0}}) {
    rows.push_back({4096, t, 8, "a", "small_batch_v2", "small_batch", 1.0, 2.0});
    rows.push_back({4096, t, 8, "a", "fi_small_batch", "small_batch", fi_a, 1.5});
    rows.push_back({4096, t, 8, "a", "small_batch", "small_batch", 1.25, 1.6});
    rows.push_back({4096, t, 8, "b", "small_batch_v2", "small_batch", 1.0, 1.2});
    rows.push_back({4096, t, 8, "b", "fi_small_batch", "small_batch", fi_b, 1.1});
    rows.push_back({4096, t, 8, "a", "small_batch_v2_no_shuffle", "small_batch", 1.1, 1.8});
  }
  write_sweep(f, provenance("NVIDIA H200", "sm_90"), rows);
  {
    auto file = h5::ResultWriter::resume(f);
    auto lf = file.table("launch_floor", fin::launch_floor_columns());
    for (auto const& [mode, us] : {std::pair{"a", 0.6}, std::pair{"b", 0.7}}) {
      h5::Row r;
      r.set("mode", mode).set("median_us", us).set("min_us", us).set("q1_us", us);
      r.set("q3_us", us).set("max_us", us).set("rounds", 5).set("launches", 100);
      lf.append(std::string("mode=") + mode, r, {us});
    }
  }
  std::string const text = fin::render_finalize_tables({f}, "none.csv");
  BOOST_TEST_MESSAGE(text);
  BOOST_TEST(contains(text, "small_batch_v2 vs fi_small_batch (the released kernel)"));
  auto const k8 = line_of(text, "1.25x (1.20)"); // mode a: median of 1.3 and 1.2, minimum 1.2
  BOOST_TEST(k8.rfind("8 ", 0) == 0, k8);
  BOOST_TEST(contains(k8, "1.05x (1.00)"), k8); // mode b: 1.1 and 1.0
  BOOST_TEST(contains(text, "mode a: lowest 1.200x at H=4096 T=4 K=8"));
  // T = 1: 1.0 us minus the floors 0.6 (a) and 0.7 (b).
  auto const t1 = line_of(text, "0.40");
  BOOST_TEST(contains(t1, "0.30"), t1);
  BOOST_TEST(contains(text, "a (floor 0.60)"));
  // Ablation: without the shuffle combine 1.1 us against 1.0.
  BOOST_TEST(contains(text, "shuffle combine"));
  BOOST_TEST(contains(text, "1.10x (1.10)"));
  // Geometries agree (K = 8: 2 groups, same CTAs): released 1.3 / 1.2 over moefin's 1.25.
  BOOST_TEST(contains(text, "where their geometries agree"));
  BOOST_TEST(contains(text, "1.00x (0.96)"), text);
}
