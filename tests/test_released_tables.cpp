#define BOOST_TEST_MODULE released_tables
#include <boost/test/unit_test.hpp>

// The tables of the released finalize variants, rendered from synthetic result files (no GPU,
// no released package needed: the tables pair variants by name): the seed's table on the
// released kernels (fi_small_batch vs fi_scalar) and the faithfulness of moefin's variants
// (X / fi_X); a file without released rows prints neither.

#include "experiments/report/finalize_tables.hpp"
#include "tests/sweep_file.hpp"

#include <filesystem>
#include <string>
#include <unistd.h>

using namespace moefin;
using moefin::test::provenance;
using moefin::test::RowSpec;
using moefin::test::write_sweep;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("moefin_released_tables_" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

bool contains(std::string const& s, std::string const& sub) {
  return s.find(sub) != std::string::npos;
}

/// The text from the first line containing `heading` to the next blank line.
std::string block_of(std::string const& text, std::string const& heading) {
  auto const at = text.find(heading);
  if (at == std::string::npos)
    return "";
  auto const end = text.find("\n\n", at);
  return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

std::string published_csv() {
  return std::string(MOEFIN_SOURCE_DIR) + "/data/published/finalize_only_speedup.csv";
}

} // namespace

BOOST_AUTO_TEST_CASE(released_seed_table_and_faithfulness) {
  TempDir dir;
  std::string const f = (dir.path / "h200.h5").string();
  // Two shapes at K = 8 and one at K = 16, mode a; K = 8 in mode b; moefin's and the released
  // variants of each role side by side (speedups as the sweep stores them: over each variant's
  // baseline, scalar resp. fi_scalar).
  std::vector<RowSpec> rows{
      {1024, 1, 8, "a", "scalar", "small_batch", 2.0, 1.0},
      {1024, 1, 8, "a", "fi_scalar", "small_batch", 1.6, 1.0},
      {1024, 1, 8, "a", "small_batch", "small_batch", 1.0, 2.0},
      {1024, 1, 8, "a", "fi_small_batch", "small_batch", 1.25, 1.28},
      {4096, 2, 8, "a", "scalar", "small_batch", 3.0, 1.0},
      {4096, 2, 8, "a", "fi_scalar", "small_batch", 3.0, 1.0},
      {4096, 2, 8, "a", "small_batch", "small_batch", 1.5, 2.0},
      {4096, 2, 8, "a", "fi_small_batch", "small_batch", 1.2, 2.5},
      {7168, 1, 16, "a", "vecload", "small_batch", 2.2, 0.9},
      {7168, 1, 16, "a", "fi_vecload", "small_batch", 2.0, 0.8},
      {1024, 1, 8, "b", "small_batch", "small_batch", 1.0, 1.1},
      {1024, 1, 8, "b", "fi_small_batch", "small_batch", 1.1, 1.3},
  };
  write_sweep(f, provenance("NVIDIA H200", "sm_90"), rows);
  std::string const text = fin::render_finalize_tables({f}, published_csv());
  BOOST_TEST_MESSAGE(text);

  // The seed's table on the released kernels, mode a with the published columns: K = 8 median
  // of 1.28 and 2.5 with the minimum, no dispatch column (moefin's dispatcher is not theirs).
  auto const ra = block_of(text, "fi_small_batch vs fi_scalar, mode a (");
  BOOST_TEST(!ra.empty(), text);
  BOOST_TEST(contains(ra, "1.89x (1.28)"), ra);
  BOOST_TEST(contains(ra, "GB200 (SM100)*"), ra);
  BOOST_TEST(!contains(ra, "dispatch"), ra);
  auto const rb = block_of(text, "fi_small_batch vs fi_scalar, mode b (");
  BOOST_TEST(contains(rb, "1.30x (1.30)"), rb);
  BOOST_TEST(!contains(text, "fi_small_batch vs fi_scalar, mode c"), text);
  // moefin's own table is unchanged by the released rows: K = 8 median of 2.0 and 2.0.
  auto const ma = block_of(text, "small_batch vs scalar, mode a (");
  BOOST_TEST(contains(ma, "2.00x (2.00)"), ma);
  BOOST_TEST(!contains(ma, "1.89x"), ma);

  // Faithfulness, mode a: scalar 2.0/1.6 = 1.25 and 3.0/3.0 = 1 at K = 8 (median 1.125);
  // small_batch 1.0/1.25 = 0.8 and 1.5/1.2 = 1.25; vecload 2.2/2.0 = 1.1 at K = 16.
  auto const fa = block_of(text, "faithfulness, H200 (sm_90), mode a");
  BOOST_TEST(!fa.empty(), text);
  BOOST_TEST(contains(fa, "scalar / fi_scalar"), fa);
  BOOST_TEST(contains(fa, "small_batch / fi_small_batch"), fa);
  BOOST_TEST(contains(fa, "vecload / fi_vecload"), fa);
  BOOST_TEST(contains(fa, "1.125 [1.000, 1.250]"), fa);
  BOOST_TEST(contains(fa, "1.025 [0.800, 1.250]"), fa);
  BOOST_TEST(contains(fa, "1.100 [1.100, 1.100]"), fa);
  auto const fb = block_of(text, "faithfulness, H200 (sm_90), mode b");
  BOOST_TEST(contains(fb, "0.909 [0.909, 0.909]"), fb); // 1.0 / 1.1
  BOOST_TEST(!contains(fb, "scalar / fi_scalar"), fb);  // no scalar pair in mode b
  // The ablation says which baseline the released columns use.
  BOOST_TEST(contains(text, "(released fi_* variants: speedup over fi_scalar"), text);
}

BOOST_AUTO_TEST_CASE(files_without_released_rows_print_no_released_tables) {
  TempDir dir;
  std::string const f = (dir.path / "moefin_only.h5").string();
  write_sweep(f, provenance("NVIDIA H200", "sm_90"),
              {{1024, 1, 8, "a", "scalar", "small_batch", 2.0, 1.0},
               {1024, 1, 8, "a", "small_batch", "small_batch", 1.0, 2.0},
               {1024, 1, 8, "a", "small_batch_nosplit", "small_batch", 1.5, 1.3}});
  std::string const text = fin::render_finalize_tables({f}, published_csv());
  BOOST_TEST(contains(text, "small_batch vs scalar, mode a"), text);
  BOOST_TEST(!contains(text, "fi_"), text);
  BOOST_TEST(!contains(text, "faithfulness"), text);
}
