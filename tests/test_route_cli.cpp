#define BOOST_TEST_MODULE route_cli
#include <boost/test/unit_test.hpp>

#include "tests/run_moefin.hpp"
#include "core/store/h5store.hpp"

#include <unistd.h>

#include <filesystem>
#include <string>

namespace fs = std::filesystem;

namespace {

using moefin::test::contains;
using moefin::test::lines;
using moefin::test::run;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("moefin_route_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string file(std::string const& name) const { return (path / name).string(); }
};

} // namespace

BOOST_AUTO_TEST_CASE(route_writes_the_routing_and_every_layout_array) {
  TempDir dir;
  std::string const f = dir.file("r.h5");
  auto const r = run("route --tokens 5 --experts 12 --top-k 3 --tile 4 --local-experts 2:8 "
                     "--weights fp32 --out " +
                     f);
  BOOST_TEST(r.status == 0, r.out);
  BOOST_TEST(contains(r.out, "wrote " + f), r.out);
  moefin::h5::ResultReader reader(f);
  auto const attrs = reader.group_attrs("route");
  BOOST_TEST(attrs.at("kind") == "arrays");
  BOOST_TEST(attrs.at("weights") == "fp32");
  BOOST_TEST(attrs.at("local_expert_begin") == "2");
  BOOST_TEST(attrs.at("num_local_experts") == "8");
  std::vector<std::size_t> dims;
  reader.read_ints("route", "expert_ids", &dims);
  BOOST_TEST((dims == std::vector<std::size_t>{5, 3}));
  reader.read_ints("route", "expert_offsets", &dims);
  BOOST_TEST((dims == std::vector<std::size_t>{9}));
  auto const total = reader.read_ints("route", "total_padded_rows");
  reader.read_ints("route", "permuted_to_token", &dims);
  BOOST_TEST(dims.at(0) == static_cast<std::size_t>(total.at(0)));
  for (char const* name : {"weights_fp32", "weights_bf16", "expanded_to_permuted",
                           "permuted_to_expanded", "expert_counts", "cta_to_expert"})
    BOOST_CHECK_NO_THROW(reader.read_reals("route", name));
}

BOOST_AUTO_TEST_CASE(bad_inputs_are_one_line_errors_naming_flag_value_and_range) {
  TempDir dir;
  struct Case {
    std::string args;
    std::vector<std::string> says;
  };
  std::string const out = " --out " + dir.file("never.h5");
  for (Case const& c : std::vector<Case>{
           {"route --experts 8 --top-k 9", {"--top-k", "9", "[1, 8]"}},
           {"route --experts 128 --top-k 65", {"--top-k", "65", "[1, 64]"}},
           {"route --tokens 0", {"--tokens", "0", "[1, 1048576]"}},
           {"route --tokens -3", {"--tokens", "-3", "[1, 1048576]"}},
           {"route --experts 0", {"--experts", "0", "[1, 65536]"}},
           {"route --drop-fraction 1.5", {"--drop-fraction", "1.5", "[0, 1]"}},
           {"route --drop-fraction -0.5", {"--drop-fraction", "-0.5", "[0, 1]"}},
           {"route --local-experts 60:10", {"--local-experts", "60:10", "BEGIN"}},
           {"route --local-experts 7", {"--local-experts", "BEGIN:COUNT"}},
           {"route --distribution gauss", {"--distribution", "gauss", "zipf"}},
           {"route --weights none", {"--weights", "none", "bf16, fp32"}},
           {"route --tile 0", {"--tile", "0", "[1, 4096]"}},
           {"route --zipf-s -1 --distribution zipf", {"--zipf-s", "-1", "[0, 16]"}},
           {"reference finalize --hidden 0", {"--hidden", "0", "[1, 65536]"}},
           {"reference finalize --hidden 64 --hidden-padded 32",
            {"--hidden-padded", "32", "[64, 66560]"}},
           {"reference finalize --weights fp16", {"--weights", "fp16", "none"}},
           {"reference finalize --top-k 70", {"--top-k", "70", "[1, 64]"}},
       }) {
    auto const r = run(c.args + out);
    BOOST_TEST(r.status == 2, c.args << ": " << r.out);
    BOOST_TEST(lines(r.out) == 1, c.args << ": " << r.out);
    for (auto const& s : c.says)
      BOOST_TEST(contains(r.out, s), c.args << " says " << s << ": " << r.out);
  }
  BOOST_TEST(!fs::exists(dir.file("never.h5")));
}

BOOST_AUTO_TEST_CASE(reference_finalize_reads_a_route_file_and_keeps_its_routing) {
  TempDir dir;
  std::string const route = dir.file("r.h5"), fin = dir.file("f.h5");
  BOOST_TEST(run("route --tokens 6 --experts 16 --top-k 4 --distribution zipf --drop-fraction "
                 "0.25 --weights fp32 --out " +
                 route)
                 .status == 0);
  auto const r = run("reference finalize --routing " + route + " --hidden 72 --out " + fin);
  BOOST_TEST(r.status == 0, r.out);
  BOOST_TEST(contains(r.out, "fp32 weights"), r.out);
  moefin::h5::ResultReader a(route), b(fin);
  BOOST_TEST(a.read_ints("route", "expert_ids") == b.read_ints("route", "expert_ids"));
  BOOST_TEST(a.read_ints("route", "expanded_to_permuted") ==
             b.read_ints("route", "expanded_to_permuted"));
  BOOST_TEST(b.group_attrs("finalize").at("routing_source") == route);
  BOOST_TEST(b.group_attrs("route").at("distribution") == "zipf");

  auto const clash =
      run("reference finalize --routing " + route + " --top-k 2 --out " + dir.file("x.h5"));
  BOOST_TEST(clash.status == 2, clash.out);
  BOOST_TEST(contains(clash.out, "--top-k: not allowed with --routing"), clash.out);

  auto const foreign = run("reference finalize --routing " + fin + "x --out " + dir.file("y.h5"));
  BOOST_TEST(foreign.status == 1, foreign.out);
  BOOST_TEST(contains(foreign.out, fin + "x"), foreign.out);
  BOOST_TEST(lines(foreign.out) == 1, foreign.out);
}

BOOST_AUTO_TEST_CASE(existing_result_files_are_not_overwritten_unless_asked) {
  TempDir dir;
  std::string const f = dir.file("r.h5");
  BOOST_TEST(run("route --out " + f).status == 0);
  auto const again = run("route --out " + f);
  BOOST_TEST(again.status == 1, again.out);
  BOOST_TEST(contains(again.out, f + ": exists already"), again.out);
  BOOST_TEST(run("route --overwrite --seed 3 --out " + f).status == 0);
  BOOST_TEST(moefin::h5::ResultReader(f).group_attrs("route").at("seed") == "3");
}
