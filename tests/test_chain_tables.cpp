#define BOOST_TEST_MODULE chain_tables
#include <boost/test/unit_test.hpp>

#include "tests/run_moefin.hpp"

#include "core/store/h5store.hpp"
#include "core/ops/errors.hpp"
#include "core/pdl/verifier.hpp"
#include "experiments/chain/run.hpp"
#include "experiments/report/chain_tables.hpp"

#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace moefin;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("moefin_chain_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string file(char const* n) const { return (path / n).string(); }
};

std::string published() {
  return std::string(MOEFIN_SOURCE_DIR) + "/data/published";
}

/// A /layer_sweep with the 4 configurations of two (shape, T) cells; times are made up so that
/// new finalize is 1.05x and seed-after 1.02x.
/// With `formats`, the same per weights format, fp4 layers half the time.
void write_layer_file(std::string const& path, std::vector<std::string> const& formats = {""}) {
  auto prov = h5::collect_provenance(1);
  prov["gpu_name"] = "NVIDIA B200"; // the measured column is labelled with the file's GPU
  auto f = h5::ResultWriter::create(path, prov);
  auto t = f.table("layer_sweep", chain_tables::layer_columns());
  for (auto const& format : formats)
    for (std::int64_t T : {1, 8})
      for (std::string fin : {"new", "previous"})
        for (std::string pl : {"seed-after", "seed-before"}) {
          double us = 100.0 * (fin == "new" ? 1.0 / 1.05 : 1.0) *
                      (pl == "seed-after" ? 1 / 1.02 : 1) * (format == "fp4" ? 0.5 : 1.0);
          h5::Row r;
          r.set("shape", "H2048/I1280/E512/top-22/relu2")
              .set("H", 2048)
              .set("I", 1280)
              .set("E", 512)
              .set("K", 22)
              .set("activation", "relu2")
              .set("T", T)
              .set("finalize", fin)
              .set("placement", pl)
              .set("finalize_kernel", "small_batch")
              .set("tile_m", 16)
              .set("layers", 16)
              .set("median_us", us)
              .set("min_us", us * 0.99)
              .set("q1_us", us)
              .set("q3_us", us)
              .set("max_us", us)
              .set("rounds", 9)
              .set("speedup_finalize", fin == "new" ? 1.05 : 1.0)
              .set("speedup_finalize_lo", fin == "new" ? 1.04 : 1.0)
              .set("speedup_finalize_hi", fin == "new" ? 1.06 : 1.0)
              .set("speedup_placement", pl == "seed-after" ? 1.02 : 1.0)
              .set("speedup_placement_lo", 1.0)
              .set("speedup_placement_hi", 1.03)
              .set("weights_format", format);
          t.append("T=" + std::to_string(T) + fin + pl + format, r, {us, us});
        }
}

using moefin::test::contains;
using moefin::test::run;

} // namespace

BOOST_AUTO_TEST_CASE(published_tables_are_read_with_their_gaps) {
  auto const w = chain_tables::read_published(published() + "/whole_op_speedup.csv");
  BOOST_TEST(w.size() == 54u);
  int gaps = 0;
  for (auto const& p : w)
    gaps += p.speedup == 0;
  BOOST_TEST(gaps == 3); // top-8 64/128 Rubin, top-16 128 Rubin
  auto const o = chain_tables::read_published(published() + "/pdl_ordering_speedup.csv");
  BOOST_TEST(o.size() == 8u);
  BOOST_CHECK_THROW(chain_tables::read_published(published() + "/missing.csv"), FileError);
}

BOOST_AUTO_TEST_CASE(layer_tables_print_measured_beside_published) {
  TempDir d;
  write_layer_file(d.file("layer.h5"));
  h5::ResultReader r(d.file("layer.h5"));
  std::ostringstream os;
  chain_tables::print_layer_tables(r.read_table("layer_sweep"), published(),
                                   r.provenance().at("gpu_name"), os);
  std::string const s = os.str();
  BOOST_TEST(contains(s, "new finalize vs previous"), s);
  BOOST_TEST(contains(s, "NVIDIA B200 (measured)"), s);
  BOOST_TEST(!contains(s, "H200"), s);
  BOOST_TEST(contains(s, "1.050x [1.040, 1.060]"), s);
  BOOST_TEST(contains(s, "1.085x"), s); // GB200 top-22 at 1 token, published
  BOOST_TEST(contains(s, "1.058x"), s); // Rubin top-22 ordering at 1 token
  BOOST_TEST(contains(s, "1.020x"), s);
  // The same through the command line, without a GPU.
  auto const c = run("sweep layer --print " + d.file("layer.h5") + " --published " + published());
  BOOST_TEST(c.status == 0, c.out);
  BOOST_TEST(contains(c.out, "1.050x [1.040, 1.060]"), c.out);
}

BOOST_AUTO_TEST_CASE(race_matrix_prints_one_cell_per_meta_and_delay) {
  TempDir d;
  {
    auto f = h5::ResultWriter::create(d.file("race.h5"), h5::collect_provenance(1));
    auto t = f.table("race_matrix", chain_tables::race_columns());
    int n = 0;
    for (std::string meta : {"before", "after"})
      for (std::int64_t delay : {0, 25000}) {
        h5::Row r;
        bool const race = meta == "before" && delay > 0;
        bool const contradicted = meta == "after" && delay > 0; // a made-up verifier bug
        r.set("shape", "H6144/I512/E256/top-8")
            .set("T", 4)
            .set("preset", "all-early")
            .set("triggers", "permute=entry,gemm1=entry,act=entry,gemm2=entry")
            .set("meta", meta)
            .set("delay_ns", delay)
            .set("delayed_kernel", delay ? "routing" : "none")
            .set("finalize", "small_batch")
            .set("iterations", 200)
            .set("mismatches", race           ? 197
                               : contradicted ? 3
                                              : 0)
            .set("stale_reads", race ? 1500 : 0)
            .set("stale_iterations", race ? 198 : 0)
            .set("recorded_reads", 6400)
            .set("first_buffer", race || contradicted ? "out" : "")
            .set("verifier", contradicted ? "ordered" : "unknown");
        t.append("k" + std::to_string(n++), r);
      }
  }
  auto const c = run("race --print " + d.file("race.h5"));
  BOOST_TEST(c.status == 0, c.out);
  BOOST_TEST(contains(c.out, "meta=before d=25000"), c.out);
  // every header is followed by at least two spaces, even the widest
  BOOST_TEST(contains(c.out, "meta=before d=25000  meta=after d=0"), c.out);
  BOOST_TEST(contains(c.out, "197/200 s198 R "), c.out);
  BOOST_TEST(contains(c.out, "0/200 s0 R "), c.out); // meta=before d=0: a race not seen
  BOOST_TEST(contains(c.out, "3/200 s0 ! "), c.out);
  BOOST_TEST(contains(c.out, "197/200 iterations mismatch (98.5%"), c.out);
  BOOST_TEST(contains(c.out, "verifier: 2 of 4 cells race; 2 cells showed a race on the GPU, 1 of "
                             "them in chains the verifier orders (a bug"),
             c.out);
  BOOST_TEST(contains(c.out, "(3 verdicts computed from the rows"), c.out);
}

BOOST_AUTO_TEST_CASE(equivalence_table_prints_mismatch_location) {
  TempDir d;
  {
    auto f = h5::ResultWriter::create(d.file("eq.h5"), h5::collect_provenance(1));
    auto t = f.table("equivalence", chain_tables::equivalence_columns());
    h5::Row r;
    r.set("shape", "H6144/I512/E256/top-8")
        .set("T", 4)
        .set("preset", "all-early")
        .set("overrides", "")
        .set("delay_ns", 25000)
        .set("delayed_kernel", "routing")
        .set("finalize", "small_batch")
        .set("tile_m", 16)
        .set("routings", 1000)
        .set("mismatches", 990)
        .set("first_buffer", "out")
        .set("first_index", 517)
        .set("first_seed", "12345")
        .set("stale_reads", 9000)
        .set("recorded_reads", 32000)
        .set("ref_checks", 1)
        .set("max_rel_err", 0.0031)
        .set("tolerance", 0.01)
        .set("routings_per_s", 812.0)
        .set("weights_format", "fp4");
    t.append("a", r);
  }
  auto const c = run("equivalence --print " + d.file("eq.h5"));
  BOOST_TEST(c.status == 0, c.out);
  BOOST_TEST(contains(c.out, "first: out[517] seed 12345"), c.out);
  BOOST_TEST(contains(c.out, "25000ns@routing"), c.out);
  BOOST_TEST(contains(c.out, "0.00310"), c.out);
  BOOST_TEST(contains(c.out, "weights"), c.out); // the column of a file that has it
}

BOOST_AUTO_TEST_CASE(bad_command_lines_exit_2_naming_the_flag) {
  auto const a = run("equivalence --tokens 0");
  BOOST_TEST(a.status == 2, a.out);
  BOOST_TEST(contains(a.out, "--tokens"), a.out);
  auto const b = run("race --triggers most");
  BOOST_TEST(b.status == 2, b.out);
  BOOST_TEST(contains(b.out, "--triggers"), b.out);
  auto const c = run("equivalence --set gemm1.trigger=soon");
  BOOST_TEST(c.status == 2, c.out);
  BOOST_TEST(contains(c.out, "--set"), c.out);
  auto const e = run("sweep layer --shapes top-9");
  BOOST_TEST(e.status == 2, e.out);
  BOOST_TEST(contains(e.out, "--shapes"), e.out);
  auto const g = run("sweep layer --stamps=1,200");
  BOOST_TEST(g.status == 2, g.out);
  BOOST_TEST(contains(g.out, "--stamps"), g.out);
  auto const h = run("sweep layer --carveout most");
  BOOST_TEST(h.status == 2, h.out);
  BOOST_TEST(contains(h.out, "--carveout"), h.out);
  auto const f = run("equivalence --print /nonexistent/eq.h5");
  BOOST_TEST(f.status == 1, f.out);
  BOOST_TEST(contains(f.out, "/nonexistent/eq.h5"), f.out);
}

BOOST_AUTO_TEST_CASE(weights_format_errors_name_the_flag_and_the_problem) {
  struct Case {
    char const* args;
    char const* says;
  };
  for (Case const& c :
       {Case{"sweep layer --weights-format nvfp4 --list", "--weights-format: value 'nvfp4'"},
        Case{"equivalence --weights-format fp4,fp4 --list", "'fp4' given twice"},
        Case{"race --weights-format bf16,fp4 --list", "race takes one format per run"},
        Case{"equivalence --weights-format fp4 --tile-m 32 --list", "--tile-m: 32"},
        Case{"sweep layer --weights-format bf16-tiled,fp4 --tile-m 8 --list",
             "--tile-m: 8 with --weights-format bf16-tiled"},
        Case{"sweep layer --weights-format fp4 --shapes H6144/I320/E256/top-8 --list",
             "multiples of 128"},
        Case{"sweep layer --peers x.h5", "--peers: only with --print"}}) {
    auto const r = run(c.args);
    BOOST_TEST(r.status == 2, c.args << ": " << r.out);
    BOOST_TEST(contains(r.out, c.says), c.args << ": " << r.out);
  }
  // Tile 8: the decode GEMMs' smaller tile (fp4 without a spill), for every chain command.
  for (char const* args : {"sweep layer --weights-format bf16,fp4 --tile-m 8 --tokens 1,8 --list",
                           "equivalence --weights-format fp4 --tile-m 8 --tokens 1 --list",
                           "race --weights-format fp4 --tile-m 8 --list"}) {
    auto const r = run(args);
    BOOST_TEST(r.status == 0, args << ": " << r.out);
  }
  // The formats are an axis of the sweep and of equivalence, keyed only when not bf16-tiled.
  auto const l =
      run("sweep layer --weights-format bf16-tiled,fp4 --shapes top-8 --tokens 1 --list");
  BOOST_TEST_REQUIRE(l.status == 0, l.out);
  BOOST_TEST(
      contains(l.out, "\n    shape=H6144/I512/E256/top-8,T=1,finalize=new,placement=seed-after\n"),
      l.out);
  BOOST_TEST(contains(l.out, "finalize=new,placement=seed-after,weights_format=fp4"), l.out);
  auto const q = run("equivalence --weights-format bf16,fp4 --shapes top-8 --tokens 1 "
                     "--presets safe --list");
  BOOST_TEST_REQUIRE(q.status == 0, q.out);
  BOOST_TEST(contains(q.out, "delay=0@routing,weights_format=bf16"), q.out);
  BOOST_TEST(contains(q.out, "2 rows"), q.out);
}

BOOST_AUTO_TEST_CASE(race_describe_prints_chains_the_verifier_reads_without_a_gpu) {
  for (std::string const launch : {"graph", "stream"}) {
    auto const r = run(
        "race --presets seed-after --meta before --delay-ns 25000 --describe --launch " + launch);
    BOOST_TEST_REQUIRE(r.status == 0, r.out);
    BOOST_TEST(contains(r.out, "(benchmark): finalize small_batch, verifier race"), r.out);
    // One "# key: ..., verifier V (R of P pairs race)" line per cell, then its chain; each
    // parses, and the verifier's report on it is the one printed.
    std::istringstream in(r.out);
    std::string line, header, body;
    int chains = 0, races = 0;
    auto const check = [&] {
      if (header.empty())
        return;
      pdl::Chain const c = pdl::parse_chain(body, header);
      BOOST_TEST(c.graph == (launch == "graph"), header);
      pdl::Report const rep = pdl::verify(c, {false});
      bool const race = rep.verdict() == pdl::Verdict::kRace;
      BOOST_TEST(contains(header, std::string(race ? "verifier race (" : "verifier ordered (") +
                                      std::to_string(rep.races()) + " of " +
                                      std::to_string(rep.pairs.size()) + " pairs race)"),
                 header);
      races += race;
      ++chains;
    };
    while (std::getline(in, line)) {
      if (line.rfind("# ", 0) == 0) {
        check();
        header = line;
        body.clear();
      } else {
        body += line + "\n";
      }
    }
    check();
    BOOST_TEST(chains == 11); // seed-after's trigger variants (race_cells.hpp), one meta, one delay
    BOOST_TEST(races == 1);   // every kernel between routing and finalize at entry
  }
}

BOOST_AUTO_TEST_CASE(slot_comparison_names_the_first_differing_buffer) {
  chain::BatchResult a, b;
  a.slots.assign(2 * chain::kNumBuffers, 7);
  b.slots = a.slots;
  a.stale = b.stale = {0, 3};
  a.recorded = b.recorded = {32, 32};
  b.slots[1 * chain::kNumBuffers + static_cast<int>(chain::Buffer::kOut)] = 8;
  b.slots[1 * chain::kNumBuffers + static_cast<int>(chain::Buffer::kGemm2Out)] = 9;
  BOOST_TEST(chain_run::first_difference(a, b, 0) == -1);
  BOOST_TEST(chain_run::first_difference(a, b, 1) == static_cast<int>(chain::Buffer::kGemm2Out));
  chain_run::Series s;
  chain_run::add_batch(s, a, b, {11, 22});
  BOOST_TEST(s.mismatches == 1);
  BOOST_TEST(s.first_seed == 22u);
  BOOST_TEST(s.stale == 3);
  BOOST_TEST(s.stale_iterations == 1);
  BOOST_TEST(s.recorded == 64);
  BOOST_TEST(chain_run::parse_seed("--replay", "0x10") == 16u);
  BOOST_CHECK_THROW(chain_run::parse_seed("--replay", "-3"), InputError);
  std::uint16_t const x[2] = {0x3f80, 0x4000}, y[2] = {0x3f80, 0x4001};
  BOOST_TEST(chain_run::max_rel_err(x, y, 2) > 0.0);
  BOOST_TEST(chain_run::max_rel_err(x, y, 2) < 0.01);
  std::uint16_t const nan[2] = {0x7fc1, 0x4000};
  BOOST_TEST(std::isinf(chain_run::max_rel_err(nan, y, 2)));
}

// A new file takes the flavour asked for (the released chain's first GPU run was refused here:
// a file without the attribute was read as moefin's); a resumed file keeps its own, and one that
// predates the attribute is moefin's.
BOOST_AUTO_TEST_CASE(a_new_file_takes_the_flavour_and_a_resumed_one_keeps_its_own) {
  TempDir d;
  {
    auto f = h5::ResultWriter::open(d.file("released.h5"), "", 5);
    BOOST_TEST(!f.resumed());
    chain_run::record_flavour("released", f);
    f.commit();
  }
  {
    auto f = h5::ResultWriter::open("", d.file("released.h5"), 5);
    BOOST_TEST(f.resumed());
    BOOST_CHECK_THROW(chain_run::record_flavour("moefin", f), InputError);
  }
  {
    auto f = h5::ResultWriter::open("", d.file("released.h5"), 5);
    chain_run::record_flavour("released", f);
    f.commit();
  }
  BOOST_TEST(h5::ResultReader(d.file("released.h5")).provenance().at("flavour") == "released");
  {
    h5::ResultWriter::create(d.file("old.h5"), h5::collect_provenance(1)); // no flavour attribute
  }
  auto f = h5::ResultWriter::open("", d.file("old.h5"), 5);
  BOOST_CHECK_THROW(chain_run::record_flavour("released", f), InputError);
  chain_run::record_flavour("moefin", f);
}

BOOST_AUTO_TEST_CASE(a_sweep_of_weight_formats_prints_them_side_by_side_with_the_peer) {
  TempDir d;
  write_layer_file(d.file("formats.h5"), {"bf16", "fp4"});
  write_layer_file(d.file("plain.h5"));
  {
    // A peer file: rows of finalize torch (as experiments/chain/peers_layer_torch.py writes).
    auto f = h5::ResultWriter::create(d.file("peer.h5"), h5::collect_provenance(1));
    auto t = f.table("layer_sweep", chain_tables::layer_columns());
    h5::Row r;
    r.set("shape", "H2048/I1280/E512/top-22/relu2")
        .set("T", 1)
        .set("finalize", "torch")
        .set("placement", "none")
        .set("finalize_kernel", "grouped_mm")
        .set("median_us", 432.1)
        .set("weights_format", "bf16")
        .set("activation", "relu2")
        .set("rounds", 5);
    for (char const* c : {"H", "I", "E", "K", "tile_m", "layers"})
      r.set(c, std::int64_t{0});
    for (char const* c : {"min_us", "q1_us", "q3_us", "max_us", "speedup_finalize",
                          "speedup_finalize_lo", "speedup_finalize_hi", "speedup_placement",
                          "speedup_placement_lo", "speedup_placement_hi"})
      r.set(c, 432.1);
    t.append("peer", r, {432.1});
  }
  auto const table = [](std::string const& path) {
    return h5::ResultReader(path).read_table("layer_sweep");
  };
  h5::Table const peers = table(d.file("peer.h5"));
  std::ostringstream os;
  chain_tables::print_layer_tables(table(d.file("formats.h5")), published(), "NVIDIA B200", os,
                                   &peers);
  std::string const s = os.str();
  BOOST_TEST(contains(s, "(seed-after placement, PDL on, bf16 weights)"));
  BOOST_TEST(contains(s, "(seed-after placement, PDL on, fp4 weights)"));
  BOOST_TEST(contains(s, "by weights format, and the PyTorch peer"));
  // T = 1: new finalize, seed-after: 100 / 1.05 / 1.02 us (bf16), half of it (fp4), the peer.
  BOOST_TEST(contains(s, "93.37       46.69       432.10"), s);
  BOOST_TEST(contains(s, "torch grouped_mm"));
  // A file of one format (or written before the column) keeps the tables it always had.
  std::ostringstream plain;
  chain_tables::print_layer_tables(table(d.file("plain.h5")), published(), "NVIDIA B200", plain);
  BOOST_TEST(!contains(plain.str(), "by weights format"));
  BOOST_TEST(!contains(plain.str(), "weights)"));
}
