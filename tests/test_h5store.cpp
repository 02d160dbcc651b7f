#define BOOST_TEST_MODULE h5store
#include <boost/test/unit_test.hpp>

#include "core/store/h5store.hpp"
#include "core/ops/errors.hpp"

#include <hdf5.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>

using namespace moefin;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("moefin_h5_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(char const* name) const { return (path / name).string(); }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

std::vector<h5::Column> sweep_columns() {
  return {h5::int_col("H"), h5::int_col("T"), h5::str_col("variant", 24),
          h5::real_col("median_us")};
}

h5::Row sweep_row(int h, int t, std::string const& v, double us) {
  h5::Row r;
  r.set("H", h).set("T", t).set("variant", v).set("median_us", us);
  return r;
}

std::string key_of(int h, int t) {
  return "H=" + std::to_string(h) + ",T=" + std::to_string(t);
}

/// Asserts that `fn` throws a FileError whose message names `path` and contains `what`.
template <class Fn>
void expect_file_error(Fn fn, std::string const& path, std::string const& what) {
  try {
    fn();
    BOOST_FAIL("no FileError for " + path);
  } catch (FileError const& e) {
    std::string const msg = e.what();
    BOOST_TEST(msg.find(path) != std::string::npos, msg);
    BOOST_TEST(msg.find(what) != std::string::npos, msg);
    BOOST_TEST(msg.find('\n') == std::string::npos, "one line: " << msg);
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(rows_samples_and_provenance_round_trip) {
  TempDir dir;
  std::string const path = dir.file("a.h5");
  {
    auto w = h5::ResultWriter::create(path, h5::collect_provenance(99));
    auto t = w.table("finalize_sweep", sweep_columns(), "test table");
    t.append(key_of(1024, 1), sweep_row(1024, 1, "small_batch", 1.25), {1.3, 1.25, 1.2});
    t.append(key_of(2048, 4), sweep_row(2048, 4, "scalar", 3.5), {3.5});
    BOOST_TEST(t.rows() == 2u);
    w.write_array("route", "perm", std::vector<std::int32_t>{0, -1, 2, 3, 4, 5}, {2, 3});
    w.set_attr("route", "top_k", "3");
  }
  h5::ResultReader r(path);
  auto const& p = r.provenance();
  for (char const* k : {"moefin_schema", "moefin_version", "git_commit", "command_line", "seed",
                        "date_utc", "host", "gpu_name", "compute_capability", "sm_count",
                        "l2_bytes", "driver_version", "cuda_runtime_version"})
    BOOST_TEST(p.count(k) == 1u, "provenance attribute " << k);
  BOOST_TEST(p.at("seed") == "99");
  BOOST_TEST(p.at("moefin_schema") == h5::kSchema);

  auto const t = r.read_table("finalize_sweep");
  BOOST_TEST(t.rows == 2u);
  BOOST_TEST(t.ints.at("H")[1] == 2048);
  BOOST_TEST(t.strings.at("variant")[0] == "small_batch");
  BOOST_TEST(t.reals.at("median_us")[1] == 3.5);
  BOOST_TEST(t.row_samples(0) == (std::vector<double>{1.3, 1.25, 1.2}),
             boost::test_tools::per_element());
  BOOST_TEST(t.row_samples(1) == std::vector<double>{3.5}, boost::test_tools::per_element());
  BOOST_TEST(t.find(key_of(2048, 4)) == 1u);
  BOOST_TEST(r.group_attrs("finalize_sweep").at("description") == "test table");

  std::vector<std::size_t> dims;
  auto const perm = r.read_ints("route", "perm", &dims);
  BOOST_TEST(dims == (std::vector<std::size_t>{2, 3}), boost::test_tools::per_element());
  BOOST_TEST(perm[1] == -1);
  BOOST_TEST(r.group_attrs("route").at("top_k") == "3");
}

BOOST_AUTO_TEST_CASE(bad_rows_are_rejected_before_anything_is_written) {
  TempDir dir;
  auto w = h5::ResultWriter::create(dir.file("b.h5"), h5::collect_provenance(1));
  auto t = w.table("x", sweep_columns());
  t.append("k1", sweep_row(1, 1, "v", 1.0));
  BOOST_CHECK_THROW(t.append("k1", sweep_row(1, 1, "v", 1.0)), std::invalid_argument);
  h5::Row missing;
  missing.set("H", 1);
  BOOST_CHECK_THROW(t.append("k2", missing), std::invalid_argument);
  BOOST_CHECK_THROW(t.append("k3", sweep_row(1, 1, std::string(40, 'x'), 1.0)),
                    std::invalid_argument);
  h5::Row extra = sweep_row(1, 1, "v", 1.0);
  extra.set("nonexistent", 3);
  BOOST_CHECK_THROW(t.append("k4", extra), std::invalid_argument);
  BOOST_TEST(t.rows() == 1u);
  BOOST_CHECK_THROW(w.table("y", {h5::int_col("key")}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(existing_file_is_not_overwritten) {
  TempDir dir;
  std::string const path = dir.file("c.h5");
  h5::ResultWriter::create(path, h5::collect_provenance(1));
  expect_file_error([&] { h5::ResultWriter::create(path, h5::collect_provenance(1)); }, path,
                    "already exists");
}

BOOST_AUTO_TEST_CASE(foreign_missing_and_truncated_files_give_one_line_errors) {
  TempDir dir;
  std::string const missing = dir.file("missing.h5");
  expect_file_error([&] { h5::ResultReader r(missing); }, missing, "cannot open");

  std::string const text = dir.file("text.h5");
  std::ofstream(text) << "this is not HDF5\n";
  expect_file_error([&] { h5::ResultReader r(text); }, text, "not an HDF5 file");

  std::string const foreign = dir.file("foreign.h5");
  H5Fclose(H5Fcreate(foreign.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  expect_file_error([&] { h5::ResultReader r(foreign); }, foreign, "not a moefin result file");
  expect_file_error([&] { h5::ResultWriter::resume(foreign); }, foreign,
                    "not a moefin result file");

  std::string const good = dir.file("good.h5");
  {
    auto w = h5::ResultWriter::create(good, h5::collect_provenance(1));
    auto t = w.table("x", sweep_columns());
    for (int i = 0; i < 50; ++i)
      t.append(key_of(i, i), sweep_row(i, i, "v", i), std::vector<double>(100, 1.0 * i));
  }
  std::string const cut = dir.file("cut.h5");
  fs::copy_file(good, cut);
  fs::resize_file(cut, fs::file_size(good) / 2);
  expect_file_error(
      [&] {
        h5::ResultReader r(cut);
        r.read_table("x");
      },
      cut, "");

  h5::ResultReader r(good);
  expect_file_error([&] { r.read_table("nope"); }, good, "no table for experiment 'nope'");
}

BOOST_AUTO_TEST_CASE(resume_rejects_a_table_with_other_columns) {
  TempDir dir;
  std::string const path = dir.file("d.h5");
  {
    auto w = h5::ResultWriter::create(path, h5::collect_provenance(5));
    w.table("x", sweep_columns()).append("k", sweep_row(1, 1, "v", 1));
  }
  auto w = h5::ResultWriter::resume(path);
  BOOST_TEST(w.seed() == 5u);
  expect_file_error([&] { w.table("x", {h5::int_col("H")}); }, path, "other columns");
}

BOOST_AUTO_TEST_CASE(a_shared_setting_of_the_rows_stays_the_resumed_files_own) {
  TempDir dir;
  std::string const old_file = dir.file("old.h5"), new_file = dir.file("new.h5");
  {
    auto w = h5::ResultWriter::create(old_file, h5::collect_provenance(5));
    w.table("x", sweep_columns()).append("k", sweep_row(1, 1, "v", 1));
  }
  {
    // A resumed file without the attribute predates it: its rows have the legacy value.
    auto w = h5::ResultWriter::resume(old_file);
    try {
      w.keep_root_attr("mode_b_producer", "pdl-wait", "plain", "--producer", "mode b producer");
      BOOST_FAIL("a resumed file of another setting was taken");
    } catch (InputError const& e) {
      std::string const m = e.what();
      BOOST_TEST(m.find("--producer: 'pdl-wait' differs from 'plain'") != std::string::npos, m);
    }
    w.keep_root_attr("mode_b_producer", "plain", "plain", "--producer", "mode b producer");
  }
  BOOST_TEST(h5::ResultReader(old_file).provenance().at("mode_b_producer") == "plain");
  {
    auto w = h5::ResultWriter::create(new_file, h5::collect_provenance(5));
    w.keep_root_attr("mode_b_producer", "pdl-wait", "plain", "--producer", "mode b producer");
  }
  auto w = h5::ResultWriter::resume(new_file);
  w.keep_root_attr("mode_b_producer", "pdl-wait", "plain", "--producer", "mode b producer");
  BOOST_CHECK_THROW(
      w.keep_root_attr("mode_b_producer", "plain", "plain", "--producer", "mode b producer"),
      InputError);
}

// A writer killed between rows (SIGKILL, no destructor, no close) leaves a file with every row it
// had finished, marked incomplete (no reader takes it for a finished run), and --resume completes
// the run without duplicating any configuration.
BOOST_AUTO_TEST_CASE(killed_writer_keeps_finished_rows_and_resume_completes_without_duplicates) {
  TempDir dir;
  std::string const path = dir.file("killed.h5");
  int const total = 12, before_kill = 5;

  int fds[2];
  BOOST_REQUIRE(::pipe(fds) == 0);
  pid_t const child = ::fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    auto w = h5::ResultWriter::create_resumable(path, h5::collect_provenance(7));
    auto t = w.table("sweep", sweep_columns());
    for (int i = 0; i < total; ++i) {
      t.append(key_of(1024, i), sweep_row(1024, i, "small_batch", 1.0 + i), {1.0 + i, 2.0 + i});
      char const c = 'r';
      if (::write(fds[1], &c, 1) != 1)
        ::_exit(3);
      ::usleep(200000); // the parent kills us in here, between rows
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  for (int got = 0; got < before_kill;) {
    char c;
    BOOST_REQUIRE(::read(fds[0], &c, 1) == 1);
    ++got;
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(fds[0]);
  BOOST_REQUIRE(WIFSIGNALED(status));

  expect_file_error([&] { h5::ResultReader r(path); }, path, "incomplete");

  {
    auto w = h5::ResultWriter::resume(path);
    auto t = w.table("sweep", sweep_columns());
    BOOST_TEST(t.rows() == static_cast<std::size_t>(before_kill));
    for (int i = 0; i < before_kill; ++i)
      BOOST_TEST(t.has(key_of(1024, i)));
    int measured = 0;
    for (int i = 0; i < total; ++i) {
      if (t.has(key_of(1024, i)))
        continue;
      t.append(key_of(1024, i), sweep_row(1024, i, "small_batch", 1.0 + i), {1.0 + i, 2.0 + i});
      ++measured;
    }
    BOOST_TEST(measured == total - before_kill);
  }
  h5::ResultReader r(path);
  auto const t = r.read_table("sweep");
  BOOST_TEST(t.rows == static_cast<std::size_t>(total));
  std::set<std::string> unique(t.keys().begin(), t.keys().end());
  BOOST_TEST(unique.size() == static_cast<std::size_t>(total));
  for (int i = 0; i < total; ++i)
    BOOST_TEST(t.row_samples(t.find(key_of(1024, i)))[1] == 2.0 + i);
  BOOST_TEST(r.provenance().count("resumed_by") == 1u);
  BOOST_TEST(r.provenance().at("moefin_state") == "complete");
  for (int i = 0; i < before_kill; ++i)
    BOOST_TEST(t.row_samples(t.find(key_of(1024, i))) == (std::vector<double>{1.0 + i, 2.0 + i}),
               boost::test_tools::per_element());
}

// A file written whole (create) exists under its final name only once committed; until then it
// is a temporary beside it, removed when the writer is destroyed by an exception.
BOOST_AUTO_TEST_CASE(whole_files_appear_only_when_committed) {
  TempDir dir;
  std::string const path = dir.file("whole.h5");
  {
    auto w = h5::ResultWriter::create(path, h5::collect_provenance(3));
    w.write_array("route", "ids", std::vector<std::int32_t>{1, 2, 3}, {3});
    BOOST_TEST(!fs::exists(path));
    int partial = 0;
    for (auto const& e : fs::directory_iterator(dir.path))
      partial += e.path().filename().string().find(".partial") != std::string::npos;
    BOOST_TEST(partial == 1);
    w.commit();
    BOOST_TEST(fs::exists(path));
    BOOST_CHECK_THROW(w.set_attr("route", "late", "x"), std::logic_error);
  }
  h5::ResultReader r(path);
  BOOST_TEST(r.provenance().at("moefin_state") == "complete");

  std::string const failed = dir.file("failed.h5");
  try {
    auto w = h5::ResultWriter::create(failed, h5::collect_provenance(3));
    w.write_array("route", "ids", std::vector<std::int32_t>{1}, {1});
    throw std::runtime_error("the run fails");
  } catch (std::runtime_error const&) {
  }
  BOOST_TEST(!fs::exists(failed));
  for (auto const& e : fs::directory_iterator(dir.path))
    BOOST_TEST(e.path().filename().string().find(".partial") == std::string::npos, e.path());
}

// --overwrite: the old file stays, whole, until the new one is committed over it.
BOOST_AUTO_TEST_CASE(overwrite_keeps_the_old_file_until_the_new_one_is_complete) {
  TempDir dir;
  std::string const path = dir.file("o.h5");
  {
    auto w = h5::ResultWriter::create(path, h5::collect_provenance(1));
    w.set_attr("route", "generation", "old");
  }
  auto w = h5::ResultWriter::create(path, h5::collect_provenance(2), /*overwrite=*/true);
  w.set_attr("route", "generation", "new");
  BOOST_TEST(h5::ResultReader(path).group_attrs("route").at("generation") == "old");
  w.commit();
  BOOST_TEST(h5::ResultReader(path).group_attrs("route").at("generation") == "new");
}

// A file that rows are appended to is `incomplete` until committed; readers refuse it, --resume
// takes it; files without the attribute (written before it existed) read as complete.
BOOST_AUTO_TEST_CASE(row_files_carry_their_state_and_old_files_read_as_complete) {
  TempDir dir;
  std::string const path = dir.file("rows.h5");
  {
    auto w = h5::ResultWriter::open(path, "", 4);
    auto t = w.table("x", sweep_columns());
    t.append("k", sweep_row(1, 1, "v", 1));
    expect_file_error([&] { h5::ResultReader r(path); }, path, "incomplete");
    w.commit();
  }
  BOOST_TEST(h5::ResultReader(path).read_table("x").rows == 1u);
  {
    auto w = h5::ResultWriter::resume(path);
    expect_file_error([&] { h5::ResultReader r(path); }, path, "incomplete");
  }
  BOOST_TEST(h5::ResultReader(path).provenance().at("moefin_state") == "complete");

  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  H5Adelete(f, "moefin_state");
  H5Fclose(f);
  BOOST_TEST(h5::ResultReader(path).read_table("x").rows == 1u);
  BOOST_TEST(h5::ResultReader(path).provenance().count("moefin_state") == 0u);
}

namespace {

/// A committed file with one table of `rows` rows, then `edit` applied through the HDF5 API.
std::string table_file(TempDir const& dir, char const* name, int rows,
                       std::function<void(hid_t)> const& edit) {
  std::string const path = dir.file(name);
  {
    auto w = h5::ResultWriter::create(path, h5::collect_provenance(1));
    auto t = w.table("x", sweep_columns());
    for (int i = 0; i < rows; ++i)
      t.append(key_of(i, i), sweep_row(i, i, "v", i), {1.0 * i});
  }
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  edit(f);
  H5Fclose(f);
  return path;
}

} // namespace

BOOST_AUTO_TEST_CASE(readers_validate_before_they_allocate_or_index) {
  TempDir dir;
  // An attribute stored as an array (h5py: attrs["arch"] = [9, 0, 0]).
  auto const arr = table_file(dir, "arr.h5", 2, [](hid_t f) {
    H5Adelete(f, "arch");
    hsize_t dims[1] = {3};
    hid_t sp = H5Screate_simple(1, dims, nullptr);
    hid_t a = H5Acreate2(f, "arch", H5T_NATIVE_INT32, sp, H5P_DEFAULT, H5P_DEFAULT);
    int v[3] = {9, 0, 0};
    H5Awrite(a, H5T_NATIVE_INT32, v);
    H5Aclose(a);
    H5Sclose(sp);
  });
  expect_file_error([&] { h5::ResultReader r(arr); }, arr,
                    "attribute 'arch' of / is an array of 3 values");
  // An extent of 10^12 rows is refused before anything of that size is allocated.
  auto const huge = table_file(dir, "huge.h5", 2, [](hid_t f) {
    hid_t d = H5Dopen2(f, "x/table", H5P_DEFAULT);
    hsize_t dims[1] = {1000000000000ull};
    H5Dset_extent(d, dims);
    H5Dclose(d);
  });
  expect_file_error([&] { h5::ResultReader(huge).read_table("x"); }, huge,
                    "/x/table claims 1000000000000 elements");
  // A zero-row table reads as such, every column present.
  auto const empty = table_file(dir, "empty.h5", 0, [](hid_t) {});
  auto const t = h5::ResultReader(empty).read_table("x");
  BOOST_TEST(t.rows == 0u);
  BOOST_TEST(t.keys().empty());
  BOOST_TEST(t.ints.at("H").empty());
  // A column the table lacks, or holds with another type, names the file, table and column.
  auto const ok = table_file(dir, "ok.h5", 1, [](hid_t) {});
  auto const tab = h5::ResultReader(ok).read_table("x");
  expect_file_error([&] { tab.ints.at("variant"); }, ok,
                    "/x/table has no integer column 'variant'");
  // Soft and external links are refused where the groups are listed.
  auto const soft = table_file(dir, "soft.h5", 1, [](hid_t f) {
    H5Lcreate_soft("/loop", f, "loop", H5P_DEFAULT, H5P_DEFAULT);
  });
  expect_file_error([&] { h5::ResultReader(soft).groups(); }, soft, "/loop is a soft link");
  auto const ext = table_file(dir, "ext.h5", 1, [](hid_t f) {
    H5Lcreate_external("other.h5", "/", f, "elsewhere", H5P_DEFAULT, H5P_DEFAULT);
  });
  expect_file_error([&] { h5::ResultReader(ext).groups(); }, ext, "/elsewhere is an external link");
  // A group of unknown kind.
  auto const kind = table_file(dir, "kind.h5", 1, [](hid_t f) {
    hid_t g = H5Gopen2(f, "x", H5P_DEFAULT);
    H5Adelete(g, "kind");
    hid_t ty = H5Tcopy(H5T_C_S1);
    H5Tset_size(ty, 8);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(g, "kind", ty, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, ty, "banana\0\0");
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(ty);
    H5Gclose(g);
  });
  expect_file_error([&] { h5::ResultReader(kind).read_table("x"); }, kind, "has kind 'banana'");
}
