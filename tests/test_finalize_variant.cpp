#define BOOST_TEST_MODULE finalize_variant
#include <boost/test/unit_test.hpp>

// A finalize variant defined in the test tree (tests/variant/finalize_test_variant.cu: one kernel
// function and one registry entry, no other file edited) shows up, on the host side, wherever
// moefin's own variants do: the check's and the sweep's variant lists, the sweep's tables, and
// the layer chain (its plan, its launches, the verifier's chain). The GPU half runs it in
// test_finalize_variant_gpu.

#include "core/chain/presets.hpp"
#include "core/chain/verifier_chain.hpp"
#include "core/ops/finalize_variants.hpp"
#include "experiments/chain/race_cells.hpp"
#include "experiments/commands.hpp"
#include "experiments/finalize/grid.hpp"
#include "experiments/report/finalize_tables.hpp"
#include "kernels/chain/chain_launches.hpp"
#include "kernels/finalize/finalize.hpp"
#include "tests/sweep_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>

using namespace moefin;
namespace fs = std::filesystem;

namespace {

constexpr char const* kName = "test_rowwise";

finalize::FinalizeVariant const& entry() {
  return finalize::variant(kName, "test");
}

bool has(std::vector<std::string> const& v, std::string const& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

} // namespace

BOOST_AUTO_TEST_CASE(the_test_variant_is_registered_from_the_test_tree) {
  auto const& v = entry();
  BOOST_TEST((v.source == finalize::Source::kTest));
  BOOST_TEST(v.baseline == "scalar");
  BOOST_TEST(!v.dispatchable);
  BOOST_TEST(v.in_list(finalize::kListCheck));
  BOOST_TEST(v.in_list(finalize::kListSweep));
  BOOST_TEST(v.in_list(finalize::kListChain));
  // The dispatch rule never picks it: it is not dispatchable.
  finalize::ShapeQuery q{1024, 1024, 4, 8, true};
  BOOST_TEST(finalize::select(q, finalize::Options{}).name == "small_batch");
}

BOOST_AUTO_TEST_CASE(check_finalize_lists_it_by_default_and_plans_its_launch) {
  BOOST_TEST(has(fin::check_variant_names(), kName));
  auto const vs = fin::parse_variants("--variants", fin::join(fin::check_variant_names()));
  BOOST_TEST(std::any_of(vs.begin(), vs.end(), [](auto const& v) { return v.entry == &entry(); }));
  finalize::FinalizeParams p;
  p.num_tokens = 3;
  p.hidden = 1000;
  p.hidden_padded = 1000;
  p.top_k = 8;
  p.num_rows = 24;
  alignas(16) static std::uint16_t buffer[8];
  p.gemm_out = buffer;
  p.out = buffer;
  p.expanded_to_permuted = reinterpret_cast<std::int32_t const*>(buffer);
  p.weight_type = finalize::WeightType::kNone;
  finalize::Options o;
  o.variant = &entry();
  auto const lp = finalize::plan(p, o);
  BOOST_TEST((lp.variant == &entry()));
  BOOST_TEST(lp.grid_x == 8); // ceil(1000 / 128)
  BOOST_TEST(lp.grid_y == 3);
  BOOST_TEST((lp.trigger == Trigger::kExit));
  BOOST_TEST(!lp.meta_before_wait);
}

BOOST_AUTO_TEST_CASE(sweep_finalize_times_it_beside_its_baseline_and_tables_show_it) {
  BOOST_TEST(has(fin::sweep_variant_names(), kName));
  auto const timed = fin::with_baselines(fin::parse_variants("--variants", kName, true));
  BOOST_TEST_REQUIRE(timed.size() == 2u); // scalar is added: the ratio needs it
  BOOST_TEST(timed[0].name == "scalar");
  BOOST_TEST(fin::baseline_index(timed, 1) == 0);
  fs::path const dir = fs::temp_directory_path() / ("moefin_variant_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string const file = (dir / "sweep.h5").string();
  test::write_sweep(file, test::provenance("NVIDIA H200", "sm_90"),
                    {{1024, 1, 8, "a", "scalar", "small_batch", 3.0, 1.0},
                     {1024, 1, 8, "a", "small_batch", "small_batch", 2.0, 1.5},
                     {1024, 1, 8, "a", kName, "small_batch", 2.5, 1.2}});
  std::string const text = fin::render_finalize_tables({file}, "");
  fs::remove_all(dir);
  BOOST_TEST_MESSAGE(text);
  // The ablation table of mode a has a column for every variant measured against a baseline.
  auto const at = text.find("ablation, H200 (sm_90), mode a");
  BOOST_TEST_REQUIRE(at != std::string::npos, text);
  std::string const header = text.substr(text.find('\n', at) + 1, 80);
  BOOST_TEST(header.find(kName) != std::string::npos, header);
  BOOST_TEST(text.find("1.20x (1.20)") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(the_layer_chain_launches_it_as_its_plan_says) {
  auto const chain_list = finalize::variants(finalize::kListChain);
  BOOST_TEST((std::find(chain_list.begin(), chain_list.end(), &entry()) != chain_list.end()));
  chain::ChainConfig cfg = chain::preset_config(chain::Preset::kAllEarly);
  chain::apply_overrides(cfg, std::string("finalize.variant=") + kName);
  BOOST_TEST((cfg.finalize.forced == &entry()));
  BOOST_TEST(chain::describe(cfg).find(std::string("finalize=") + kName) != std::string::npos);
  auto const shape = chain::parse_shape("top-8");
  BOOST_TEST((&race::planned_finalize_variant(shape, 4, cfg) == &entry()));
  chain::LayerPlan const plan = chain::make_layer_plan(cfg, entry());
  BOOST_TEST(plan.at(chain::Kernel::kFinalize).impl == kName);
  BOOST_TEST((plan.at(chain::Kernel::kFinalize).trigger == Trigger::kEntry)); // all-early
  BOOST_TEST(!plan.finalize_meta_before_wait()); // it reads everything after its wait
  auto const launches = chain::layer_launches(plan, chain::RunFlags{});
  BOOST_TEST_REQUIRE(launches.size() == 7u);
  BOOST_TEST((launches[5].finalize.variant == &entry()));
  // With every kernel triggering at entry, small_batch's pre-wait reads race; this variant's
  // reads follow its wait, so its chain is ordered.
  BOOST_TEST((chain::verify_cell(cfg, entry(), false).chain == pdl::Verdict::kOrdered));
  BOOST_TEST((chain::verify_cell(cfg, finalize::variant("small_batch", "test"), false).chain ==
              pdl::Verdict::kRace));
}

namespace {

/// What `moefin <command> --list ...` prints, run in this process (whose registry holds the
/// test variant; the moefin binary's does not).
std::string listed(int (*command)(cli::Args const&), cli::Args args) {
  std::ostringstream os;
  auto* old = std::cout.rdbuf(os.rdbuf());
  args.push_back("--list");
  int rc = -1;
  try {
    rc = command(args);
  } catch (...) {
    std::cout.rdbuf(old);
    throw;
  }
  std::cout.rdbuf(old);
  BOOST_TEST(rc == kExitOk);
  return os.str();
}

} // namespace

BOOST_AUTO_TEST_CASE(the_commands_enumerate_its_rows) {
  std::string const check =
      listed(cmd::check_finalize, {"--hidden", "1024", "--tokens", "1", "--top-k", "8", "--weights",
                                   "bf16", "--routings", "uniform"});
  BOOST_TEST(check.find("variant=test_rowwise,H=1024,T=1,K=8,w=bf16,routing=uniform") !=
                 std::string::npos,
             check);
  std::string const sweep =
      listed(cmd::sweep_finalize, {"--hidden", "1024", "--tokens", "1", "--top-k", "8", "--weights",
                                   "bf16", "--modes", "a"});
  BOOST_TEST(sweep.find("H=1024,T=1,K=8,w=bf16,mode=a,l2=hot,variant=test_rowwise") !=
                 std::string::npos,
             sweep);
  std::string const layer = listed(cmd::sweep_layer, {"--shapes", "top-8", "--tokens", "1"});
  BOOST_TEST(layer.find("finalize=test_rowwise,placement=seed-after") != std::string::npos, layer);
}
