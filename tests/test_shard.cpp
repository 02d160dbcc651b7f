#define BOOST_TEST_MODULE shard
#include <boost/test/unit_test.hpp>

#include "core/ops/errors.hpp"
#include "core/store/merge.hpp"
#include "core/store/h5store.hpp"
#include "core/rng.hpp"
#include "core/shard.hpp"
#include "experiments/harness/shard_run.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <set>

using namespace moefin;
namespace fs = std::filesystem;

namespace {

using Env = std::map<std::string, std::string>;

shard::EnvLookup lookup(Env env) {
  return [env = std::move(env)](std::string const& n) -> std::optional<std::string> {
    auto it = env.find(n);
    if (it == env.end())
      return std::nullopt;
    return it->second;
  };
}

/// Asserts that `fn` throws E whose message contains every one of `says`.
template <class E, class Fn> void expect_error(Fn fn, std::vector<std::string> const& says) {
  try {
    fn();
    BOOST_FAIL("no error; expected one saying " + says.front());
  } catch (E const& e) {
    std::string const what = e.what();
    for (auto const& s : says)
      BOOST_TEST(what.find(s) != std::string::npos, "'" << what << "' lacks '" << s << "'");
    BOOST_TEST(what.find('\n') == std::string::npos, "not one line: " << what);
  }
}

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("moefin_shard_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(std::string const& name) const { return (path / name).string(); }
};

} // namespace

// ---------------------------------------------------------------------------------------------
// The launcher environments

BOOST_AUTO_TEST_CASE(each_launcher_gives_rank_size_and_local_rank) {
  struct Case {
    Env env;
    std::string launcher;
    int rank, size, local;
    std::string local_source;
  };
  std::vector<Case> const cases{
      {{{"OMPI_COMM_WORLD_RANK", "3"},
        {"OMPI_COMM_WORLD_SIZE", "4"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}},
       "openmpi",
       3,
       4,
       1,
       "OMPI_COMM_WORLD_LOCAL_RANK"},
      {{{"PMI_RANK", "5"}, {"PMI_SIZE", "8"}, {"MPI_LOCALRANKID", "2"}},
       "mpich",
       5,
       8,
       2,
       "MPI_LOCALRANKID"},
      {{{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"PMI_LOCAL_RANK", "1"}},
       "mpich",
       1,
       2,
       1,
       "PMI_LOCAL_RANK"},
      {{{"SLURM_PROCID", "6"}, {"SLURM_STEP_NUM_TASKS", "16"}, {"SLURM_LOCALID", "2"}},
       "srun",
       6,
       16,
       2,
       "SLURM_LOCALID"},
      // The step's own task count, not the job's.
      {{{"SLURM_PROCID", "1"},
        {"SLURM_NTASKS", "16"},
        {"SLURM_STEP_NUM_TASKS", "2"},
        {"SLURM_LOCALID", "1"}},
       "srun",
       1,
       2,
       1,
       "SLURM_LOCALID"},
      // MPICH's PMI started by srun --mpi=pmi2: the rank from PMI, the local rank from Slurm.
      {{{"PMI_RANK", "3"},
        {"PMI_SIZE", "4"},
        {"SLURM_PROCID", "3"},
        {"SLURM_STEP_NUM_TASKS", "4"},
        {"SLURM_LOCALID", "1"}},
       "mpich",
       3,
       4,
       1,
       "SLURM_LOCALID"},
      // mpirun inside a Slurm allocation: the innermost launcher (OpenMPI) decides.
      {{{"SLURM_PROCID", "0"},
        {"SLURM_NTASKS", "1"},
        {"SLURM_LOCALID", "0"},
        {"OMPI_COMM_WORLD_RANK", "1"},
        {"OMPI_COMM_WORLD_SIZE", "2"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}},
       "openmpi",
       1,
       2,
       1,
       "OMPI_COMM_WORLD_LOCAL_RANK"},
      {{{"SLURM_ARRAY_TASK_ID", "7"},
        {"SLURM_ARRAY_TASK_COUNT", "3"},
        {"SLURM_ARRAY_TASK_MIN", "3"},
        {"SLURM_ARRAY_TASK_MAX", "7"},
        {"SLURM_ARRAY_TASK_STEP", "2"}},
       "slurm-array",
       2,
       3,
       0,
       "none"},
      // An array of srun steps: the array index counts whole steps.
      {{{"SLURM_ARRAY_TASK_ID", "1"},
        {"SLURM_ARRAY_TASK_COUNT", "3"},
        {"SLURM_ARRAY_TASK_MIN", "0"},
        {"SLURM_PROCID", "1"},
        {"SLURM_STEP_NUM_TASKS", "2"},
        {"SLURM_LOCALID", "1"}},
       "slurm-array+srun",
       3,
       6,
       1,
       "SLURM_LOCALID"},
  };
  for (auto const& c : cases) {
    auto const r = shard::detect_launcher(lookup(c.env));
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST(r->launcher == c.launcher);
    BOOST_TEST(r->rank == c.rank);
    BOOST_TEST(r->size == c.size);
    BOOST_TEST(r->local_rank == c.local);
    BOOST_TEST(r->local_source == c.local_source);
  }
  BOOST_TEST(!shard::detect_launcher(lookup({{"PATH", "/bin"}})).has_value());
  // An sbatch script (no srun) has the job's task count but is a single process.
  BOOST_TEST(!shard::detect_launcher(
                  lookup({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}}))
                  .has_value());
  auto const batch_array = shard::detect_launcher(lookup({{"SLURM_ARRAY_TASK_ID", "1"},
                                                          {"SLURM_ARRAY_TASK_COUNT", "2"},
                                                          {"SLURM_ARRAY_TASK_MIN", "0"},
                                                          {"SLURM_PROCID", "0"},
                                                          {"SLURM_NTASKS", "4"}}));
  BOOST_TEST_REQUIRE(batch_array.has_value());
  BOOST_TEST(batch_array->launcher == "slurm-array");
  BOOST_TEST(batch_array->rank == 1);
}

BOOST_AUTO_TEST_CASE(malformed_launcher_variables_are_one_line_errors_naming_them) {
  expect_error<InputError>(
      [] {
        shard::detect_launcher(lookup({{"OMPI_COMM_WORLD_RANK", "x1"}}));
      },
      {"OMPI_COMM_WORLD_RANK", "x1", "not an integer"});
  expect_error<InputError>(
      [] {
        shard::detect_launcher(lookup({{"PMI_RANK", "0"}}));
      },
      {"PMI_RANK", "PMI_SIZE"});
  expect_error<InputError>(
      [] {
        shard::detect_launcher(lookup({{"SLURM_PROCID", "4"}, {"SLURM_STEP_NUM_TASKS", "4"}}));
      },
      {"SLURM_PROCID=4", "not a rank below its size"});
  expect_error<InputError>(
      [] {
        shard::detect_launcher(
            lookup({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "-2"}}));
      },
      {"OMPI_COMM_WORLD_SIZE", "-2"});
  // --array=1-7:2,20 is not one stepped range: task ids cannot be numbered without the others.
  expect_error<InputError>(
      [] {
        shard::detect_launcher(lookup({{"SLURM_ARRAY_TASK_ID", "20"},
                                       {"SLURM_ARRAY_TASK_COUNT", "5"},
                                       {"SLURM_ARRAY_TASK_MIN", "1"},
                                       {"SLURM_ARRAY_TASK_MAX", "20"},
                                       {"SLURM_ARRAY_TASK_STEP", "2"}}));
      },
      {"Slurm array", "--shard I/N"});
  expect_error<InputError>(
      [] {
        shard::detect_launcher(lookup({{"SLURM_ARRAY_TASK_ID", "2"}}));
      },
      {"SLURM_ARRAY_TASK_COUNT"});
}

BOOST_AUTO_TEST_CASE(the_flag_wins_over_the_environment_but_the_gpu_follows_the_local_rank) {
  Env const mpi{{"OMPI_COMM_WORLD_RANK", "1"},
                {"OMPI_COMM_WORLD_SIZE", "2"},
                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}};
  auto const flag = shard::resolve("2/3", lookup(mpi));
  BOOST_TEST(flag.active);
  BOOST_TEST(flag.index == 2);
  BOOST_TEST(flag.count == 3);
  BOOST_TEST(flag.source == "--shard");
  BOOST_TEST(flag.local_rank == 1);
  BOOST_TEST(flag.detail.find("overrides the openmpi environment") != std::string::npos);

  auto const env = shard::resolve("", lookup(mpi));
  BOOST_TEST(env.active);
  BOOST_TEST(env.index == 1);
  BOOST_TEST(env.count == 2);
  BOOST_TEST(env.source == "openmpi");

  // One process: the run is the whole list, unless the script asks for the launcher's part.
  Env const one{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}};
  BOOST_TEST(!shard::resolve("", lookup(one)).active);
  auto const forced = shard::resolve("env", lookup(one));
  BOOST_TEST(forced.active);
  BOOST_TEST(forced.count == 1);
  BOOST_TEST(!shard::resolve("", lookup({})).active);
  expect_error<InputError>([] { shard::resolve("env", lookup({})); },
                           {"--shard env", "no launcher environment"});
}

BOOST_AUTO_TEST_CASE(shard_flag_errors_name_the_flag_and_the_form) {
  for (std::string bad :
       {"3", "1/", "/4", "a/4", "4/4", "5/4", "0/0", "-1/4", "1/4/2", " 1/4", "0/100001"})
    expect_error<InputError>([&] { shard::parse_flag(bad); }, {"--shard", "I/N"});
  auto const s = shard::parse_flag("3/16");
  BOOST_TEST(s.index == 3);
  BOOST_TEST(s.count == 16);
}

BOOST_AUTO_TEST_CASE(shard_file_names_derive_from_out_and_sort) {
  auto name = [](std::string const& out, int i, int n) {
    shard::Spec s;
    s.active = true;
    s.index = i;
    s.count = n;
    return shard::shard_path(out, s);
  };
  BOOST_TEST(name("out/sweep.h5", 1, 4) == "out/sweep.shard-1-of-4.h5");
  BOOST_TEST(name("out/sweep.h5", 2, 16) == "out/sweep.shard-02-of-16.h5");
  BOOST_TEST(name("out/sweep.h5", 12, 16) == "out/sweep.shard-12-of-16.h5");
  BOOST_TEST(name("a.b/sweep", 0, 2) == "a.b/sweep.shard-0-of-2");
  BOOST_TEST(name("sweep.x.h5", 0, 1) == "sweep.x.shard-0-of-1.h5");
  BOOST_TEST(name("dir/.hidden", 1, 3) == "dir/.hidden.shard-1-of-3");
  BOOST_TEST(shard::shard_path("out/sweep.h5", shard::Spec{}) == "out/sweep.h5");
  BOOST_TEST(name("s.h5", 9, 10) < name("s.h5", 10, 11)); // padded width follows N
}

// ---------------------------------------------------------------------------------------------
// The partition

BOOST_AUTO_TEST_CASE(partition_is_a_deterministic_balanced_partition) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    Rng rng(seed);
    std::size_t const m = rng.below(400);
    int const n = 1 + static_cast<int>(rng.below(12));
    std::vector<std::int64_t> cost(m);
    for (auto& c : cost) // heavy-tailed, with zeros and ties, like real cost models
      c = rng.below(4) == 0 ? 0 : static_cast<std::int64_t>(1 + rng.below(1000) * rng.below(50));
    auto const owner = shard::partition_by_cost(cost, n);
    BOOST_TEST_REQUIRE(owner.size() == m);
    // A partition: every configuration in exactly one shard, shards in [0, n).
    std::vector<std::int64_t> load(static_cast<std::size_t>(n), 0);
    std::int64_t biggest = 1, total = 0;
    for (std::size_t i = 0; i < m; ++i) {
      BOOST_TEST_REQUIRE((owner[i] >= 0 && owner[i] < n));
      std::int64_t const c = std::max<std::int64_t>(cost[i], 1);
      load[static_cast<std::size_t>(owner[i])] += c;
      biggest = std::max(biggest, c);
      total += c;
    }
    BOOST_TEST(std::accumulate(load.begin(), load.end(), std::int64_t{0}) == total);
    // Deterministic: the same list gives the same partition, every time and in every process.
    std::vector<std::int64_t> const copy(cost.begin(), cost.end());
    BOOST_TEST((shard::partition_by_cost(copy, n) == owner));
    // Balanced: each configuration went to the least loaded shard, so max - min <= the largest
    // cost and max <= total / n + the largest cost.
    auto const [lo, hi] = std::minmax_element(load.begin(), load.end());
    BOOST_TEST(*hi - *lo <= biggest, "seed " << seed << ": " << *hi << " - " << *lo);
    BOOST_TEST(static_cast<double>(*hi) <= static_cast<double>(total) / n + biggest);
  }
  // Against the optimum of small lists (brute force): LPT's largest load is within 4/3 of it.
  for (std::uint64_t seed = 100; seed < 160; ++seed) {
    Rng rng(seed);
    std::size_t const m = 1 + rng.below(9);
    int const n = 2 + static_cast<int>(rng.below(2));
    std::vector<std::int64_t> cost(m);
    for (auto& c : cost)
      c = static_cast<std::int64_t>(1 + rng.below(100));
    auto const owner = shard::partition_by_cost(cost, n);
    auto largest = [&](std::vector<int> const& o) {
      std::vector<std::int64_t> l(static_cast<std::size_t>(n), 0);
      for (std::size_t i = 0; i < m; ++i)
        l[static_cast<std::size_t>(o[i])] += cost[i];
      return *std::max_element(l.begin(), l.end());
    };
    std::int64_t best = std::numeric_limits<std::int64_t>::max();
    std::vector<int> o(m, 0);
    for (std::size_t code = 0, all = static_cast<std::size_t>(std::pow(n, m)); code < all; ++code) {
      for (std::size_t i = 0, c = code; i < m; ++i, c /= static_cast<std::size_t>(n))
        o[i] = static_cast<int>(c % static_cast<std::size_t>(n));
      best = std::min(best, largest(o));
    }
    BOOST_TEST(3 * largest(owner) <= 4 * best, "seed " << seed);
  }
  // More shards than configurations: some are empty, none gets two.
  auto const owner = shard::partition_by_cost({5, 5, 5}, 5);
  BOOST_TEST(std::set<int>(owner.begin(), owner.end()).size() == 3);
  BOOST_CHECK_THROW(shard::partition_by_cost({1}, 0), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(fingerprint_changes_with_command_settings_keys_and_order) {
  std::vector<std::string> const keys{"a", "b", "c"};
  auto const f = shard::grid_fingerprint("sweep x", "r=5", keys);
  BOOST_TEST(f.size() == 16u);
  BOOST_TEST(f == shard::grid_fingerprint("sweep x", "r=5", keys));
  BOOST_TEST(f != shard::grid_fingerprint("sweep y", "r=5", keys));
  BOOST_TEST(f != shard::grid_fingerprint("sweep x", "r=6", keys));
  BOOST_TEST(f != shard::grid_fingerprint("sweep x", "r=5", {"a", "c", "b"}));
  BOOST_TEST(f != shard::grid_fingerprint("sweep x", "r=5", {"a", "b"}));
  BOOST_TEST(f != shard::grid_fingerprint("sweep x", "r=5", {"ab", "c"}));
}

// ---------------------------------------------------------------------------------------------
// Shard files and the merge (the store side; tests/test_shard_cli.cpp runs the commands)

namespace {

std::vector<harness::PlannedConfig> grid(int n) {
  std::vector<harness::PlannedConfig> g;
  for (int i = 0; i < n; ++i)
    g.push_back({"cfg=" + std::to_string(i), 0.001 * (1 + i % 5)});
  return g;
}

Env mpi_env(int rank, int size) {
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank)}};
}

/// Writes one shard of `grid(n)`: a table of rows per configuration (two rows each), a
/// per-shard table, and an array group; `finish` of its configurations recorded as done.
std::string write_shard(TempDir const& dir, int rank, int size, int n, std::string const& flag = "",
                        std::size_t finish = SIZE_MAX, std::string const& settings = "s=1") {
  harness::ShardedRun run("test sweep", flag, grid(n), settings, lookup(mpi_env(rank, size)));
  auto file = run.open(dir.file("t.h5"), "", 7);
  auto t = file.table("rows", {h5::int_col("cfg"), h5::int_col("half"), h5::real_col("v")});
  auto p = file.table("floor", {h5::real_col("us")});
  run.per_shard_table(file, "floor");
  h5::Row fr;
  fr.set("us", 0.5 + rank);
  p.append("what=floor", fr, {0.5, 0.6});
  std::size_t done = 0;
  for (std::size_t i : run.mine()) {
    if (done++ >= finish)
      break;
    for (int half = 0; half < 2; ++half) {
      h5::Row r;
      r.set("cfg", static_cast<std::int64_t>(i)).set("half", half).set("v", 1.5 * i + half);
      t.append("cfg=" + std::to_string(i) + ",half=" + std::to_string(half), r,
               {double(i), double(half)});
    }
    run.finished(i, 2, 0.01);
  }
  file.write_array("timeline_0", "kernel", std::vector<std::int32_t>{rank, rank},
                   std::vector<std::size_t>{2});
  return file.path();
}

} // namespace

BOOST_AUTO_TEST_CASE(shard_files_record_the_shard_the_grid_and_the_plan) {
  TempDir dir;
  std::string const path = write_shard(dir, 1, 3, 10);
  BOOST_TEST(path == dir.file("t.shard-1-of-3.h5"));
  h5::ResultReader r(path);
  auto const& p = r.provenance();
  BOOST_TEST(p.at("shard_index") == "1");
  BOOST_TEST(p.at("shard_count") == "3");
  BOOST_TEST(p.at("shard_source") == "openmpi");
  BOOST_TEST(p.at("grid_command") == "test sweep");
  BOOST_TEST(p.at("grid_configurations") == "10");
  BOOST_TEST(p.at("local_rank") == "1");
  BOOST_TEST(p.at("grid_fingerprint").size() == 16u);
  auto const plan = r.read_table("shard_plan");
  BOOST_TEST(plan.rows == 10u);
  auto const done = r.read_table("shard_done");
  BOOST_TEST(done.rows == std::stoul(p.at("shard_configurations")));
  for (std::size_t i = 0; i < done.rows; ++i)
    BOOST_TEST(plan.ints.at("shard")[plan.find(done.keys()[i])] == 1);
  BOOST_TEST(r.group_attrs("floor").at("shard_scope") == "per-shard");
}

BOOST_AUTO_TEST_CASE(resume_refuses_another_shard_or_grid_and_continues_its_own) {
  TempDir dir;
  std::string const path = write_shard(dir, 0, 2, 8, "", 1);
  auto resume = [&](std::string const& flag, int n, std::string const& settings) {
    harness::ShardedRun run("test sweep", flag, grid(n), settings, lookup(mpi_env(0, 2)));
    return run.open("", dir.file("t.h5"), 7);
  };
  // No shard of 3 ever ran under this name: a wrong count, not a shard that never started.
  expect_error<FileError>([&] { resume("0/3", 8, "s=1"); }, {"t.shard-0-of-3.h5", "cannot open"});
  expect_error<FileError>([&] { resume("", 9, "s=1"); },
                          {path, "written as shard 0/2 of grid", "same grid"});
  expect_error<FileError>([&] { resume("", 8, "s=2"); }, {path, "same grid, settings"});
  harness::ShardedRun plain("test sweep", "", grid(8), "s=1", lookup({}));
  expect_error<FileError>([&] { plain.open("", path, 7); }, {path, "is shard 0/2"});
  harness::ShardedRun run("test sweep", "", grid(8), "s=1", lookup(mpi_env(0, 2)));
  auto file = run.open("", dir.file("t.h5"), 7);
  BOOST_TEST(run.recorded(run.mine()[0]));
  BOOST_TEST(!run.recorded(run.mine()[1]));
  // Shard 1 never started: resuming the run starts its file, beside shard 0's.
  harness::ShardedRun late("test sweep", "", grid(8), "s=1", lookup(mpi_env(1, 2)));
  BOOST_TEST(late.open("", dir.file("t.h5"), 7).path() == dir.file("t.shard-1-of-2.h5"));
  BOOST_TEST(h5::ResultReader(dir.file("t.shard-1-of-2.h5")).provenance().at("shard_index") == "1");
}

BOOST_AUTO_TEST_CASE(merge_joins_every_row_and_keeps_each_shards_provenance) {
  TempDir dir;
  std::vector<std::string> shards;
  for (int r = 0; r < 3; ++r)
    shards.push_back(write_shard(dir, r, 3, 11));
  std::string const out = dir.file("merged.h5");
  auto const res = h5::merge_shards(out, {shards[2], shards[0], shards[1]}, false);
  BOOST_TEST(res.written);
  BOOST_TEST(res.complete());
  BOOST_TEST(res.configurations == 11u);
  h5::ResultReader m(out);
  auto const rows = m.read_table("rows");
  BOOST_TEST(rows.rows == 22u);
  std::set<std::string> keys(rows.keys().begin(), rows.keys().end());
  for (int i = 0; i < 11; ++i)
    for (int half = 0; half < 2; ++half) {
      std::string const k = "cfg=" + std::to_string(i) + ",half=" + std::to_string(half);
      BOOST_TEST_REQUIRE(keys.count(k) == 1u, k);
      std::size_t const row = rows.find(k);
      BOOST_TEST(rows.reals.at("v")[row] == 1.5 * i + half);
      BOOST_TEST((rows.row_samples(row) == std::vector<double>{double(i), double(half)}));
    }
  // Per-shard tables keep each shard's row under a suffixed key.
  auto const floor = m.read_table("floor");
  BOOST_TEST(floor.rows == 3u);
  BOOST_TEST(floor.reals.at("us")[floor.find("what=floor,shard=2")] == 2.5);
  // Array groups of every shard; a name taken twice gets the shard as suffix.
  BOOST_TEST(m.has_group("timeline_0"));
  BOOST_TEST(m.has_group("timeline_0_shard1"));
  BOOST_TEST(m.read_ints("timeline_0_shard2", "kernel").at(0) == 2);
  auto const& p = m.provenance();
  BOOST_TEST(p.at("merge_state") == "complete");
  BOOST_TEST(p.at("merged_shards") == "0,1,2");
  BOOST_TEST(!p.count("shard_index"));
  BOOST_TEST(p.at("shard_count") == "3");
  BOOST_TEST(p.at("seed") == "7");
  BOOST_TEST(m.group_attrs("merge_shard_1").at("local_rank") == "1");
  auto const per = m.read_table("merge_shards");
  BOOST_TEST(per.rows == 3u);
  auto const& done = per.ints.at("done");
  BOOST_TEST(std::accumulate(done.begin(), done.end(), std::int64_t{0}) == 11);
  BOOST_TEST(m.read_table("shard_done").rows == 11u);
  BOOST_TEST(m.read_table("shard_plan").rows == 11u);
  BOOST_TEST(!fs::exists(out + ".merging"));
}

BOOST_AUTO_TEST_CASE(merge_reports_missing_shards_and_configurations_and_writes_only_if_allowed) {
  TempDir dir;
  std::string const s0 = write_shard(dir, 0, 3, 9);
  std::string const s1 = write_shard(dir, 1, 3, 9, "", 1); // stopped after one configuration
  std::string const out = dir.file("merged.h5");
  auto const res = h5::merge_shards(out, {s0, s1}, false);
  BOOST_TEST(!res.written);
  BOOST_TEST(!fs::exists(out));
  BOOST_TEST((res.missing_shards == std::vector<int>{2}));
  harness::ShardedRun run("test sweep", "", grid(9), "s=1", lookup(mpi_env(0, 3)));
  std::size_t expected = 0;
  for (std::size_t i = 0; i < 9; ++i)
    expected += !run.mine(i); // shard 1 finished one of its own, shard 2 none
  BOOST_TEST(res.missing_configurations.size() == expected - 1);
  for (int s : res.missing_planned_for)
    BOOST_TEST((s == 1 || s == 2));
  auto const partial = h5::merge_shards(out, {s0, s1}, true);
  BOOST_TEST(partial.written);
  h5::ResultReader m(out);
  BOOST_TEST(m.provenance().at("merge_state") == "partial");
  BOOST_TEST(m.provenance().at("missing_shards") == "2");
  BOOST_TEST(m.provenance().at("missing_configurations") == std::to_string(expected - 1));
}

BOOST_AUTO_TEST_CASE(merge_refuses_foreign_duplicate_and_overlapping_shards_in_one_line) {
  TempDir dir;
  std::string const s0 = write_shard(dir, 0, 2, 6);
  std::string const s1 = write_shard(dir, 1, 2, 6);
  std::string const out = dir.file("merged.h5");
  // The same shard twice (a copy under another name).
  fs::copy_file(s1, dir.file("copy.h5"));
  expect_error<FileError>(
      [&] {
        h5::merge_shards(out, {s0, s1, dir.file("copy.h5")}, false);
      },
      {"shard 1/2 again"});
  // Another build.
  fs::copy_file(s1, dir.file("foreign.h5"));
  h5::ResultWriter::resume(dir.file("foreign.h5")).set_attr("/", "git_commit", "0123abcd");
  expect_error<FileError>(
      [&] {
        h5::merge_shards(out, {s0, dir.file("foreign.h5")}, false);
      },
      {"foreign.h5", "commit 0123abcd differs", "one build"});
  // Another GPU model, another seed.
  fs::copy_file(s1, dir.file("gpu.h5"));
  h5::ResultWriter::resume(dir.file("gpu.h5")).set_attr("/", "gpu_name", "Other GPU");
  expect_error<FileError>(
      [&] {
        h5::merge_shards(out, {s0, dir.file("gpu.h5")}, false);
      },
      {"GPU model Other GPU differs"});
  // Another grid (settings differ, so the fingerprint does).
  TempDir other;
  std::string const g1 = write_shard(other, 1, 2, 6, "", SIZE_MAX, "s=2");
  expect_error<FileError>(
      [&] {
        h5::merge_shards(out, {s0, g1}, false);
      },
      {g1, "grid", "differs", "another command, grid or settings"});
  // A row key in two shards.
  fs::copy_file(s1, dir.file("overlap.h5"));
  {
    auto w = h5::ResultWriter::resume(dir.file("overlap.h5"));
    auto t = w.table("rows", {h5::int_col("cfg"), h5::int_col("half"), h5::real_col("v")});
    h5::Row r;
    r.set("cfg", 0).set("half", 0).set("v", 0.0);
    h5::ResultReader const r0(s0);
    std::string const k0 = r0.read_table("rows").keys().at(0);
    t.append(k0, r);
  }
  expect_error<FileError>(
      [&] {
        h5::merge_shards(out, {s0, dir.file("overlap.h5")}, false);
      },
      {"is also in", "overlap"});
  // A plain result file.
  { auto w = h5::ResultWriter::create(dir.file("plain.h5"), h5::collect_provenance(7)); }
  expect_error<FileError>([&] { h5::merge_shards(out, {dir.file("plain.h5")}, false); },
                          {"plain.h5", "not a shard"});
  // An existing output is never replaced.
  fs::copy_file(s0, out);
  expect_error<FileError>([&] { h5::merge_shards(out, {s0, s1}, false); }, {"already exists"});
}

BOOST_AUTO_TEST_CASE(a_shard_without_configurations_merges_too) {
  TempDir dir;
  std::vector<std::string> shards;
  for (int r = 0; r < 4; ++r) // 3 configurations over 4 shards: one shard has none
    shards.push_back(write_shard(dir, r, 4, 3));
  std::size_t empty = 0;
  for (auto const& s : shards)
    empty += h5::ResultReader(s).read_table("rows").rows == 0;
  BOOST_TEST(empty == 1u);
  auto const res = h5::merge_shards(dir.file("m.h5"), shards, false);
  BOOST_TEST(res.complete());
  BOOST_TEST(h5::ResultReader(dir.file("m.h5")).read_table("rows").rows == 6u);
}
