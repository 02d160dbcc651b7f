#define BOOST_TEST_MODULE bench_state
#include <boost/test/unit_test.hpp>

// The benchmark state every result-writing experiment runs on (experiments/harness/bench_state):
// enumeration order and stable indices, keys and axis columns from the same values, skips with
// their reasons in /skipped, --resume, --max-minutes, the statistics columns and paired ratios.
// A fake body stands in for the GPU.

#include "core/store/h5store.hpp"
#include "core/stats.hpp"
#include "experiments/harness/bench_state.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>

using namespace moefin;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("moefin_bench_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string file(char const* n) const { return (path / n).string(); }
};

std::vector<h5::Column> columns() {
  auto c = std::vector<h5::Column>{h5::int_col("H"), h5::int_col("T"), h5::str_col("variant", 16),
                                   h5::int_col("rounds")};
  for (auto const& s : bench::stats_columns())
    c.push_back(s);
  c.push_back(h5::real_col("speedup"));
  c.push_back(h5::real_col("speedup_lo"));
  c.push_back(h5::real_col("speedup_hi"));
  return c;
}

/// H in {512, 1000}, T from H (1 and H/256), variant a row axis {base, fast, wide}; "wide"
/// cannot run H = 1000; ratio of every row against "base".
bench::Benchmark toy() {
  bench::Benchmark b("toy", columns(), "test table");
  b.axis(bench::int_axis("H", {512, 1000}));
  bench::Axis t = bench::int_axis("T", {});
  t.from = [](bench::Config const& c) {
    return std::vector<bench::Value>{std::int64_t(1), c.num("H") / 256};
  };
  b.axis(t);
  bench::Axis v = bench::string_axis("variant", {"base", "fast", "wide"}, bench::Scope::kRow);
  v.key_label = "v";
  b.axis(v);
  b.key_order({"variant", "H", "T"});
  b.skip_if([](bench::Config const& r) {
    return r.str("variant") == "wide" && r.num("H") % 16 != 0 ? std::string("needs H % 16 == 0")
                                                              : std::string();
  });
  b.cost([](bench::Config const& u, std::size_t rows) {
    return 0.5 * static_cast<double>(rows) * static_cast<double>(u.num("T"));
  });
  b.timed();
  b.ratio({"speedup", "speedup_lo", "speedup_hi", "variant",
           [](bench::Config const&) { return std::string("base"); }, true, 1.0});
  return b;
}

/// Samples of a row: base 10 us, fast 5 us (2x), wide 4 us, each with a per-round drift that
/// the paired ratio cancels.
std::vector<double> samples_of(bench::Config const& r) {
  double const us = r.str("variant") == "base" ? 10.0 : r.str("variant") == "fast" ? 5.0 : 4.0;
  std::vector<double> s;
  for (int i = 0; i < 5; ++i)
    s.push_back(us * (1.0 + 0.1 * i));
  return s;
}

struct Calls {
  int units = 0;
  std::size_t rows_asked = 0;
};

bench::Body fake_body(Calls& calls) {
  return
      [&calls](bench::Unit const& u, std::vector<bench::Config> const& todo, bench::Recorder& rec) {
        ++calls.units;
        calls.rows_asked += todo.size();
        for (auto const& r : u.rows) { // every row: the partners of the ratios
          bench::Measurement m;
          m.samples = samples_of(r);
          m.columns.set("rounds", 5);
          rec.add(r, std::move(m));
        }
      };
}

} // namespace

BOOST_AUTO_TEST_CASE(units_are_enumerated_in_a_stable_order_with_keys_from_their_values) {
  auto const units = toy().enumerate();
  BOOST_TEST_REQUIRE(units.size() == 4u); // H=512: T 1, 2; H=1000: T 1, 3
  BOOST_TEST(units[1].config.num("T") == 2);
  BOOST_TEST(units[3].config.num("T") == 3);
  for (std::size_t i = 0; i < units.size(); ++i)
    BOOST_TEST(units[i].index == i);
  BOOST_TEST(units[0].rows.size() == 3u);
  BOOST_TEST(units[2].rows.size() == 2u); // wide cannot run H = 1000
  BOOST_TEST_REQUIRE(units[2].skipped.size() == 1u);
  BOOST_TEST(units[2].skipped[0].second == "needs H % 16 == 0");
  BOOST_TEST(toy().row_key(units[2].rows[1]) == "v=fast,H=1000,T=1");
  BOOST_TEST(units[3].cost_s == 0.5 * 2 * 3);
  BOOST_TEST(units[1].label == "H=512,T=2");
  std::ostringstream os;
  toy().list(os);
  BOOST_TEST(os.str().find("toy: 4 units, 10 rows, 2 skipped") != std::string::npos, os.str());
  BOOST_TEST(os.str().find("skip v=wide,H=1000,T=3: needs H % 16 == 0") != std::string::npos);
  // A shard's list: only its units, counted against the whole.
  std::ostringstream part;
  toy().list(part, [](std::size_t i) { return i % 2 == 1; });
  BOOST_TEST(part.str().find("toy: 2 of 4 units, 5 rows, 1 skipped") != std::string::npos,
             part.str());
  BOOST_TEST(part.str().find("[0] ") == std::string::npos, part.str());
  BOOST_TEST(part.str().find("[3] ") != std::string::npos, part.str());
}

BOOST_AUTO_TEST_CASE(rows_get_their_axis_columns_statistics_and_paired_ratios) {
  TempDir d;
  Calls calls;
  {
    auto file = h5::ResultWriter::create(d.file("toy.h5"), h5::collect_provenance(1));
    auto const r = toy().run(file, bench::RunOptions{}, fake_body(calls));
    BOOST_TEST(r.rows == 10u);
    BOOST_TEST(r.skips == 2u);
    BOOST_TEST(r.measured == 4u);
  }
  BOOST_TEST(calls.units == 4);
  h5::ResultReader reader(d.file("toy.h5"));
  h5::Table const t = reader.read_table("toy");
  BOOST_TEST_REQUIRE(t.rows == 10u);
  std::size_t const fast = t.find("v=fast,H=512,T=2");
  BOOST_TEST(t.ints.at("H")[fast] == 512);
  BOOST_TEST(t.ints.at("T")[fast] == 2);
  BOOST_TEST(t.strings.at("variant")[fast] == "fast");
  auto const s = stats::summarize(samples_of(bench::Config().set("variant", std::string("fast"))));
  BOOST_TEST(t.reals.at("median_us")[fast] == s.median);
  BOOST_TEST(t.reals.at("q3_us")[fast] == s.q3);
  BOOST_TEST(std::fabs(t.reals.at("speedup")[fast] - 2.0) < 1e-12); // the drift cancels
  BOOST_TEST(t.reals.at("speedup")[t.find("v=base,H=512,T=2")] == 1.0);
  BOOST_TEST(t.row_samples(fast).size() == 5u);
  h5::Table const skipped = reader.read_table("skipped");
  BOOST_TEST(skipped.rows == 2u);
  BOOST_TEST(skipped.strings.at("experiment")[0] == "toy");
  BOOST_TEST(skipped.strings.at("row_key")[0] == "v=wide,H=1000,T=1");
  BOOST_TEST(skipped.strings.at("reason")[0] == "needs H % 16 == 0");
}

BOOST_AUTO_TEST_CASE(resume_measures_only_what_the_file_lacks) {
  TempDir d;
  Calls first, second;
  {
    auto file = h5::ResultWriter::create(d.file("toy.h5"), h5::collect_provenance(1));
    // A body that records only the first unit's rows, then "dies".
    bench::Body partial = [&](bench::Unit const& u, std::vector<bench::Config> const& todo,
                              bench::Recorder& rec) {
      if (u.index == 0)
        fake_body(first)(u, todo, rec);
    };
    toy().run(file, bench::RunOptions{}, partial);
  }
  {
    auto file = h5::ResultWriter::resume(d.file("toy.h5"));
    auto const r = toy().run(file, bench::RunOptions{}, fake_body(second));
    BOOST_TEST(r.resumed == 1u); // unit 0 is complete
    BOOST_TEST(r.rows == 7u);
  }
  BOOST_TEST(second.units == 3);
  BOOST_TEST(second.rows_asked == 7u);
  BOOST_TEST(h5::ResultReader(d.file("toy.h5")).read_table("toy").rows == 10u);
  Calls third;
  auto file = h5::ResultWriter::resume(d.file("toy.h5"));
  BOOST_TEST(toy().run(file, bench::RunOptions{}, fake_body(third)).resumed == 4u);
  BOOST_TEST(third.units == 0);
}

BOOST_AUTO_TEST_CASE(max_minutes_stops_before_a_unit_that_would_end_past_the_limit) {
  TempDir d;
  Calls calls;
  auto file = h5::ResultWriter::create(d.file("toy.h5"), h5::collect_provenance(1));
  bench::RunOptions o;
  o.max_minutes =
      0.02; // 1.2 s: the first unit's estimate (1.5 s, 2.25 s with the margin) does not fit
  auto const r = toy().run(file, o, fake_body(calls));
  BOOST_TEST(calls.units == 0);
  BOOST_TEST(r.left == 4u);
  BOOST_TEST(r.rows == 0u);
  Calls all; // no limit: every unit
  BOOST_TEST(toy().run(file, bench::RunOptions{}, fake_body(all)).left == 0u);
  BOOST_TEST(all.units == 4);
}

BOOST_AUTO_TEST_CASE(a_row_whose_ratio_partner_was_not_measured_is_skipped_with_the_reason) {
  TempDir d;
  auto file = h5::ResultWriter::create(d.file("toy.h5"), h5::collect_provenance(1));
  bench::Body no_base = [](bench::Unit const& u, std::vector<bench::Config> const&,
                           bench::Recorder& rec) {
    for (auto const& r : u.rows)
      if (r.str("variant") != "base") {
        bench::Measurement m;
        m.samples = samples_of(r);
        m.columns.set("rounds", 5);
        rec.add(r, std::move(m));
      } else {
        rec.skip(r, "base cannot run here");
      }
  };
  auto const r = toy().run(file, bench::RunOptions{}, no_base);
  BOOST_TEST(r.rows == 0u);
  file.commit(); // a new file is under its final name once the run is complete
  h5::ResultReader reader(d.file("toy.h5"));
  auto const skipped = reader.read_table("skipped");
  BOOST_TEST(skipped.rows == 12u); // 2 declared, 4 base, 6 without their partner
  bool named = false;
  for (auto const& reason : skipped.strings.at("reason"))
    named = named || reason == "its ratio partner variant=base was not measured";
  BOOST_TEST(named);
}

BOOST_AUTO_TEST_CASE(a_part_of_the_units_runs_and_each_complete_unit_is_reported) {
  TempDir d;
  auto file = h5::ResultWriter::create(d.file("toy.h5"), h5::collect_provenance(1));
  std::vector<std::pair<std::size_t, std::size_t>> done; // (index, rows written)
  bench::RunOptions o;
  o.runs = [](bench::Unit const& u) { return u.index % 2 == 0; };
  o.finished = [&](bench::Unit const& u, std::size_t rows, double) {
    done.emplace_back(u.index, rows);
  };
  // Unit 2's "fast" row gets no measurement (a broken output): unit 2 is not complete.
  bench::Body lossy = [](bench::Unit const& u, std::vector<bench::Config> const&,
                         bench::Recorder& rec) {
    for (auto const& r : u.rows)
      if (u.index != 2 || r.str("variant") != "fast") {
        bench::Measurement m;
        m.samples = samples_of(r);
        m.columns.set("rounds", 5);
        rec.add(r, std::move(m));
      }
  };
  auto const r = toy().run(file, o, lossy);
  BOOST_TEST(r.units == 2u);
  BOOST_TEST(r.measured == 2u);
  BOOST_TEST(r.rows == 4u); // unit 0: 3 rows, unit 2: base only
  BOOST_TEST_REQUIRE(done.size() == 1u);
  BOOST_TEST(done[0].first == 0u);
  BOOST_TEST(done[0].second == 3u);
  // Again with a body that measures everything: unit 0 is already complete, unit 2 now is.
  done.clear();
  Calls calls;
  auto const again = toy().run(file, o, fake_body(calls));
  BOOST_TEST(again.resumed == 1u);
  BOOST_TEST(calls.units == 1);
  BOOST_TEST(calls.rows_asked == 1u);
  BOOST_TEST_REQUIRE(done.size() == 2u);
  BOOST_TEST((done[0] == std::pair<std::size_t, std::size_t>{0, 0}));
  BOOST_TEST((done[1] == std::pair<std::size_t, std::size_t>{2, 1}));
}
