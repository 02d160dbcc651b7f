#define BOOST_TEST_MODULE cli
#include <boost/test/unit_test.hpp>

#include "core/cli.hpp"
#include "core/store/h5store.hpp"
#include "tests/run_moefin.hpp"

#include <hdf5.h>

#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace {

using moefin::test::contains;
using moefin::test::lines;
using moefin::test::run;

fs::path temp_dir() {
  fs::path p = fs::temp_directory_path() / ("moefin_cli_" + std::to_string(::getpid()));
  fs::create_directories(p);
  return p;
}

} // namespace

BOOST_AUTO_TEST_CASE(help_lists_every_command_and_exits_zero) {
  auto const r = run("--help");
  BOOST_TEST(r.status == 0);
  for (auto const& c : moefin::cli::commands())
    BOOST_TEST(contains(r.out, c.name), "--help lists " << c.name);
  for (auto const& c : moefin::cli::commands()) {
    auto const h = run(c.name + " --help");
    BOOST_TEST(h.status == 0, c.name << " --help: " << h.out);
    BOOST_TEST(contains(h.out, "usage: moefin " + c.name), h.out);
  }
}

BOOST_AUTO_TEST_CASE(version_names_the_commit) {
  auto const r = run("--version");
  BOOST_TEST(r.status == 0);
  BOOST_TEST(contains(r.out, "moefin 0."), r.out);
}

BOOST_AUTO_TEST_CASE(info_reports_build_and_gpu_or_its_absence) {
  auto const r = run("info");
  BOOST_TEST(r.status == 0, r.out);
  for (char const* s : {"git commit", "C++ compiler", "CUDA", "Kokkos", "backend", "HDF5"})
    BOOST_TEST(contains(r.out, s), "info prints " << s << ":\n" << r.out);
  BOOST_TEST((contains(r.out, "GPU: no CUDA device") || contains(r.out, "compute capability")),
             r.out);
}

BOOST_AUTO_TEST_CASE(unknown_command_or_option_is_a_usage_error) {
  auto const a = run("frobnicate");
  BOOST_TEST(a.status == 2);
  BOOST_TEST(contains(a.out, "unknown command 'frobnicate'"), a.out);
  BOOST_TEST(contains(a.out, "usage: moefin"), a.out);

  auto const b = run("info --no-such-flag");
  BOOST_TEST(b.status == 2);
  BOOST_TEST(contains(b.out, "no-such-flag"), b.out);
  BOOST_TEST(contains(b.out, "usage: moefin info"), b.out);

  auto const c = run("");
  BOOST_TEST(c.status == 2);

  auto const d = run("demo --rounds notanumber");
  BOOST_TEST(d.status == 2);
  BOOST_TEST(contains(d.out, "rounds"), d.out);

  // A missing positional argument is named by its place, not as the option Boost keeps for it.
  auto const e = run("compare only_one.h5");
  BOOST_TEST(e.status == 2);
  BOOST_TEST(contains(e.out, "compare: missing argument 2 (new)"), e.out);
  BOOST_TEST(!contains(e.out, "'--new'"), e.out);
  BOOST_TEST(lines(e.out) == 1, e.out);

  // "moefin help CMD" is "moefin CMD --help".
  auto const h = run("help verify");
  BOOST_TEST(h.status == 0);
  BOOST_TEST(contains(h.out, "usage: moefin verify CHAIN.json"), h.out);
  BOOST_TEST(run("help sweep layer").out.find("usage: moefin sweep layer") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(echoed_values_keep_text_and_mask_binary_bytes) {
  using moefin::cli::cut;
  BOOST_TEST(cut("caf\xc3\xa9 \xe2\x86\x92 x") == "caf\xc3\xa9 \xe2\x86\x92 x"); // UTF-8 passes
  BOOST_TEST(cut("\x89HDF\r\n\x1a") == "?HDF???"); // a binary file's bytes do not
  BOOST_TEST(cut("\xc3") == "?");                  // a sequence cut short
  BOOST_TEST(cut("\xe2\x86\xff") == "???");        // a bad continuation
  std::string const many(100, 'a');
  BOOST_TEST(cut(many + "\xc3\xa9", 50) == std::string(47, 'a') + "...");
  BOOST_TEST(cut(std::string(46, 'a') + "\xc3\xa9" + many, 50) == std::string(46, 'a') + "...");
}

BOOST_AUTO_TEST_CASE(out_of_range_value_names_flag_value_and_range_in_one_line) {
  auto const r = run("demo --rounds -4");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(contains(r.out, "--rounds"), r.out);
  BOOST_TEST(contains(r.out, "-4"), r.out);
  BOOST_TEST(contains(r.out, "[3, 1000]"), r.out);
  BOOST_TEST(lines(r.out) == 1, r.out);
}

BOOST_AUTO_TEST_CASE(range_helpers_throw_input_errors) {
  using namespace moefin;
  BOOST_CHECK_THROW(cli::check_range("--top-k", 0, 1, 64), InputError);
  BOOST_CHECK_NO_THROW(cli::check_range("--top-k", 64, 1, 64));
  BOOST_CHECK_THROW(cli::check_multiple("--hidden", 1000 + 4, 8), InputError);
  BOOST_CHECK_NO_THROW(cli::check_multiple("--hidden", 2880, 8));
  BOOST_TEST(cli::parse_int_list("--tokens", "1,2,8:10", 1, 16) ==
                 (std::vector<std::int64_t>{1, 2, 8, 9, 10}),
             boost::test_tools::per_element());
  BOOST_TEST(cli::parse_int_list("--hidden", "16:64:16,100", 1, 128) ==
                 (std::vector<std::int64_t>{16, 32, 48, 64, 100}),
             boost::test_tools::per_element());
  BOOST_TEST(cli::parse_int_list("--hidden", "1:10:4", 1, 128) ==
                 (std::vector<std::int64_t>{1, 5, 9}),
             boost::test_tools::per_element());
  BOOST_CHECK_THROW(cli::parse_int_list("--hidden", "1:10:0", 1, 128), InputError);
  BOOST_CHECK_THROW(cli::parse_int_list("--hidden", "10:1", 1, 128), InputError);
  BOOST_CHECK_THROW(cli::parse_int_list("--hidden", "1:200", 1, 128), InputError);
  try { // the old range spelling names the new one
    cli::parse_int_list("--tokens", "1,8-10", 1, 16);
    BOOST_ERROR("8-10 was accepted");
  } catch (InputError const& e) {
    BOOST_TEST(std::string(e.what()).find("(8:10)") != std::string::npos, e.what());
  }
  BOOST_CHECK_THROW(cli::parse_int_list("--tokens", "1,-2", 1, 16), InputError);
  BOOST_CHECK_THROW(cli::parse_int_list("--tokens", "1,x", 1, 16), InputError);
  BOOST_CHECK_THROW(cli::check_choice("--weights", "fp16", {"bf16", "fp32"}), InputError);
}

BOOST_AUTO_TEST_CASE(one_vocabulary_renamed_flags_name_the_new_spelling_in_one_line) {
  for (auto const& [cmd, old, now] : std::vector<std::array<std::string, 3>>{
           {"race", "--shape top-8", "--shapes"},
           {"race", "--delays=0,3000", "--delay-ns"},
           {"equivalence", "--delay-kernel gemm1", "--delay-kernels"},
           {"sweep layer", "--shape top-8", "--shapes"},
           {"sweep finalize", "--table x.h5", "--print"}}) {
    auto const r = run(cmd + " " + old + " --list");
    BOOST_TEST(r.status == 2, r.out);
    BOOST_TEST(contains(r.out, " is now " + now), r.out);
    BOOST_TEST(lines(r.out) == 1, r.out);
  }
  // A command without the new flag does not point to it: the old one is just unknown there.
  for (auto const& old : {"--shape top-8", "--delays 5"}) {
    auto const r = run(std::string("route ") + old);
    BOOST_TEST(r.status == 2, r.out);
    BOOST_TEST(!contains(r.out, " is now "), r.out);
    BOOST_TEST(contains(r.out, "unrecognised option"), r.out);
    BOOST_TEST(lines(r.out) == 1, r.out);
  }
  auto const help = run("--help");
  BOOST_TEST(contains(help.out, "lo:hi:step"), help.out);
  BOOST_TEST(contains(help.out, "out/<command>.h5"), help.out);
  BOOST_TEST(moefin::cli::default_out("sweep finalize") == "out/sweep_finalize.h5");
  BOOST_TEST(moefin::cli::default_out("pdl-probe") == "out/pdl_probe.h5");
  // The new spellings take lists in every chain command.
  auto const race = run("race --shapes top-8,top-22 --tokens 1:2 --delay-ns 0,3000 --presets safe "
                        "--triggers sweep --meta before --list");
  BOOST_TEST(race.status == 0, race.out);
  BOOST_TEST(contains(race.out, "top-22,T=2,"), race.out);
  auto const eq = run("equivalence --shapes top-8 --tokens 1 --presets safe --delay-ns 0,3000 "
                      "--delay-kernels routing,gemm1 --list");
  BOOST_TEST(eq.status == 0, eq.out);
  BOOST_TEST(contains(eq.out, "equivalence: 3 units"), eq.out);
  BOOST_TEST(contains(eq.out, "preset=safe,delay=3000@gemm1"), eq.out);
  BOOST_TEST(contains(eq.out, "preset=safe,delay=0@routing"), eq.out);
}

BOOST_AUTO_TEST_CASE(unreadable_or_foreign_file_is_one_line_exit_one) {
  fs::path const dir = temp_dir();
  std::string const missing = (dir / "missing.h5").string();
  auto const a = run("show " + missing);
  BOOST_TEST(a.status == 1, a.out);
  BOOST_TEST(contains(a.out, missing), a.out);
  BOOST_TEST(lines(a.out) == 1, a.out);

  std::string const foreign = (dir / "foreign.h5").string();
  H5Fclose(H5Fcreate(foreign.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  auto const b = run("show " + foreign);
  BOOST_TEST(b.status == 1, b.out);
  BOOST_TEST(contains(b.out, foreign + ": not a moefin result file"), b.out);
  BOOST_TEST(lines(b.out) == 1, b.out);

  std::string const text = (dir / "notes.txt").string();
  std::ofstream(text) << "hello\n";
  auto const c = run("show " + text);
  BOOST_TEST(c.status == 1, c.out);
  BOOST_TEST(contains(c.out, "not an HDF5 file"), c.out);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(demo_writes_a_readable_result_file) {
  fs::path const dir = temp_dir() / "demo";
  auto const r = run("demo --rounds 3 --out-dir " + dir.string());
  BOOST_TEST(r.status == 0, r.out);
  std::string const file = (dir / "host_copy.h5").string();
  auto const s = run("show " + file);
  BOOST_TEST(s.status == 0, s.out);
  BOOST_TEST(contains(s.out, "/host_copy (table): 4 rows"), s.out);
  auto const csv = run("show " + file + " --table host_copy");
  BOOST_TEST(csv.status == 0);
  BOOST_TEST(lines(csv.out) == 5, csv.out);
  fs::remove_all(dir.parent_path());
}
