// The test-only finalize variant (tests/variant/finalize_test_variant.cu) on the GPU (gpu label):
// `check finalize` verifies it against the Kokkos reference, `sweep finalize` times it beside its
// baseline into rows of its own, and the layer chain runs it with PDL on and off bitwise equal
// and within tolerance of the reference chain. Nothing outside the test tree names it.
#include "tests/gpu_main.hpp"

#include "core/chain/presets.hpp"
#include "core/store/h5store.hpp"
#include "experiments/chain/reference_chain.hpp"
#include "experiments/chain/run.hpp"
#include "experiments/commands.hpp"
#include "experiments/finalize/device_case.hpp"
#include "experiments/finalize/verify.hpp"
#include "kernels/chain/chain.hpp"
#include "reference/kokkos_env.hpp"

#include <unistd.h>

#include <filesystem>

using namespace moefin;
namespace fs = std::filesystem;

namespace {

struct Kokkos {
  reference::KokkosSession session;
};
BOOST_TEST_GLOBAL_FIXTURE(Kokkos);

constexpr char const* kName = "test_rowwise";

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("moefin_variant_gpu_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string file(char const* n) const { return (path / n).string(); }
};

std::size_t rows_of(h5::Table const& t, std::string const& variant) {
  std::size_t n = 0;
  for (auto const& v : t.strings.at("variant"))
    n += v == variant;
  return n;
}

} // namespace

BOOST_AUTO_TEST_CASE(it_is_bitwise_equal_to_the_reference) {
  fin::RowPool pool(1000, 1008, 5);
  auto const host =
      fin::make_case(fin::Shape{1000, 9, 8, finalize::WeightType::kFp32}, 1008,
                     fin::parse_routing_case("--routings", "uniform/ep2"), 17, pool, false);
  fin::DeviceCase d(host);
  dev::Stream stream;
  auto const v = fin::verify_bf16(fin::run_bf16(d, fin::variant_options(kName), stream.get()),
                                  fin::expected_of(host, false));
  BOOST_TEST(v.pass, v.detail);
  BOOST_TEST(v.ulp_max == 0, v.detail);
}

BOOST_AUTO_TEST_CASE(check_and_sweep_finalize_run_it) {
  TempDir dir;
  int const check = cmd::check_finalize(
      {"--hidden", "1024,1000", "--tokens", "1,7", "--top-k", "8,22", "--weights", "bf16",
       "--routings", "uniform,uniform/ep2", "--variants", kName, "--out", dir.file("check.h5")});
  BOOST_TEST(check == kExitOk);
  h5::Table const c = h5::ResultReader(dir.file("check.h5")).read_table("finalize_check");
  BOOST_TEST(rows_of(c, kName) == 16u); // 2 H x 2 T x 2 K x 2 routings
  for (auto p : c.ints.at("pass"))
    BOOST_TEST(p == 1);
  int const sweep = cmd::sweep_finalize(
      {"--hidden", "2048",       "--tokens",   "1,8",     "--top-k",
       "8",        "--weights",  "bf16",       "--modes", "a,b",
       "--rounds", "3",          "--launches", "20",      "--repeat-shapes",
       "0",        "--variants", kName,        "--out",   dir.file("sweep.h5")});
  BOOST_TEST(sweep == kExitOk);
  h5::Table const s = h5::ResultReader(dir.file("sweep.h5")).read_table("finalize_sweep");
  BOOST_TEST(rows_of(s, kName) == 4u);    // 2 T x 2 modes
  BOOST_TEST(rows_of(s, "scalar") == 4u); // its baseline, in the same rounds
  for (std::size_t i = 0; i < s.rows; ++i)
    BOOST_TEST(s.reals.at("speedup_vs_scalar")[i] > 0.0);
}

BOOST_AUTO_TEST_CASE(the_layer_chain_runs_it_bitwise_equal_with_and_without_pdl) {
  chain::LayerShape const shape = chain::parse_shape("H512/I256/E32/top-6");
  chain::LayerWeights const w(shape, 7);
  chain::RunnerOptions o;
  o.tokens = 4;
  o.iterations = 32;
  chain::ChainRunner r(w, o);
  std::vector<std::uint64_t> seeds;
  for (int i = 0; i < o.iterations; ++i)
    seeds.push_back(chain::routing_seed(2026, shape, o.tokens, i));
  r.set_routings(seeds);
  chain::ChainConfig cfg = chain::preset_config(chain::Preset::kSeedAfter);
  chain::apply_overrides(cfg, std::string("finalize.variant=") + kName);
  BOOST_TEST(r.finalize_variant(cfg).name == kName);
  chain_run::Series s;
  auto const off = r.run_batch(cfg, false);
  auto const on = r.run_batch(cfg, true);
  chain_run::add_batch(s, on, off, r.routings());
  BOOST_TEST(s.mismatches == 0);
  BOOST_TEST(s.stale == 0);
  auto const bytes = r.download(chain::Buffer::kOut);
  auto const ref =
      chain_run::reference_output(r.plan(cfg), w, o.tokens, seeds.back(), r.hidden_states());
  double const err = chain_run::max_rel_err(reinterpret_cast<std::uint16_t const*>(bytes.data()),
                                            ref.data(), ref.size());
  BOOST_TEST(err < 1e-2);
}
