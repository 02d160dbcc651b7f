// Every writer killed (SIGKILL, no chance to clean up) at random moments: a file under its final
// name is complete or absent, `--overwrite` keeps the old file until the new one is complete, and
// the row-appending store keeps every finished row and resumes without duplicates. The counts go
// to the test output; every one that matters must be 0.

#define BOOST_TEST_MODULE interrupt
#include <boost/test/unit_test.hpp>

#include "core/store/h5store.hpp"
#include "core/ops/errors.hpp"
#include "core/rng.hpp"
#include "experiments/routing/routing_file.hpp"
#include "tests/hostile.hpp"
#include "tests/store_rows.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using namespace moefin;
using test::Outcome;

namespace {

/// Kills per writer: at least 50 that landed while the writer ran (a kill after it finished is
/// not counted), fewer with MOEFIN_KILLS for a quick look.
int kills_wanted() {
  if (char const* k = std::getenv("MOEFIN_KILLS"); k && *k)
    return std::max(1, std::atoi(k));
  return 50;
}

std::uint64_t seed() {
  if (char const* s = std::getenv("MOEFIN_FUZZ_SEED"); s && *s)
    return std::strtoull(s, nullptr, 0);
  return 20261203;
}

struct Tally {
  std::string writer;
  int kills = 0, finished_first = 0;
  int accepted_incomplete = 0; // a killed run's file read as complete but not what it should be
  int old_destroyed = 0;       // --overwrite: the previous file gone or damaged
  int rows_lost = 0;           // store: a row reported done that the file did not keep
  int resume_failures = 0;     // store: --resume did not complete the file exactly once per row
  int crashes = 0;             // the writer died of a signal we did not send
  void print() const {
    std::printf("[interrupt] %s: %d kills (%d runs finished before their kill); files accepted "
                "as complete after a kill: %d; old files destroyed by --overwrite: %d; finished "
                "rows lost: %d; failed resumes: %d; crashes: %d\n",
                writer.c_str(), kills, finished_first, accepted_incomplete, old_destroyed,
                rows_lost, resume_failures, crashes);
    std::fflush(stdout);
  }
  void check() const {
    BOOST_TEST(kills >= kills_wanted());
    BOOST_TEST(accepted_incomplete == 0);
    BOOST_TEST(old_destroyed == 0);
    BOOST_TEST(rows_lost == 0);
    BOOST_TEST(resume_failures == 0);
    BOOST_TEST(crashes == 0);
  }
};

/// Whether `path` reads as a complete moefin file.
bool accepted(std::string const& path) {
  try {
    h5::ResultReader r(path);
    return true;
  } catch (FileError const&) {
    return false;
  }
}

/// Kills `argv` at uniformly random moments of its duration (measured once, shrunk while runs
/// finish before their kill), runs `check` after each kill (with a scratch directory prepared
/// by `prepare`) and tallies.
void kill_loop(Tally& t, std::vector<std::string> const& argv, test::ScratchDir const& dir,
               std::function<void()> const& prepare,
               std::function<void(Tally&, Outcome const&)> const& check,
               std::set<int> const& finished = {0}) {
  prepare();
  Outcome full = test::run(argv, dir.file("full"), 600);
  BOOST_REQUIRE_MESSAGE(finished.count(full.status) && full.signal == 0,
                        t.writer << " does not run to completion: " << full.err);
  // The first run's time; it shrinks while runs finish before their kill (the first run can be
  // slow on a busy machine, e.g. beside the other tests of a parallel ctest), so that the kills
  // still land inside the runs.
  double span = std::max(full.seconds, 0.02);
  std::printf("[interrupt] %s: a whole run takes %.2f s; kills at uniform moments in [0, %.2f] s\n",
              t.writer.c_str(), full.seconds, 1.05 * span);
  Rng rng(Rng::mix(seed(), std::hash<std::string>{}(t.writer)));
  int attempts = 0;
  while (t.kills < kills_wanted() && attempts++ < 4 * kills_wanted() + 20) {
    prepare();
    double const at = rng.uniform(0.0, 1.05 * span);
    Outcome o;
    {
      test::Child c(argv, dir.file("k.out"), dir.file("k.err"));
      std::this_thread::sleep_for(std::chrono::duration<double>(at));
      o = c.kill_now();
    }
    o.out = test::slurp(dir.file("k.out"));
    o.err = test::slurp(dir.file("k.err"));
    if (o.signal == 0) {
      ++t.finished_first;
      span = std::max(0.9 * span, 0.02);
      continue;
    }
    if (o.signal != SIGKILL)
      ++t.crashes;
    ++t.kills;
    check(t, o);
  }
}

std::vector<std::string> moefin_line(std::vector<std::string> args) {
  args.insert(args.begin(), test::moefin_binary());
  return args;
}

/// A routing file is whole when read_routing (every array, shape and the layout they must
/// form) accepts it; `seed` is the seed it must have been written with.
bool whole_routing(std::string const& path, std::string const& seed) {
  try {
    cmd::StoredRouting const s = cmd::read_routing(path);
    return s.attrs.at("seed") == seed;
  } catch (std::exception const&) {
    return false;
  }
}

/// Shared shape of the route and reference-finalize tests: half the kills on a fresh name, half
/// replacing a complete file written with another seed (--overwrite).
void single_file_writer(std::string const& writer, std::vector<std::string> const& base,
                        std::function<bool(std::string const&, std::string const&)> whole) {
  test::ScratchDir dir(writer);
  std::string const target = dir.file("out.h5"), old = dir.file("old.h5");
  // The file an --overwrite run replaces: complete, written with seed 1.
  auto const make_old = test::run(moefin_line([&] {
                                    auto a = base;
                                    a.insert(a.end(), {"--seed", "1", "--out", old});
                                    return a;
                                  }()),
                                  dir.file("old"), 600);
  BOOST_REQUIRE_MESSAGE(make_old.status == 0, make_old.err);
  Tally t{writer};
  int trial = 0;
  bool overwrite = false;
  auto args = [&](bool ow) {
    auto a = base;
    a.insert(a.end(), {"--seed", "2", "--out", target});
    if (ow)
      a.push_back("--overwrite");
    return moefin_line(a);
  };
  auto prepare = [&] {
    overwrite = trial++ % 2 == 1;
    fs::remove(target);
    for (auto const& e : fs::directory_iterator(dir.path)) // temporaries of earlier kills
      if (e.path().filename().string().rfind(".out.h5.", 0) == 0)
        fs::remove(e.path());
    if (overwrite)
      fs::copy_file(old, target);
  };
  auto check = [&](Tally& tt, Outcome const&) {
    bool const exists = fs::exists(target);
    if (overwrite) {
      // The old file (seed 1) or the new one (seed 2), whole either way.
      bool const ok = exists && accepted(target) && (whole(target, "1") || whole(target, "2"));
      tt.old_destroyed += !ok;
    } else if (exists && accepted(target) && !whole(target, "2")) {
      ++tt.accepted_incomplete;
    }
  };
  // The measured run uses --overwrite, the slower of the two (the old file is there).
  kill_loop(t, args(true), dir, prepare, check);
  t.print();
  t.check();
}

} // namespace

BOOST_AUTO_TEST_CASE(killed_route_leaves_no_partial_file_and_keeps_the_one_it_overwrites) {
  single_file_writer(
      "route", {"route", "--tokens", "65536", "--experts", "256", "--top-k", "8", "--tile", "64"},
      whole_routing);
}

BOOST_AUTO_TEST_CASE(killed_reference_finalize_leaves_no_partial_file) {
  single_file_writer("reference_finalize",
                     {"reference", "finalize", "--hidden", "1024", "--tokens", "256", "--top-k",
                      "8", "--experts", "64"},
                     [](std::string const& path, std::string const& seed) {
                       if (!whole_routing(path, seed))
                         return false;
                       try {
                         h5::ResultReader r(path);
                         std::vector<std::size_t> dims;
                         r.read_reals("finalize", "out_exact", &dims);
                         r.read_ints("finalize", "out");
                         return dims == std::vector<std::size_t>{256, 1024};
                       } catch (std::exception const&) {
                         return false;
                       }
                     });
}

BOOST_AUTO_TEST_CASE(killed_simulate_timeline_leaves_no_partial_file) {
  test::ScratchDir dir("timeline");
  // A chain whose timeline is large (8 kernels x 1024 CTAs x 4 iterations: 32768 rows), so that
  // writing it takes a while; the wide kernels make no accesses (those the simulator compares
  // pairwise), two small ones race.
  std::string const chain = dir.file("wide.json");
  {
    std::ofstream js(chain);
    js << R"({"name": "wide", "buffers": {"a": "x"}, "iterations": 4, "kernels": [)"
       << R"({"name": "w", "ctas": 2, "path": ["trigger", "write a"]})";
    for (int k = 0; k < 6; ++k)
      js << R"(,{"name": "k)" << k << R"(", "ctas": 1024, "paths": [["wait", "trigger"], )"
         << R"(["trigger", "wait"]]})";
    js << R"(,{"name": "r", "ctas": 2, "path": ["read a", "wait"]}]})"
       << "\n";
  }
  std::string const target = dir.file("tl.h5");
  Tally t{"simulate --timeline"};
  auto prepare = [&] {
    fs::remove(target);
    for (auto const& e : fs::directory_iterator(dir.path))
      if (e.path().filename().string().rfind(".tl.h5.", 0) == 0)
        fs::remove(e.path());
  };
  auto whole = [&](std::string const& path) {
    try {
      h5::ResultReader r(path);
      std::vector<std::size_t> dims;
      auto const kernel = r.read_ints("timeline", "kernel", &dims);
      for (char const* n : {"cta", "path", "start_ns", "wait_ns", "trigger_ns", "end_ns"})
        if (r.read_ints("timeline", n).size() != kernel.size())
          return false;
      return kernel.size() == (6u * 1024u + 4u) * 4u &&
             r.group_attrs("timeline").count("source") == 1;
    } catch (std::exception const&) {
      return false;
    }
  };
  kill_loop(t,
            moefin_line(
                {"simulate", chain, "--schedules", "2", "--witnesses", "0", "--timeline", target}),
            dir, prepare,
            [&](Tally& tt, Outcome const&) {
              if (fs::exists(target) && accepted(target) && !whole(target))
                ++tt.accepted_incomplete;
            },
            {0, 1}); // 1: the chain races (it does)
  t.print();
  t.check();
}

namespace {

/// Whether `path` reads as complete and holds rows 0..rows-1 of moefin_store_writer exactly
/// once each, every value and sample as written.
bool store_whole(std::string const& path, long rows) {
  try {
    h5::ResultReader reader(path);
    auto const tab = reader.read_table(test::kStoreTable);
    std::set<std::string> keys(tab.keys().begin(), tab.keys().end());
    bool ok = tab.rows == static_cast<std::size_t>(rows) && keys.size() == tab.rows;
    for (std::size_t k = 0; ok && k < tab.rows; ++k) {
      long const idx = static_cast<long>(tab.ints.at("index")[k]);
      ok = tab.keys()[k] == test::store_key(idx) &&
           tab.reals.at("value")[k] == 0.5 * static_cast<double>(idx) + 0.25 &&
           tab.strings.at("label")[k] == "r" + std::to_string(idx) &&
           tab.row_samples(k) == test::store_samples(idx);
    }
    return ok;
  } catch (std::exception const& e) {
    BOOST_TEST_MESSAGE(path << " unreadable: " << e.what());
    return false;
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(killed_row_store_keeps_finished_rows_and_resume_completes_once) {
  test::ScratchDir dir("store");
  std::string const target = dir.file("rows.h5");
  long const rows = 60;
  std::vector<std::string> const argv = {MOEFIN_STORE_WRITER,  "--out",      target, "--rows",
                                         std::to_string(rows), "--delay-us", "2000"};
  Tally t{"row store (moefin_store_writer)"};
  auto prepare = [&] { fs::remove(target); };
  auto check = [&](Tally& tt, Outcome const& o) {
    std::set<long> done;
    std::istringstream is(o.out);
    std::string word;
    long i = 0;
    while (is >> word >> i)
      if (word == "done")
        done.insert(i);
    if (!fs::exists(target))
      return; // killed before the file had its name: nothing to accept, nothing was finished
    // A file read as complete must hold every row: a kill between commit() and exit leaves a
    // finished file, anything else accepted is a half-written file taken for a whole one.
    if (accepted(target) && !store_whole(target, rows))
      ++tt.accepted_incomplete;
    Outcome const r =
        test::run({MOEFIN_STORE_WRITER, "--resume", target, "--rows", std::to_string(rows)},
                  dir.file("resume"), 120);
    if (r.status != 0) {
      ++tt.resume_failures;
      BOOST_TEST_MESSAGE("resume failed: " << r.err);
      return;
    }
    std::set<long> skipped;
    std::istringstream rs(r.out);
    while (rs >> word >> i)
      if (word == "skip")
        skipped.insert(i);
    for (long d : done)
      tt.rows_lost += skipped.count(d) == 0;
    tt.resume_failures += !store_whole(target, rows);
  };
  kill_loop(t, argv, dir, prepare, check);
  t.print();
  t.check();
}
