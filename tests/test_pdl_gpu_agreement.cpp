// Agreement with the GPU. Every row of every measured race matrix (data/h200/*race*.h5, group
// /race_matrix) is rebuilt into the chain the cell ran (race::row_config, chain::verifier_chain:
// the mapping `moefin race` uses when it writes the `verifier` column) and verified; every row of
// the PDL probe (data/h200/h200_pdl_probe.h5, /pdl_probe) is verified on its shipped chain
// (data/chains/h200_*.json), as stream launches and as one CUDA graph. A race seen on the GPU must
// be a race for the verifier; a read the verifier orders must never be seen stale.
#define BOOST_TEST_MODULE pdl_gpu_agreement
#include <boost/test/unit_test.hpp>

#include "core/store/h5store.hpp"
#include "core/pdl/verifier.hpp"
#include "experiments/chain/race_cells.hpp"
#include "kernels/common/pdl_probe.hpp"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace moefin;

namespace {

fs::path h200_dir() {
  return fs::path(MOEFIN_SOURCE_DIR) / "data" / "h200";
}

std::vector<std::string> race_files() {
  std::vector<std::string> out;
  for (auto const& e : fs::directory_iterator(h200_dir())) {
    std::string const name = e.path().filename().string();
    if (e.path().extension() == ".h5" && name.find("race") != std::string::npos)
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string attr(h5::Provenance const& p, char const* name) {
  auto const it = p.find(name);
  return it == p.end() ? "absent" : it->second;
}

bool is_race(pdl::Verdict v) {
  return v == pdl::Verdict::kRace;
}

/// Rounds the probe chains are verified over: the probe runs its rounds back to back (the next
/// producer is the consumer's secondary), and each round ends in a consumer that waits before it
/// triggers (at its exit), so the second round has every kind of pair across rounds.
constexpr int kProbeRounds = 2;

/// The shipped chain has the probe's kernels and trigger placements (so that a file mapped to the
/// wrong row cannot pass by an accident of equal verdicts).
void check_chain_matches_probe(pdl::Chain const& c, probe::ProbeChain const& p) {
  std::size_t const n = 2 + p.middle_triggers_before_wait.size();
  BOOST_TEST_REQUIRE(c.kernels.size() == n, c.name << " for '" << p.name << "'");
  auto const triggers_before_wait = [](pdl::Path const& path) {
    int const t = pdl::first_of(path, pdl::OpKind::kTrigger);
    int const w = pdl::first_of(path, pdl::OpKind::kWait);
    return t >= 0 && (w < 0 || t < w);
  };
  pdl::Path const& producer = c.kernels.front().paths.at(0);
  int const last = static_cast<int>(producer.size()) - 1;
  BOOST_TEST(pdl::first_of(producer, pdl::OpKind::kTrigger) ==
                 (p.producer_triggers_at_end ? last : 0),
             c.name);
  for (std::size_t m = 0; m < p.middle_triggers_before_wait.size(); ++m)
    BOOST_TEST(triggers_before_wait(c.kernels[1 + m].paths.at(0)) ==
                   p.middle_triggers_before_wait[m],
               c.name << " middle " << m);
  BOOST_TEST(c.kernels.back().name == "consumer", c.name);
}

} // namespace

BOOST_AUTO_TEST_CASE(every_race_seen_in_a_race_matrix_is_a_race_for_the_verifier) {
  std::vector<std::string> const files = race_files();
  // The H200 matrices under the largest shared carveout (where races show) and the driver's.
  BOOST_TEST_REQUIRE(files.size() >= 2u, "data/h200/*race*.h5: " << files.size() << " files");
  std::size_t rows = 0, cells = 0, observed = 0, verifier_races = 0, verifier_ordered = 0;
  for (std::string const& f : files) {
    h5::ResultReader reader(f);
    BOOST_TEST_REQUIRE(reader.has_group("race_matrix"), f << " has no /race_matrix");
    h5::Table const t = reader.read_table("race_matrix");
    h5::Provenance const& root = reader.provenance();
    BOOST_TEST_MESSAGE(fs::path(f).filename().string()
                       << ": " << t.rows << " rows, ctas_per_sm " << attr(root, "ctas_per_sm")
                       << ", carveout " << attr(root, "carveout") << ", launch "
                       << attr(root, "launch"));
    rows += t.rows;
    for (std::size_t i = 0; i < t.rows; ++i) {
      std::string const cell =
          fs::path(f).filename().string() + " row " + std::to_string(i) + " (" + t.keys()[i] + ")";
      chain::CellVerdict v;
      try {
        v = race::row_verdict(t, i, root);
      } catch (std::exception const& e) {
        BOOST_ERROR(cell << ": cannot rebuild its chain: " << e.what());
        continue;
      }
      std::int64_t const stale = t.ints.at("stale_iterations")[i];
      std::int64_t const stale_reads = t.ints.at("stale_reads")[i];
      std::int64_t const mismatches = t.ints.at("mismatches")[i];
      BOOST_TEST(t.ints.at("iterations")[i] > 0, cell);
      if (stale > 0 || stale_reads > 0 || mismatches > 0) {
        ++observed;
        BOOST_TEST(is_race(v.metadata), cell << ": the GPU showed " << stale
                                             << " stale iterations and " << mismatches
                                             << " mismatches; the verifier orders finalize's "
                                                "reads of routing's metadata");
        BOOST_TEST(is_race(v.chain), cell << ": race seen, the verifier orders the chain");
      }
      if (!is_race(v.chain))
        BOOST_TEST((stale == 0 && stale_reads == 0 && mismatches == 0),
                   cell << ": the verifier orders the chain, the GPU showed " << stale
                        << " stale iterations and " << mismatches << " mismatches");
      if (!is_race(v.metadata))
        BOOST_TEST(stale_reads == 0, cell << ": finalize's metadata reads are ordered");
      // Only a pre-wait read can race in a chain whose every kernel waits on every path.
      BOOST_TEST((v.chain == v.metadata), cell);
      std::string const recorded = t.strings.at("verifier")[i];
      if (recorded != "unknown")
        BOOST_TEST(recorded == pdl::verdict_name(v.chain), cell << ": verdict in the file");
      is_race(v.chain) ? ++verifier_races : ++verifier_ordered;
      ++cells;
    }
  }
  BOOST_TEST_MESSAGE(cells << " cells checked, " << observed << " with a race seen on the GPU, "
                           << verifier_races << " races and " << verifier_ordered
                           << " ordered chains for the verifier");
  BOOST_TEST(cells == rows);
  BOOST_TEST(observed > 0u);         // the data holds races the check must explain
  BOOST_TEST(verifier_ordered > 0u); // and ordered chains whose zero counts it checks
}

BOOST_AUTO_TEST_CASE(a_graph_of_layers_orders_like_the_stream_for_every_cell) {
  race::Axes axes;
  axes.presets = {chain::kAllPresets.begin(), chain::kAllPresets.end()};
  std::size_t n = 0;
  for (auto const& c : race::cells(axes)) {
    if (c.delay_ns != 0)
      continue; // delays do not enter the chain
    for (char const* variant : {"small_batch", "scalar"}) {
      auto const& v = finalize::variant(variant, "test");
      chain::CellVerdict const s = chain::verify_cell(c.cfg, v, false);
      chain::CellVerdict const g = chain::verify_cell(c.cfg, v, true);
      BOOST_TEST((s.chain == g.chain), c.key << " " << variant);
      BOOST_TEST((s.metadata == g.metadata), c.key << " " << variant);
      ++n;
    }
  }
  BOOST_TEST(n > 100u);
}

BOOST_AUTO_TEST_CASE(every_stale_probe_read_is_a_race_for_the_verifier) {
  std::string const path = (h200_dir() / "h200_pdl_probe.h5").string();
  h5::ResultReader reader(path);
  BOOST_TEST_REQUIRE(reader.has_group("pdl_probe"), path << " has no /pdl_probe");
  h5::Table const t = reader.read_table("pdl_probe");
  auto const chains = probe::design_chains();
  std::size_t checked = 0, stale_rows = 0, graph_rows = 0, stream_rows = 0;
  for (std::size_t i = 0; i < t.rows; ++i) {
    std::string const name = t.strings.at("chain")[i];
    std::string const launch = t.strings.at("launch")[i];
    std::string const row = "pdl_probe row " + std::to_string(i) + " (" + t.keys()[i] + ")";
    auto const p = std::find_if(chains.begin(), chains.end(),
                                [&](probe::ProbeChain const& c) { return c.name == name; });
    if (p == chains.end()) {
      BOOST_ERROR(row << ": no probe chain named '" << name << "'");
      continue;
    }
    pdl::Chain c =
        pdl::load_chain(std::string(MOEFIN_SOURCE_DIR) + "/data/chains/" + p->chain_file + ".json");
    check_chain_matches_probe(c, *p);
    int const consumer = c.kernel_index("consumer");
    int const kernels = static_cast<int>(c.kernels.size());
    int const data = c.buffer_index("data");
    std::vector<int> readers = {consumer};
    if (launch == "graph") {
      c = pdl::captured_graph(c, kProbeRounds); // the probe captures every round in one graph
      for (int r = 1; r < kProbeRounds; ++r)
        readers.push_back(r * kernels + consumer);
      ++graph_rows;
    } else {
      BOOST_TEST_REQUIRE(launch == "stream", row);
      c.iterations = kProbeRounds;
      ++stream_rows;
    }
    pdl::Report const r = pdl::verify(c, {false});
    std::int64_t const pre = t.ints.at("stale_pre_wait")[i];
    std::int64_t const post = t.ints.at("stale_post_wait")[i];
    bool const pre_race = is_race(pdl::reads_verdict(c, r, readers, data, true));
    bool const post_race = is_race(pdl::reads_verdict(c, r, readers, data, false));
    if (pre > 0)
      BOOST_TEST(pre_race, row << ": " << pre << " stale pre-wait reads, " << p->chain_file
                               << " orders them");
    if (!pre_race)
      BOOST_TEST(pre == 0, row << ": " << p->chain_file << " orders the pre-wait read");
    if (post > 0)
      BOOST_TEST(post_race, row << ": " << post << " stale post-wait reads");
    if (!post_race)
      BOOST_TEST(post == 0, row << ": " << p->chain_file << " orders the post-wait read");
    stale_rows += pre > 0 || post > 0;
    ++checked;
  }
  BOOST_TEST_MESSAGE(checked << " probe rows checked, " << stale_rows << " with stale reads");
  BOOST_TEST(checked == t.rows);
  BOOST_TEST(t.rows == 2 * chains.size());
  BOOST_TEST(stale_rows > 0u);
  BOOST_TEST(graph_rows == stream_rows);
}
