#define BOOST_TEST_MODULE shard_cli
#include <boost/test/unit_test.hpp>

// Sharded sweeps end to end, without a GPU: `moefin sweep synthetic` started by OpenMPI's mpirun,
// by a launcher environment set by hand (MPICH/PMI, a Slurm array) and with --shard, each shard
// merged with `moefin merge` and compared row by row, value by value, with one unsharded run.

#include "core/store/h5store.hpp"
#include "tests/run_moefin.hpp"

#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

namespace fs = std::filesystem;
using namespace moefin;
using moefin::test::contains;
using moefin::test::run;
using moefin::test::shell;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("moefin_shard_cli_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string file(std::string const& name) const { return (path / name).string(); }
};

std::string const kGrid = "sweep synthetic --sizes 1:9 --variants base,fast,slow --seed 11";
std::string const kBinary = MOEFIN_BINARY;

/// The same rows: same keys, same axis values (n, variant), same values and raw samples.
void expect_same_rows(std::string const& a, std::string const& b) {
  h5::ResultReader ra(a), rb(b);
  auto const ta = ra.read_table("synthetic_sweep"), tb = rb.read_table("synthetic_sweep");
  BOOST_TEST_REQUIRE(ta.rows == tb.rows);
  std::set<std::string> const ka(ta.keys().begin(), ta.keys().end());
  std::set<std::string> const kb(tb.keys().begin(), tb.keys().end());
  BOOST_TEST_REQUIRE((ka == kb));
  for (std::size_t i = 0; i < ta.rows; ++i) {
    std::size_t const j = tb.find(ta.keys()[i]);
    BOOST_TEST(ta.ints.at("n")[i] == tb.ints.at("n")[j]);
    BOOST_TEST(ta.strings.at("variant")[i] == tb.strings.at("variant")[j]);
    BOOST_TEST(ta.reals.at("median")[i] == tb.reals.at("median")[j]);
    BOOST_TEST(ta.reals.at("min")[i] == tb.reals.at("min")[j]);
    BOOST_TEST((ta.row_samples(i) == tb.row_samples(j)));
  }
}

std::string unsharded(TempDir const& dir) {
  std::string const f = dir.file("full.h5");
  if (!fs::exists(f)) {
    auto const r = run(kGrid + " --out " + f);
    BOOST_TEST_REQUIRE(r.status == 0, r.out);
  }
  return f;
}

std::string merge(TempDir const& dir, std::string const& name, std::string const& shards) {
  std::string const out = dir.file(name);
  auto const r = run("merge " + out + " " + shards);
  BOOST_TEST_REQUIRE(r.status == 0, r.out);
  BOOST_TEST(contains(r.out, "wrote " + out + " (complete;"), r.out);
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(mpirun_shards_merged_equal_the_unsharded_run) {
  TempDir dir;
  auto const which = shell("command -v mpirun");
  BOOST_TEST_REQUIRE(which.status == 0, "mpirun not found: scripts/setup.sh installs openmpi-bin");
  // OpenMPI refuses to start as root unless told; CI containers run as root.
  std::string const root = ::geteuid() == 0 ? " --allow-run-as-root" : "";
  auto const r = shell("mpirun" + root + " -np 2 --oversubscribe " + kBinary + " " + kGrid +
                       " --out " + dir.file("mpi.h5"));
  BOOST_TEST_REQUIRE(r.status == 0, r.out);
  BOOST_TEST(contains(r.out, "shard 0/2 from openmpi"), r.out);
  BOOST_TEST(contains(r.out, "shard 1/2 from openmpi"), r.out);
  for (int i = 0; i < 2; ++i) {
    h5::ResultReader s(dir.file("mpi.shard-" + std::to_string(i) + "-of-2.h5"));
    BOOST_TEST(s.provenance().at("shard_source") == "openmpi");
    BOOST_TEST(s.provenance().at("local_rank") == std::to_string(i));
    BOOST_TEST(s.provenance().at("local_rank_source") == "OMPI_COMM_WORLD_LOCAL_RANK");
  }
  std::string const merged = merge(
      dir, "merged.h5", dir.file("mpi.shard-1-of-2.h5") + " " + dir.file("mpi.shard-0-of-2.h5"));
  expect_same_rows(unsharded(dir), merged);
  h5::ResultReader m(merged);
  auto const proc = m.read_table("synthetic_process"); // one row per shard, keys suffixed
  BOOST_TEST(proc.rows == 2u);
  BOOST_CHECK_NO_THROW(proc.find("process,shard=1"));
  // The tables of `moefin show` read the merged file like any other.
  auto const show = run("show " + merged);
  BOOST_TEST(show.status == 0, show.out);
  BOOST_TEST(contains(show.out, "merge_state             complete"), show.out);
}

BOOST_AUTO_TEST_CASE(launcher_environments_set_by_hand_and_the_flag_shard_the_same_grid) {
  TempDir dir;
  std::string const full = unsharded(dir);
  // MPICH/Hydra's variables, one process at a time.
  for (int i = 0; i < 2; ++i) {
    auto const r = shell("env PMI_RANK=" + std::to_string(i) +
                         " PMI_SIZE=2 MPI_LOCALRANKID=" + std::to_string(i) + " " + kBinary + " " +
                         kGrid + " --out " + dir.file("pmi.h5"));
    BOOST_TEST_REQUIRE(r.status == 0, r.out);
    BOOST_TEST(contains(r.out, "from mpich (PMI_RANK=" + std::to_string(i)), r.out);
  }
  expect_same_rows(full, merge(dir, "pmi_merged.h5", dir.file("pmi.shard-*-of-2.h5")));
  // A Slurm array of three tasks numbered 4, 6, 8.
  for (int id : {4, 6, 8}) {
    auto const r = shell("env SLURM_ARRAY_TASK_ID=" + std::to_string(id) +
                         " SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_MAX=8"
                         " SLURM_ARRAY_TASK_STEP=2 " +
                         kBinary + " " + kGrid + " --out " + dir.file("array.h5"));
    BOOST_TEST_REQUIRE(r.status == 0, r.out);
  }
  expect_same_rows(full, merge(dir, "array_merged.h5", dir.file("array.shard-*-of-3.h5")));
  // The flag, with a launcher environment it overrides.
  for (int i = 0; i < 4; ++i) {
    auto const r =
        shell("env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 " + kBinary + " " + kGrid +
              " --shard " + std::to_string(i) + "/4 --out " + dir.file("flag.h5"));
    BOOST_TEST_REQUIRE(r.status == 0, r.out);
    BOOST_TEST(contains(r.out, "overrides the openmpi environment"), r.out);
  }
  expect_same_rows(full, merge(dir, "flag_merged.h5", dir.file("flag.shard-*-of-4.h5")));
}

BOOST_AUTO_TEST_CASE(an_interrupted_shard_resumes_and_the_merge_waits_for_it) {
  TempDir dir;
  std::string const base = dir.file("res.h5");
  auto const a = run(kGrid + " --shard 0/2 --out " + base);
  BOOST_TEST_REQUIRE(a.status == 0, a.out);
  auto const b = run(kGrid + " --shard 1/2 --stop-after 3 --out " + base);
  BOOST_TEST_REQUIRE(b.status == 0, b.out);
  BOOST_TEST(contains(b.out, "continue with --resume " + base), b.out);
  std::string const shards =
      dir.file("res.shard-0-of-2.h5") + " " + dir.file("res.shard-1-of-2.h5");
  auto const refused = run("merge " + dir.file("m.h5") + " " + shards);
  BOOST_TEST(refused.status == 1, refused.out);
  BOOST_TEST(contains(refused.out, "missing (planned for shard 1:"), refused.out);
  BOOST_TEST(contains(refused.out, "merge: refused: 0 of 2 shards and"), refused.out);
  BOOST_TEST(!fs::exists(dir.file("m.h5")));
  auto const partial = run("merge " + dir.file("partial.h5") + " " + shards + " --allow-partial");
  BOOST_TEST(partial.status == 0, partial.out);
  BOOST_TEST(contains(partial.out, "(partial;"), partial.out);
  // The same shard resumed from the same base name finishes its part; nothing is measured twice.
  auto const c = run(kGrid + " --shard 1/2 --resume " + base);
  BOOST_TEST_REQUIRE(c.status == 0, c.out);
  BOOST_TEST(contains(c.out, "already in the file"), c.out);
  expect_same_rows(unsharded(dir), merge(dir, "m.h5", shards));
  // Resuming as another shard count is refused with the reason.
  auto const wrong = run(kGrid + " --shard 1/3 --resume " + base);
  BOOST_TEST(wrong.status == 1, wrong.out);
  BOOST_TEST(contains(wrong.out, "res.shard-1-of-3.h5"), wrong.out);
}

BOOST_AUTO_TEST_CASE(merge_refuses_a_missing_shard_a_duplicate_and_a_foreign_commit) {
  TempDir dir;
  std::string const base = dir.file("r.h5");
  for (int i = 0; i < 3; ++i) {
    auto const r = run(kGrid + " --shard " + std::to_string(i) + "/3 --out " + base);
    BOOST_TEST_REQUIRE(r.status == 0, r.out);
  }
  std::string const s0 = dir.file("r.shard-0-of-3.h5"), s1 = dir.file("r.shard-1-of-3.h5"),
                    s2 = dir.file("r.shard-2-of-3.h5");
  auto const one_line = [](std::string const& out, std::string const& says) {
    // The refusal is the last line, one line, and names the reason.
    auto const nl = out.find_last_of('\n', out.size() - 2);
    std::string const last = out.substr(nl == std::string::npos ? 0 : nl + 1);
    BOOST_TEST(contains(last, says), out);
  };
  auto const missing = run("merge " + dir.file("m.h5") + " " + s0 + " " + s2);
  BOOST_TEST(missing.status == 1, missing.out);
  BOOST_TEST(contains(missing.out, "2 of 3 shards; missing: 1"), missing.out);
  one_line(missing.out, "merge: refused: 1 of 3 shards and");
  fs::copy_file(s1, dir.file("dup.h5"));
  auto const dup =
      run("merge " + dir.file("m.h5") + " " + s0 + " " + s1 + " " + s2 + " " + dir.file("dup.h5"));
  BOOST_TEST(dup.status == 1, dup.out);
  one_line(dup.out, "shard 1/3 again");
  fs::copy_file(s2, dir.file("foreign.h5"));
  h5::ResultWriter::resume(dir.file("foreign.h5")).set_attr("/", "git_commit", "feedc0ffee12");
  auto const foreign =
      run("merge " + dir.file("m.h5") + " " + s0 + " " + s1 + " " + dir.file("foreign.h5"));
  BOOST_TEST(foreign.status == 1, foreign.out);
  one_line(foreign.out, "foreign.h5: commit feedc0ffee12 differs from");
  BOOST_TEST(!fs::exists(dir.file("m.h5")));
  auto const usage = run("merge " + dir.file("m.h5"));
  BOOST_TEST(usage.status == 2, usage.out);
  BOOST_TEST(contains(usage.out, "needs OUT.h5 and at least one shard file"), usage.out);
  // '' as OUT (or a shard) is refused before anything is written ('' + ".merging" would land in
  // the current folder).
  auto const empty = run("merge '' " + s0 + " " + s1 + " --allow-partial");
  BOOST_TEST(empty.status == 2, empty.out);
  BOOST_TEST(contains(empty.out, "merge: an empty file name"), empty.out);
  BOOST_TEST(!fs::exists(".merging"));
}

BOOST_AUTO_TEST_CASE(bad_shard_flags_and_launcher_variables_are_usage_errors) {
  TempDir dir;
  auto const flag = run(kGrid + " --shard 3/2 --out " + dir.file("x.h5"));
  BOOST_TEST(flag.status == 2, flag.out);
  BOOST_TEST(contains(flag.out, "--shard: '3/2' has I >= N"), flag.out);
  BOOST_TEST(moefin::test::lines(flag.out) == 1, flag.out);
  auto const env =
      shell("env OMPI_COMM_WORLD_RANK=one " + kBinary + " " + kGrid + " --out " + dir.file("y.h5"));
  BOOST_TEST(env.status == 2, env.out);
  BOOST_TEST(contains(env.out, "OMPI_COMM_WORLD_RANK='one'"), env.out);
  BOOST_TEST(!fs::exists(dir.file("x.h5")));
  // The GPU sweeps take the same flag; their estimate says what this shard would run.
  auto const est = run("sweep finalize --estimate --hidden 1024,7168 --tokens 1,2 --top-k 8 "
                       "--shard 1/4");
  BOOST_TEST(est.status == 0, est.out);
  BOOST_TEST(contains(est.out, "shard 1/4 from --shard (--shard 1/4):"), est.out);
  BOOST_TEST(contains(est.out, "of 8 configurations"), est.out);
}
