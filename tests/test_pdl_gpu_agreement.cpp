// Agreement with the GPU: every cell of a measured race matrix (data/h200/*race*.h5, group
// /race_matrix, data/README.md) is mapped to a chain description and verified. A race observed
// on the GPU must be a RACE for the verifier; a chain the verifier orders must show no stale read
// and no mismatch. Until such a file exists the test reports itself skipped (exit 77), not passed.
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include "core/h5store.hpp"
#include "core/pdl/moe_chain.hpp"
#include "core/pdl/verifier.hpp"

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace moefin;

namespace {

std::vector<std::string> race_files() {
  std::vector<std::string> out;
  fs::path const dir = fs::path(MOEFIN_SOURCE_DIR) / "data" / "h200";
  if (!fs::is_directory(dir))
    return out;
  for (auto const& e : fs::directory_iterator(dir)) {
    std::string const name = e.path().filename().string();
    if (e.path().extension() == ".h5" && name.find("race") != std::string::npos)
      out.push_back(e.path().string());
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(verifier_agrees_with_every_measured_race_matrix_cell) {
  std::size_t cells = 0, observed = 0;
  for (std::string const& f : race_files()) {
    h5::ResultReader reader(f);
    BOOST_TEST_REQUIRE(reader.has_group("race_matrix"), f << " has no /race_matrix");
    h5::Table const t = reader.read_table("race_matrix");
    for (std::size_t i = 0; i < t.rows; ++i) {
      std::string const cell = f + " row " + std::to_string(i) + " (" + t.keys()[i] + ")";
      pdl::MoeChainSpec spec;
      try {
        spec = pdl::spec_from_race_cell(t.strings.at("preset")[i], t.strings.at("triggers")[i],
                                        t.strings.at("meta")[i],
                                        static_cast<int>(t.ints.at("iterations")[i]));
      } catch (std::exception const& e) {
        BOOST_ERROR(cell << ": cannot map to a chain: " << e.what());
        continue;
      }
      pdl::Report const r = pdl::verify(pdl::make_moe_chain(spec, "race_cell"), {false});
      bool const race = r.verdict() == pdl::Verdict::kRace;
      std::int64_t const stale = t.ints.at("stale_reads")[i];
      std::int64_t const mismatches = t.ints.at("mismatches")[i];
      if (stale > 0 || mismatches > 0) {
        ++observed;
        BOOST_TEST(race, cell << ": the GPU showed " << stale << " stale reads and " << mismatches
                              << " mismatches, the verifier orders " << pdl::spec_label(spec));
      }
      if (!race)
        BOOST_TEST((stale == 0 && mismatches == 0), cell << ": ordered but stale on the GPU");
      BOOST_TEST(t.strings.at("verifier")[i] == (race ? "race" : "ordered"),
                 cell << ": the file records another verdict for " << pdl::spec_label(spec));
      ++cells;
    }
  }
  BOOST_TEST_MESSAGE(cells << " cells checked, " << observed << " with a race observed");
  BOOST_TEST(cells > 0u);
}

bool init_unit_test() {
  return true;
}

int main(int argc, char* argv[]) {
  if (race_files().empty()) {
    std::printf("SKIPPED: no race matrix measured on a GPU yet (data/h200/*race*.h5 with "
                "/race_matrix); `moefin race` on an H200 writes it\n");
    return 77;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
