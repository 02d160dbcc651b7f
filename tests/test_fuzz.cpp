// The fuzz corpus: hostile inputs generated from one seed (MOEFIN_FUZZ_SEED, default below) and
// run through the moefin binary of this build. Three families:
//   chain JSON  mutants of the shipped chains (data/chains) and inputs past every limit, through
//               `moefin verify` and `moefin simulate`;
//   HDF5        mutants of the committed result files (data/h200) and of files moefin writes
//               here (a routing, a reference finalize, a timeline), through `moefin show` and
//               the command that prints each file's tables;
//   CLI values  every option of every command given values out of its range or of its type,
//               stray words and unknown flags, without a GPU.
// Each case asserts: no crash and no sanitizer report, the exit status its class allows, and an
// error that is one line naming the file or the flag. The counts are printed; each must be 0.

#define BOOST_TEST_MODULE fuzz
#include <boost/test/unit_test.hpp>

#include "core/pdl/chain.hpp"
#include "core/rng.hpp"
#include "tests/hostile.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>

namespace fs = std::filesystem;
using namespace moefin;
using test::Outcome;

namespace {

std::uint64_t fuzz_seed() {
  if (char const* s = std::getenv("MOEFIN_FUZZ_SEED"); s && *s)
    return std::strtoull(s, nullptr, 0);
  return 20261203;
}

std::string const kSource = MOEFIN_SOURCE_DIR;

/// What one case allows: exit statuses, and the text its one-line error must contain.
struct Expect {
  std::set<int> status;
  std::string names;             // the file or the flag every error line must contain
  std::string says;              // a phrase the error must contain ("" = any)
  std::string stdout_says;       // for a successful run: a phrase its stdout must contain
  std::set<int> errors = {1, 2}; // statuses that are errors (verify and simulate: 1 is a race)
};

struct Stats {
  std::string family;
  int cases = 0, crashes = 0, sanitizer = 0, wrong_status = 0, unnamed = 0, not_one_line = 0,
      hangs = 0, wrong_text = 0;
  std::map<int, int> by_status;
  std::vector<std::string> failures; // the first few, for the log

  void fail(std::string const& what) {
    if (failures.size() < 12)
      failures.push_back(what);
  }
  void print() const {
    std::printf("[fuzz] %s: %d cases (exit 0: %d, 1: %d, 2: %d); crashes: %d, sanitizer "
                "reports: %d, hangs: %d, wrong exit codes: %d, errors not naming the file or "
                "flag: %d, errors on more than one line: %d, wrong messages: %d\n",
                family.c_str(), cases, by_status.count(0) ? by_status.at(0) : 0,
                by_status.count(1) ? by_status.at(1) : 0, by_status.count(2) ? by_status.at(2) : 0,
                crashes, sanitizer, hangs, wrong_status, unnamed, not_one_line, wrong_text);
    for (auto const& f : failures)
      std::printf("[fuzz]   %s\n", f.c_str());
    std::fflush(stdout);
  }
  void check() const {
    BOOST_TEST(crashes == 0);
    BOOST_TEST(sanitizer == 0);
    BOOST_TEST(hangs == 0);
    BOOST_TEST(wrong_status == 0);
    BOOST_TEST(unnamed == 0);
    BOOST_TEST(not_one_line == 0);
    BOOST_TEST(wrong_text == 0);
  }
};

Stats* g_total = nullptr; // the sum of every family, printed by the last case

std::string shorten(std::string s, std::size_t n = 160) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20)
      c = ' ';
  return s.size() > n ? s.substr(0, n) + "..." : s;
}

/// Runs moefin with `args` in `dir` and checks the outcome against `e`.
void run_case(Stats& st, test::ScratchDir const& dir, std::vector<std::string> args,
              Expect const& e, double timeout_s = 60) {
  args.insert(args.begin(), test::moefin_binary());
  Outcome const o = test::run(args, dir.file("case"), timeout_s);
  std::string label;
  for (std::size_t i = 1; i < args.size(); ++i)
    label += (i > 1 ? " " : "") + shorten(args[i], 40);
  ++st.cases;
  ++st.by_status[o.signal ? 128 + o.signal : o.status];
  auto fail = [&](int& counter, std::string const& why) {
    ++counter;
    st.fail(why + ": moefin " + label + " -> " + shorten(o.err.empty() ? o.out : o.err));
  };
  if (o.timed_out)
    return fail(st.hangs, "hang");
  if (o.sanitizer_report())
    return fail(st.sanitizer, "sanitizer report");
  if (o.crashed())
    return fail(st.crashes, "crash (signal " + std::to_string(o.signal) + ")");
  if (!e.status.count(o.status))
    return fail(st.wrong_status, "exit " + std::to_string(o.status));
  if (e.errors.count(o.status)) {
    if (o.lines_of_err() != 1)
      return fail(st.not_one_line, std::to_string(o.lines_of_err()) + " error lines");
    if (o.err.size() > 600)
      return fail(st.not_one_line, "an error line of " + std::to_string(o.err.size()) + " bytes");
    if (!e.names.empty() && o.err.find(e.names) == std::string::npos)
      return fail(st.unnamed, "error without '" + shorten(e.names, 60) + "'");
    if (!e.says.empty() && o.err.find(e.says) == std::string::npos)
      return fail(st.wrong_text, "error without '" + e.says + "'");
  } else if (!e.stdout_says.empty() && o.out.find(e.stdout_says) == std::string::npos) {
    return fail(st.wrong_text, "output without '" + e.stdout_says + "'");
  }
}

void finish(Stats const& st) {
  st.print();
  if (g_total) {
    g_total->cases += st.cases;
    g_total->crashes += st.crashes;
    g_total->sanitizer += st.sanitizer;
    g_total->hangs += st.hangs;
    g_total->wrong_status += st.wrong_status;
    g_total->unnamed += st.unnamed;
    g_total->not_one_line += st.not_one_line;
    g_total->wrong_text += st.wrong_text;
    for (auto const& [k, v] : st.by_status)
      g_total->by_status[k] += v;
  }
  st.check();
}

struct TotalFixture {
  Stats total{"all families"};
  TotalFixture() { g_total = &total; }
  ~TotalFixture() {
    std::printf("[fuzz] seed %llu\n", static_cast<unsigned long long>(fuzz_seed()));
    total.print();
    g_total = nullptr;
  }
};
BOOST_TEST_GLOBAL_FIXTURE(TotalFixture);

void write(std::string const& path, std::string const& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::vector<fs::path> files_in(std::string const& dir, std::string const& ext) {
  std::vector<fs::path> out;
  for (auto const& e : fs::directory_iterator(dir))
    if (e.path().extension() == ext)
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Chain JSON

/// Byte positions of the numbers and the strings of a JSON text (a cheap tokenizer: mutants
/// replace one token by a hostile one).
struct Tokens {
  std::vector<std::pair<std::size_t, std::size_t>> numbers, strings; // [begin, end)
};

Tokens tokenize(std::string const& s) {
  Tokens t;
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '"') {
      std::size_t j = i + 1;
      while (j < s.size() && s[j] != '"')
        j += s[j] == '\\' ? 2 : 1;
      t.strings.push_back({i, std::min(j + 1, s.size())});
      i = j + 1;
    } else if (s[i] == '-' || (s[i] >= '0' && s[i] <= '9')) {
      std::size_t j = i + 1;
      while (j < s.size() && std::strchr("0123456789.eE+-", s[j]))
        ++j;
      t.numbers.push_back({i, j});
      i = j;
    } else {
      ++i;
    }
  }
  return t;
}

std::string const kHostileNumbers[] = {"-1",
                                       "0",
                                       "1e400",
                                       "-1e400",
                                       "1e308",
                                       "18446744073709551616",
                                       "9223372036854775807",
                                       "1.5",
                                       "2147483648",
                                       "-9223372036854775809",
                                       "17",
                                       "1025",
                                       "1024",
                                       "33",
                                       "65",
                                       "NaN",
                                       "Infinity",
                                       "1e-400",
                                       "0.0",
                                       "-0"};

std::string hostile_string(Rng& rng) {
  switch (rng.below(9)) {
  case 0:
    return "\"\"";
  case 1:
    return "\"" + std::string(100000, 'a') + "\"";
  case 2:
    return "\"\\u0000\"";
  case 3:
    return "\"read\"";
  case 4:
    return "\"write nowhere\"";
  case 5:
    return "\"fence\"";
  case 6:
    return "\"\xff\xfe\"";
  case 7:
    return "\"a/b~c\"";
  default:
    return "\"" + std::string(70, 'k') + "\"";
  }
}

std::string mutate_chain(std::string s, Rng& rng) {
  Tokens const t = tokenize(s);
  switch (rng.below(8)) {
  case 0: { // flip bytes
    int const n = 1 + static_cast<int>(rng.below(4));
    for (int i = 0; i < n && !s.empty(); ++i)
      s[rng.below(s.size())] = static_cast<char>(rng.below(256));
    return s;
  }
  case 1: { // delete a span
    if (s.size() < 2)
      return s;
    std::size_t const a = rng.below(s.size()),
                      n = 1 + rng.below(std::min<std::size_t>(64, s.size() - a));
    return s.erase(a, n);
  }
  case 2: { // duplicate a span
    std::size_t const a = rng.below(s.size()),
                      n = 1 + rng.below(std::min<std::size_t>(64, s.size() - a));
    return s.insert(a, s.substr(a, n));
  }
  case 3:
  case 4: { // a hostile number
    if (t.numbers.empty())
      return s + "1";
    auto const [a, b] = t.numbers[rng.below(t.numbers.size())];
    std::size_t const k = rng.below(sizeof(kHostileNumbers) / sizeof(kHostileNumbers[0]));
    return s.replace(a, b - a, kHostileNumbers[k]);
  }
  case 5: { // a hostile string
    auto const [a, b] = t.strings[rng.below(t.strings.size())];
    return s.replace(a, b - a, hostile_string(rng));
  }
  case 6: { // a duplicated key in the first object
    std::size_t const brace = s.find('{');
    return s.insert(brace + 1, "\"name\": \"again\", ");
  }
  default: { // a number where a string is, or the reverse
    if (!t.strings.empty() && rng.below(2)) {
      auto const [a, b] = t.strings[rng.below(t.strings.size())];
      return s.replace(a, b - a, "12");
    }
    if (t.numbers.empty())
      return s;
    auto const [a, b] = t.numbers[rng.below(t.numbers.size())];
    return s.replace(a, b - a, "\"12\"");
  }
  }
}

/// A kernel entry of a generated chain.
std::string kernel_json(std::string const& name, int ctas, std::vector<std::string> const& paths) {
  std::string s =
      "{\"name\": \"" + name + "\", \"ctas\": " + std::to_string(ctas) + ", \"paths\": [";
  for (std::size_t i = 0; i < paths.size(); ++i)
    s += (i ? ", " : "") + paths[i];
  return s + "]}";
}

std::string chain_json(std::vector<std::string> const& kernels, int iterations, int buffers = 2,
                       std::string const& extra = "") {
  std::string s = "{\"name\": \"gen\", \"buffers\": {";
  for (int b = 0; b < buffers; ++b)
    s += (b ? ", " : "") + std::string("\"b") + std::to_string(b) + "\": \"x\"";
  s += "}, \"iterations\": " + std::to_string(iterations) + extra + ", \"kernels\": [";
  for (std::size_t i = 0; i < kernels.size(); ++i)
    s += (i ? ", " : "") + kernels[i];
  return s + "]}\n";
}

std::string repeat_path(std::string const& op, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i)
    s += (i ? ", " : "") + std::string("\"") + op + "\"";
  return s + "]";
}

} // namespace

BOOST_AUTO_TEST_CASE(chain_json_mutants_and_limits) {
  test::ScratchDir dir("fuzz_chain");
  Stats st{"chain JSON"};
  Rng rng(Rng::mix(fuzz_seed(), 1));
  auto const bases = files_in(kSource + "/data/chains", ".json");
  BOOST_REQUIRE(bases.size() >= 20u);

  // Random mutants of the shipped chains: any verdict, or a one-line error naming the file.
  int const mutants = 720;
  for (int i = 0; i < mutants; ++i) {
    std::string const base = test::slurp(bases[rng.below(bases.size())].string());
    std::string text = mutate_chain(base, rng);
    if (rng.below(4) == 0)
      text = mutate_chain(text, rng);
    std::string const f = dir.file("m" + std::to_string(i) + ".json");
    write(f, text);
    run_case(st, dir, {"verify", f, "--quiet"}, {{0, 1, 2}, f, "", "", {2}});
    if (i % 4 == 0)
      run_case(st, dir, {"simulate", f, "--schedules", "16", "--witnesses", "1"},
               {{0, 1, 2}, f, "", "", {2}});
  }

  // Inputs past each documented limit (and hostile files): exactly exit 2 naming the file.
  std::string const wait_path = "[\"wait\", \"read b0\", \"write b1\"]";
  struct Limit {
    std::string name, text, says;
  };
  std::vector<Limit> limits;
  std::string const deep = std::string(100000, '[') + std::string(100000, ']');
  limits.push_back({"deep", "{\"description\": " + deep + ", \"name\": \"x\"}", "nested deeper"});
  limits.push_back(
      {"deep9", "{\"source\": [[[[[[[[[1]]]]]]]]], \"name\": \"x\"}", "nested deeper"});
  limits.push_back({"dupkey",
                    chain_json({kernel_json("a", 2, {wait_path})}, 1, 2, ", \"iterations\": 2"),
                    "duplicate key 'iterations'"});
  {
    std::string t = chain_json({kernel_json("a", 2, {wait_path})}, 1);
    t.replace(t.find("\"iterations\": 1"), 15, "\"iterations\": 1e400");
    limits.push_back({"iter1e400", t, "number out of range"});
    std::string u = chain_json({kernel_json("a", 2, {wait_path})}, 1);
    u.replace(u.find("\"iterations\": 1"), 15, "\"iterations\": 18446744073709551615");
    limits.push_back({"iterhuge", u, "out of range"});
  }
  limits.push_back({"iter17", chain_json({kernel_json("a", 2, {wait_path})}, 17), "out of range"});
  limits.push_back({"ctas", chain_json({kernel_json("a", 1025, {wait_path})}, 1), "out of range"});
  {
    std::vector<std::string> many;
    for (int k = 0; k < 2000; ++k)
      many.push_back(kernel_json("k" + std::to_string(k), 1, {wait_path}));
    limits.push_back({"kernels2000", chain_json(many, 1), "array with more than"});
    many.resize(33);
    limits.push_back({"kernels33", chain_json(many, 1), "33 kernels (at most 32)"});
  }
  limits.push_back(
      {"ops100000", chain_json({kernel_json("a", 1, {repeat_path("wait", 100000)})}, 1), ""});
  limits.push_back({"ops33", chain_json({kernel_json("a", 1, {repeat_path("wait", 33)})}, 1),
                    "33 ops (at most 32)"});
  {
    std::vector<std::string> paths(17, wait_path);
    limits.push_back({"paths17", chain_json({kernel_json("a", 1, paths)}, 1), "17 paths"});
    std::vector<std::string> ks;
    for (int k = 0; k < 17; ++k)
      ks.push_back(kernel_json("k" + std::to_string(k), 1, {repeat_path("write b0", 32)}));
    limits.push_back({"totalops", chain_json(ks, 1), "more than 512 ops"});
    std::vector<std::string> inst(9, "");
    for (int k = 0; k < 9; ++k)
      inst[k] = kernel_json("k" + std::to_string(k), 1, {wait_path});
    limits.push_back({"instances", chain_json(inst, 16), "kernel instances (at most 128)"});
    std::vector<std::string> writers;
    for (int k = 0; k < 8; ++k)
      writers.push_back(kernel_json("w" + std::to_string(k), 1,
                                    {repeat_path("write b0", 32), repeat_path("write b0", 32)}));
    limits.push_back({"pairs", chain_json(writers, 16), "pairs of conflicting accesses"});
    std::vector<std::string> wide;
    for (int k = 0; k < 8; ++k)
      wide.push_back(kernel_json("w" + std::to_string(k), 1024, {repeat_path("wait", 32)}));
    limits.push_back({"events", chain_json(wide, 16), "events in one simulated schedule"});
    std::vector<std::string> readers;
    for (int k = 0; k < 4; ++k)
      readers.push_back(kernel_json("r" + std::to_string(k), 1024, {"[\"read b0\", \"wait\"]"}));
    limits.push_back({"accesses", chain_json(readers, 4), "reads and writes in one simulated"});
    limits.push_back(
        {"buffers", chain_json({kernel_json("a", 1, {wait_path})}, 1, 33), "33 buffers"});
  }
  limits.push_back(
      {"bigfile", std::string(pdl::ChainLimits::kFileBytes + 10, ' ') + "{}", "larger than"});
  limits.push_back({"empty", "", "invalid JSON"});
  limits.push_back({"nul", std::string("{\"name\": \"a\0b\"}", 15), "invalid JSON"});
  limits.push_back({"utf8", "{\"name\": \"\xc3\x28\"}", "invalid JSON"});
  for (auto const& l : limits) {
    std::string const f = dir.file(l.name + ".json");
    write(f, l.text);
    run_case(st, dir, {"verify", f}, {{2}, f, l.says, ""});
    run_case(st, dir, {"simulate", f, "--schedules", "4"}, {{2}, f, l.says, ""});
  }
  for (std::string const f :
       {std::string("/dev/zero"), dir.path.string(), dir.file("absent.json")}) {
    run_case(st, dir, {"verify", f}, {{2}, f, "", ""});
    run_case(st, dir, {"simulate", f}, {{2}, f, "", ""});
  }

  // Within the limits but with a witness bound past any count: 15 kernels of 8 paths, 8
  // iterations. The bound saturates (never negative, never 0 schedules); auto refuses it.
  {
    std::vector<std::string> ks;
    std::vector<std::string> const paths = {"[\"trigger\", \"read b0\", \"wait\"]",
                                            "[\"wait\", \"write b0\"]",
                                            "[\"wait\"]",
                                            "[\"trigger\", \"wait\"]",
                                            "[\"wait\", \"trigger\"]",
                                            "[\"read b1\", \"wait\"]",
                                            "[\"wait\", \"read b1\"]",
                                            "[\"fence gpu\", \"wait\"]"};
    for (int k = 0; k < 15; ++k)
      ks.push_back(kernel_json("k" + std::to_string(k), 2, paths));
    std::string const f = dir.file("bound.json");
    write(f, chain_json(ks, 8));
    run_case(st, dir, {"simulate", f}, {{2}, f, "exceeds", ""});
    run_case(st, dir, {"simulate", f, "--schedules", "3", "--witnesses", "0"},
             {{0, 1}, f, "", "is more than", {2}});
    Outcome const o =
        test::run({test::moefin_binary(), "simulate", f, "--schedules", "3"}, dir.file("bound"));
    BOOST_TEST(o.out.find("simulated 3 schedules") != std::string::npos, o.out);
    std::string const bound_line =
        o.out.substr(o.out.find("witness bound:"),
                     o.out.find('\n', o.out.find("witness bound:")) - o.out.find("witness bound:"));
    bool negative = false;
    for (std::size_t p = bound_line.find('-'); p != std::string::npos;
         p = bound_line.find('-', p + 1))
      negative = negative || (p + 1 < bound_line.size() && std::isdigit(bound_line[p + 1]) &&
                              (p == 0 || bound_line[p - 1] == ' '));
    BOOST_TEST(!negative, "no negative count: " << bound_line);
  }
  finish(st);
}

// ---------------------------------------------------------------------------------------------
// HDF5

namespace {

/// An open HDF5 file of a mutant, closed at the end of the scope.
struct H5 {
  hid_t id = -1;
  explicit H5(std::string const& path) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    id = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  }
  ~H5() {
    if (id >= 0)
      H5Fclose(id);
  }
  bool ok() const { return id >= 0; }
};

void put_str_attr(hid_t obj, char const* name, std::string const& value, bool vlen = true) {
  H5Adelete(obj, name);
  hid_t t = H5Tcopy(H5T_C_S1);
  if (vlen)
    H5Tset_size(t, H5T_VARIABLE);
  else
    H5Tset_size(t, value.size() + 1);
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
  if (vlen) {
    char const* p = value.c_str();
    H5Awrite(a, t, &p);
  } else {
    H5Awrite(a, t, value.c_str());
  }
  H5Aclose(a);
  H5Sclose(sp);
  H5Tclose(t);
}

/// Root attribute `name` as an array of two strings (h5py's attrs[name] = [a, b]).
void put_str_array_attr(hid_t obj, char const* name) {
  H5Adelete(obj, name);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  hsize_t dims[1] = {2};
  hid_t sp = H5Screate_simple(1, dims, nullptr);
  hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
  char const* v[2] = {"moefin-results/1", "moefin-results/1"};
  H5Awrite(a, t, v);
  H5Aclose(a);
  H5Sclose(sp);
  H5Tclose(t);
}

void put_int_array_attr(hid_t obj, char const* name) {
  H5Adelete(obj, name);
  hsize_t dims[1] = {3};
  hid_t sp = H5Screate_simple(1, dims, nullptr);
  hid_t a = H5Acreate2(obj, name, H5T_NATIVE_INT32, sp, H5P_DEFAULT, H5P_DEFAULT);
  int v[3] = {9, 0, 0};
  H5Awrite(a, H5T_NATIVE_INT32, v);
  H5Aclose(a);
  H5Sclose(sp);
}

void put_compound_attr(hid_t obj, char const* name) {
  H5Adelete(obj, name);
  hid_t t = H5Tcreate(H5T_COMPOUND, 16);
  H5Tinsert(t, "a", 0, H5T_NATIVE_INT64);
  H5Tinsert(t, "b", 8, H5T_NATIVE_DOUBLE);
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
  char buf[16] = {};
  H5Awrite(a, t, buf);
  H5Aclose(a);
  H5Sclose(sp);
  H5Tclose(t);
}

bool set_extent(hid_t f, std::string const& dset, hsize_t n) {
  hid_t d = H5Dopen2(f, dset.c_str(), H5P_DEFAULT);
  if (d < 0)
    return false;
  hsize_t dims[1] = {n};
  herr_t const rc = H5Dset_extent(d, dims);
  H5Dclose(d);
  return rc >= 0;
}

/// Rewrites one member of rows `rows` of a compound table through a callback on its bytes.
bool edit_rows(hid_t f, std::string const& dset, char const* member,
               std::function<void(std::vector<char>&, std::size_t row, std::size_t off,
                                  std::size_t size, std::size_t row_bytes)> const& fn) {
  hid_t d = H5Dopen2(f, dset.c_str(), H5P_DEFAULT);
  if (d < 0)
    return false;
  hid_t t = H5Dget_type(d);
  hid_t sp = H5Dget_space(d);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(sp, &n, nullptr);
  int const idx = H5Tget_member_index(t, member);
  bool ok = idx >= 0 && n >= 2;
  if (ok) {
    std::size_t const rb = H5Tget_size(t),
                      off = H5Tget_member_offset(t, static_cast<unsigned>(idx));
    hid_t mt = H5Tget_member_type(t, static_cast<unsigned>(idx));
    std::size_t const size = H5Tget_size(mt);
    H5Tclose(mt);
    std::vector<char> buf(rb * n);
    ok = H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) >= 0;
    if (ok) {
      fn(buf, 0, off, size, rb);
      ok = H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) >= 0;
    }
  }
  H5Sclose(sp);
  H5Tclose(t);
  H5Dclose(d);
  return ok;
}

/// Groups of kind table in a file (read before mutating, through plain HDF5 calls).
std::vector<std::string> table_groups(std::string const& path) {
  std::vector<std::string> out;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0)
    return out;
  hsize_t n = 0;
  H5G_info_t info;
  if (H5Gget_info(f, &info) >= 0)
    n = info.nlinks;
  for (hsize_t i = 0; i < n; ++i) {
    char name[256] = {};
    if (H5Lget_name_by_idx(f, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) <
        0)
      continue;
    std::string const table = std::string(name) + "/table";
    if (H5Lexists(f, name, H5P_DEFAULT) > 0 && H5Lexists(f, table.c_str(), H5P_DEFAULT) > 0)
      out.push_back(name);
  }
  H5Fclose(f);
  return out;
}

/// The command that prints a file's experiment table, by the table it holds (a routing file:
/// the reference finalize that reads it; a timeline: show).
std::vector<std::string> printer(std::vector<std::string> const& tables, std::string const& f,
                                 std::string const& scratch, bool routing) {
  auto has = [&](char const* t) { return std::count(tables.begin(), tables.end(), t) > 0; };
  if (has("race_matrix"))
    return {"race", "--print", f};
  if (has("equivalence"))
    return {"equivalence", "--print", f};
  if (has("layer_sweep"))
    return {"sweep", "layer", "--print", f};
  if (has("finalize_sweep"))
    return {"sweep", "finalize", "--print", f};
  if (routing)
    return {"reference", "finalize",    "--routing", f,      "--hidden",
            "16",        "--overwrite", "--out",     scratch};
  if (tables.empty())
    return {"show", f};
  return {"show", f, "--table", tables[0]};
}

struct Mutation {
  std::string name;
  std::function<bool(hid_t, std::vector<std::string> const& tables)> apply;
  std::set<int> show_status; // what `moefin show` must give (1: rejected)
  std::string says;          // the phrase of the rejection
  /// Whether every reader must refuse the file (a root attribute or the state is bad), or only
  /// those that read the damaged object (`moefin show` reads all of them).
  bool every_reader() const {
    return name.rfind("schema", 0) == 0 || name.rfind("arch", 0) == 0 ||
           name.rfind("attr_not", 0) == 0 || name.rfind("seed", 0) == 0 ||
           name.rfind("state", 0) == 0;
  }
};

std::vector<Mutation> structured_mutations() {
  auto first_table = [](std::vector<std::string> const& t) {
    return t.empty() ? std::string() : t[0];
  };
  return {
      {"schema_array",
       [](hid_t f, auto const&) {
         put_str_array_attr(f, "moefin_schema");
         return true;
       },
       {1},
       "is an array of 2 values"},
      {"arch_ints",
       [](hid_t f, auto const&) {
         put_int_array_attr(f, "arch");
         return true;
       },
       {1},
       "is an array of 3 values"},
      {"seed_compound",
       [](hid_t f, auto const&) {
         put_compound_attr(f, "seed");
         return true;
       },
       {1},
       "neither a string nor a number"},
      {"attr_not_utf8",
       [](hid_t f, auto const&) {
         put_str_attr(f, "host", "\xff\xfe\x01host");
         return true;
       },
       {1},
       "is not valid UTF-8"},
      {"attr_fixed_string",
       [](hid_t f, auto const&) {
         put_str_attr(f, "host", "fixed", false);
         return true;
       },
       {0},
       ""},
      {"state_incomplete",
       [](hid_t f, auto const&) {
         put_str_attr(f, "moefin_state", "incomplete");
         return true;
       },
       {1},
       "incomplete"},
      {"state_unknown",
       [](hid_t f, auto const&) {
         put_str_attr(f, "moefin_state", "banana");
         return true;
       },
       {1},
       "unknown moefin_state"},
      {"soft_loop",
       [](hid_t f, auto const&) {
         return H5Lcreate_soft("/zz_loop", f, "zz_loop", H5P_DEFAULT, H5P_DEFAULT) >= 0;
       },
       {1},
       "soft link"},
      {"external",
       [](hid_t f, auto const&) {
         return H5Lcreate_external("/etc/hostname", "/", f, "zz_ext", H5P_DEFAULT, H5P_DEFAULT) >=
                0;
       },
       {1},
       "external link"},
      {"rows_1e12",
       [first_table](hid_t f, auto const& t) {
         return !t.empty() && set_extent(f, first_table(t) + "/table", 1000000000000ull);
       },
       {1},
       "claims 1000000000000 elements"},
      {"samples_1e12",
       [first_table](hid_t f, auto const& t) {
         return !t.empty() && set_extent(f, first_table(t) + "/samples", 1000000000000ull);
       },
       {1},
       "claims 1000000000000 elements"},
      {"offset_past",
       [first_table](hid_t f, auto const& t) {
         return !t.empty() &&
                edit_rows(f, first_table(t) + "/table", "sample_offset",
                          [](auto& b, std::size_t, std::size_t off, std::size_t, std::size_t) {
                            std::int64_t const v = std::int64_t(1) << 40;
                            std::memcpy(b.data() + off, &v, 8);
                          });
       },
       {1},
       "outside the"},
      {"count_negative",
       [first_table](hid_t f, auto const& t) {
         return !t.empty() &&
                edit_rows(f, first_table(t) + "/table", "sample_count",
                          [](auto& b, std::size_t, std::size_t off, std::size_t, std::size_t) {
                            std::int64_t const v = -5;
                            std::memcpy(b.data() + off, &v, 8);
                          });
       },
       {1},
       "outside the"},
      {"duplicate_key",
       [first_table](hid_t f, auto const& t) {
         return !t.empty() && edit_rows(f, first_table(t) + "/table", "key",
                                        [](auto& b, std::size_t, std::size_t off, std::size_t size,
                                           std::size_t rb) {
                                          std::memcpy(b.data() + rb + off, b.data() + off, size);
                                        });
       },
       {1},
       "duplicate key"},
      {"kind_unknown",
       [first_table](hid_t f, auto const& t) {
         if (t.empty())
           return false;
         hid_t g = H5Gopen2(f, first_table(t).c_str(), H5P_DEFAULT);
         put_str_attr(g, "kind", "banana");
         H5Gclose(g);
         return true;
       },
       {1},
       "has kind 'banana'"},
      {"zero_rows",
       [first_table](hid_t f, auto const& t) {
         return !t.empty() && set_extent(f, first_table(t) + "/table", 0);
       },
       {0},
       ""},
  };
}

/// Positions of HDF5 metadata in a file (signatures of B-trees, heaps, symbol nodes), where a
/// flipped byte does damage rather than change a number.
std::vector<std::size_t> metadata_positions(std::string const& bytes) {
  std::vector<std::size_t> pos;
  for (char const* sig : {"TREE", "HEAP", "SNOD", "FRHP", "FHDB", "FHIB", "BTHD", "BTLF", "GCOL",
                          "OHDR", "OCHK", "\x89HDF"}) {
    for (std::size_t p = bytes.find(sig); p != std::string::npos; p = bytes.find(sig, p + 1))
      pos.push_back(p);
  }
  return pos;
}

} // namespace

BOOST_AUTO_TEST_CASE(hdf5_mutants_of_the_committed_files) {
  test::ScratchDir dir("fuzz_h5");
  Stats st{"HDF5"};
  Rng rng(Rng::mix(fuzz_seed(), 2));
  std::vector<std::string> bases;
  for (auto const& p : files_in(kSource + "/data/h200", ".h5"))
    bases.push_back(p.string());
  BOOST_REQUIRE(bases.size() >= 5u);
  // Files of the host writers too: a routing, a reference finalize, a timeline.
  std::string const route = dir.file("route.h5"), ref = dir.file("ref.h5"), tl = dir.file("tl.h5");
  for (auto const& args : std::vector<std::vector<std::string>>{
           {"route", "--tokens", "64", "--out", route},
           {"reference", "finalize", "--hidden", "64", "--tokens", "8", "--out", ref},
           {"simulate", kSource + "/data/chains/h200_direct.json", "--schedules", "4", "--timeline",
            tl}}) {
    std::vector<std::string> a = args;
    a.insert(a.begin(), test::moefin_binary());
    Outcome const o = test::run(a, dir.file("make"));
    BOOST_REQUIRE_MESSAGE(o.status == 0 || o.status == 1, o.err);
  }
  bases.insert(bases.end(), {route, ref, tl});
  std::string const scratch_out = dir.file("scratch_out.h5");

  auto is_routing = [&](std::string const& b) { return b == route || b == ref; };
  // The unmutated files read cleanly.
  for (auto const& b : bases) {
    run_case(st, dir, {"show", b}, {{0}, b, "", ""});
    auto const tables = table_groups(b);
    run_case(st, dir, printer(tables, b, scratch_out, is_routing(b)), {{0}, b, "", ""});
  }

  // Structured mutants: each rejected with the file named (zero rows: shown, and refused by the
  // command that prints the table).
  int n = 0;
  for (auto const& b : bases) {
    auto const tables = table_groups(b);
    for (auto const& m : structured_mutations()) {
      std::string const f = dir.file("s" + std::to_string(n++) + "_" + m.name + ".h5");
      fs::copy_file(b, f, fs::copy_options::overwrite_existing);
      bool applied = false;
      {
        H5 h(f);
        applied = h.ok() && m.apply(h.id, tables);
      }
      if (!applied)
        continue;
      run_case(st, dir, {"show", f}, {m.show_status, f, m.says, ""});
      auto const pr = printer(tables, f, scratch_out, is_routing(b));
      if (m.every_reader())
        run_case(st, dir, pr, {{1}, f, m.says, ""});
      else
        run_case(st, dir, pr, {{0, 1}, f, "", ""});
    }
  }

  // The table a printing command reads: without rows (race --print and sweep finalize --print
  // refuse it; the others print an empty table), and, in /race_matrix, a preset the mapping does
  // not know (a fault of the file: exit 1 naming it, not a usage error).
  for (auto const& b : bases) {
    auto const tables = table_groups(b);
    auto const pr = printer(tables, b, scratch_out, is_routing(b));
    std::string const printed = pr[0] == "race"                           ? "race_matrix"
                                : pr[0] == "equivalence"                  ? "equivalence"
                                : pr[1] == "layer"                        ? "layer_sweep"
                                : pr[1] == "finalize" && pr[0] == "sweep" ? "finalize_sweep"
                                                                          : "";
    if (printed.empty())
      continue;
    std::string const f = dir.file("p" + std::to_string(n++) + "_empty.h5");
    fs::copy_file(b, f, fs::copy_options::overwrite_existing);
    {
      H5 h(f);
      BOOST_REQUIRE(h.ok() && set_extent(h.id, printed + "/table", 0));
    }
    auto const pf = printer(tables, f, scratch_out, false);
    bool const refuses = printed == "race_matrix" || printed == "finalize_sweep";
    run_case(st, dir, pf,
             {refuses ? std::set<int>{1} : std::set<int>{0}, f, refuses ? "rows" : "", ""});
    if (printed == "race_matrix") {
      std::string const g = dir.file("p" + std::to_string(n++) + "_preset.h5");
      fs::copy_file(b, g, fs::copy_options::overwrite_existing);
      {
        H5 h(g);
        BOOST_REQUIRE(h.ok() && edit_rows(h.id, "race_matrix/table", "preset",
                                          [](auto& buf, std::size_t, std::size_t off,
                                             std::size_t size, std::size_t) {
                                            std::memset(buf.data() + off, 0, size);
                                            std::memcpy(buf.data() + off, "garbage", 7);
                                          }));
        // A row whose verdict is computed from its columns (files written before the column).
        BOOST_REQUIRE(
            edit_rows(h.id, "race_matrix/table", "verifier",
                      [](auto& buf, std::size_t, std::size_t off, std::size_t size, std::size_t) {
                        std::memset(buf.data() + off, 0, size);
                        std::memcpy(buf.data() + off, "unknown", 7);
                      }));
      }
      run_case(st, dir, printer(tables, g, scratch_out, false), {{1}, g, "preset 'garbage'", ""});
    }
  }

  // Random mutants: bytes flipped (mostly around metadata) or the file cut short. Any of them may
  // still read (the bytes were data), or be rejected in one line naming it; nothing else.
  int const randoms = 330;
  for (int i = 0; i < randoms; ++i) {
    std::string const& b = bases[rng.below(bases.size())];
    std::string bytes = test::slurp(b);
    auto const meta = metadata_positions(bytes);
    if (rng.below(6) == 0) {
      bytes.resize(rng.below(bytes.size()));
    } else {
      int const flips = 1 + static_cast<int>(rng.below(8));
      for (int k = 0; k < flips; ++k) {
        std::size_t p = 0;
        if (!meta.empty() && rng.below(4) != 0)
          p = std::min(bytes.size() - 1, meta[rng.below(meta.size())] + rng.below(96));
        else
          p = rng.below(bytes.size());
        bytes[p] = static_cast<char>(rng.below(256));
      }
    }
    std::string const f = dir.file("r" + std::to_string(i) + ".h5");
    write(f, bytes);
    run_case(st, dir, {"show", f}, {{0, 1}, f, "", ""});
    if (i % 2 == 0)
      run_case(st, dir, printer(table_groups(b), f, scratch_out, is_routing(b)),
               {{0, 1}, f, "", ""});
  }
  finish(st);
}

// ---------------------------------------------------------------------------------------------
// CLI values

namespace {

enum class Kind { kInt, kUnsigned, kReal, kList, kChoice, kText };

struct Flag {
  std::string name;
  Kind kind;
  double lo = 0, hi = 0;          // kInt, kReal, kList: the documented range
  std::vector<std::string> extra; // values of this flag that are invalid beyond its kind's
};

struct Command {
  std::vector<std::string> words; // "sweep", "finalize"
  std::vector<std::string> base;  // arguments that make the rest of the line valid
  std::vector<Flag> flags;
  bool gpu = false;
};

std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

/// Values that no option of `f`'s kind accepts.
std::vector<std::string> bad_values(Flag const& f, Rng& rng) {
  std::vector<std::string> v = f.extra;
  std::string random;
  for (int i = 0, n = 1 + static_cast<int>(rng.below(12)); i < n; ++i)
    random += static_cast<char>(1 + rng.below(255));
  std::string const huge(100000, '7');
  switch (f.kind) {
  case Kind::kInt:
    v.insert(v.end(),
             {num(f.lo - 1), num(f.hi + 1), "abc", "", "1.5", "1e3", "0x10", "99999999999999999999",
              "9223372036854775808", huge, "7 x", "\xff\xfe", random + "q"});
    break;
  case Kind::kUnsigned:
    v.insert(v.end(), {"-1", " -1", "-0", "-18446744073709551615", "18446744073709551616", "abc",
                       "", "1.5", huge, random + "q"});
    break;
  case Kind::kReal:
    v.insert(v.end(), {num(f.lo - 1), num(f.hi * 2 + 1), "nan", "-nan", "inf", "-inf", "abc", "",
                       "1e400", huge, random + "q"});
    break;
  case Kind::kList:
    v.insert(v.end(), {num(f.lo - 1), num(f.hi + 1), "0-1000000000", "1-2000000000000", "abc", "",
                       ",", "1,,2", "5-1", "-", "1-", "99999999999999999999", huge, random + "q"});
    break;
  case Kind::kChoice:
    v.insert(v.end(),
             {"banana", "", "a\nb", std::string(100000, 'x'), "\x01\x02", "\xff", random + "q"});
    break;
  case Kind::kText:
    break;
  }
  return v;
}

std::vector<Command> command_table(std::string const& chain, std::string const& file,
                                   std::string const& out) {
  using K = Kind;
  Flag const seed{"--seed", K::kUnsigned};
  Flag const ctas{"--ctas-per-sm", K::kInt, 1, 8};
  Flag const carve{"--carveout", K::kChoice};
  std::vector<Flag> const routing = {
      {"--tokens", K::kInt, 1, 1048576},
      {"--experts", K::kInt, 1, 65536},
      {"--top-k", K::kInt, 1, 64, {"65"}},
      {"--distribution", K::kChoice},
      {"--zipf-s", K::kReal, 0, 16},
      {"--hot-expert", K::kInt, 0, 63},
      {"--score-method", K::kChoice},
      {"--drop-fraction", K::kReal, 0, 1},
      {"--local-experts",
       K::kText,
       0,
       0,
       {"5", "a:b", "1:2:3", "-1:5", "0:99999999999999999999", ":", "60:10", ""}},
      {"--tile", K::kInt, 1, 4096},
      {"--no-renormalize", K::kText, 0, 0, {"yes"}},
      seed};
  std::vector<Flag> route_flags = routing;
  route_flags.push_back({"--weights", K::kChoice, 0, 0, {"none"}});
  std::vector<Flag> ref_flags = routing;
  ref_flags.insert(ref_flags.end(),
                   {{"--hidden", K::kInt, 1, 65536},
                    {"--hidden-padded", K::kText, 0, 0, {"-1", "5", "70000", "abc", "1.5"}},
                    {"--weights", K::kChoice},
                    {"--fp8", K::kText, 0, 0, {"1"}}});
  std::vector<Flag> const grid = {{"--hidden", K::kList, 1, 1 << 20},
                                  {"--tokens", K::kList, 1, 1 << 20, {"regimes"}},
                                  {"--top-k", K::kList, 1, 64},
                                  {"--weights", K::kChoice, 0, 0, {"bf16,banana"}},
                                  {"--variants", K::kChoice, 0, 0, {"scalar,banana"}}};
  std::vector<Flag> check = grid;
  check.insert(check.end(), {{"--routings", K::kChoice, 0, 0, {"uniform,banana", "zipf/ep0"}},
                             {"--hidden-pad", K::kInt, 0, 1024},
                             {"--tolerance", K::kReal, 1e-7, 1, {"0"}},
                             {"--max-minutes", K::kReal, 0, 1e6},
                             seed});
  std::vector<Flag> sweep = grid;
  sweep.insert(sweep.end(), {{"--modes", K::kChoice, 0, 0, {"a,d"}},
                             {"--l2", K::kChoice, 0, 0, {"warm"}},
                             {"--rounds", K::kInt, 3, 1000},
                             {"--launches", K::kInt, 1, 10000},
                             {"--max-minutes", K::kReal, 0, 1e6},
                             {"--repeat-shapes", K::kInt, 0, 64},
                             seed});
  return {
      {{"info"}, {}, {{"--check", K::kText, 0, 0, {"1"}}}},
      {{"demo"}, {}, {{"--rounds", K::kInt, 3, 1000}, seed}},
      {{"show"}, {file}, {}},
      {{"route"}, {"--out", out}, route_flags},
      {{"reference", "finalize"}, {"--out", out}, ref_flags},
      {{"verify"}, {chain}, {{"--quiet", K::kText, 0, 0, {"1"}}}},
      {{"simulate"},
       {chain},
       {{"--schedules", K::kText, 0, 0, {"0", "-5", "100000001", "auto2", "abc", "", "1e3"}},
        seed,
        {"--miss", K::kReal, 0, 0.5, {"0", "0.6"}},
        {"--witnesses", K::kInt, 0, 1000},
        {"--timeline-schedule", K::kText, 0, 0, {"abc", "1.5", "99999999999999999999"}}}},
      {{"check", "finalize"}, {}, check, true},
      {{"sweep", "finalize"}, {}, sweep, true},
      {{"equivalence"},
       {},
       {{"--shapes", K::kChoice, 0, 0, {"top-8,banana", "top-9"}},
        {"--tokens", K::kList, 1, 128},
        {"--presets", K::kChoice, 0, 0, {"seed-after,banana"}},
        {"--set",
         K::kText,
         0,
         0,
         {"banana", "gemm1.trigger=banana", "=", "gemm1.delay_ns=-5", "nosuch.pdl=off",
          std::string(100000, 's')}},
        {"--delay-ns", K::kInt, 0, 1000000000},
        {"--delay-kernels", K::kChoice},
        {"--routings", K::kInt, 1, 10000000},
        {"--batch", K::kInt, 1, 4096},
        {"--tile-m", K::kText, 0, 0, {"17", "0", "abc", "256"}},
        {"--ref-checks", K::kInt, 0, 1000},
        {"--tolerance", K::kReal, 1e-6, 1},
        {"--replay", K::kText, 0, 0, {"-1", "abc", "0xZZ", "", "99999999999999999999999"}},
        {"--replay-attempts", K::kInt, 1, 10000},
        ctas,
        carve,
        seed},
       true},
      {{"race"},
       {},
       {{"--shapes", K::kChoice},
        {"--tokens", K::kInt, 1, 128},
        {"--presets", K::kChoice},
        {"--triggers", K::kChoice},
        {"--meta", K::kChoice, 0, 0, {"before,banana"}},
        {"--delay-ns", K::kList, 0, 1000000000},
        {"--delay-kernels", K::kChoice},
        {"--finalize", K::kChoice},
        {"--set", K::kText, 0, 0, {"banana", "gemm1.trigger=banana", "act.delay_ns=x"}},
        {"--iterations", K::kInt, 2, 4096},
        {"--tile-m", K::kText, 0, 0, {"17", "0", "abc"}},
        {"--launch", K::kChoice},
        ctas,
        carve,
        seed},
       true},
      {{"sweep", "layer"},
       {},
       {{"--shapes", K::kChoice},
        {"--tokens", K::kList, 1, 128},
        {"--rounds", K::kInt, 3, 1000},
        {"--layers", K::kInt, 1, 4096},
        {"--tile-m", K::kText, 0, 0, {"17", "0", "abc"}},
        {"--stamps", K::kList, 1, 128},
        ctas,
        carve,
        seed},
       true},
      {{"pdl-probe"},
       {},
       {{"--iterations", K::kInt, 2, 100000}, {"--delay-ns", K::kInt, 0, 100000000}, seed},
       true},
  };
}

} // namespace

BOOST_AUTO_TEST_CASE(cli_values_out_of_range_or_type_are_one_line_usage_errors) {
  test::ScratchDir dir("fuzz_cli");
  Stats st{"CLI values"};
  Rng rng(Rng::mix(fuzz_seed(), 3));
  std::string const chain = kSource + "/data/chains/h200_direct.json";
  std::string const file = kSource + "/data/h200/h200_pdl_probe.h5";
  std::string const out = dir.file("never_written.h5");
  for (auto const& c : command_table(chain, file, out)) {
    std::string name;
    for (auto const& w : c.words)
      name += (name.empty() ? "" : " ") + w;
    auto line = [&](std::vector<std::string> const& tail) {
      std::vector<std::string> a = c.words;
      a.insert(a.end(), c.base.begin(), c.base.end());
      a.insert(a.end(), tail.begin(), tail.end());
      return a;
    };
    for (auto const& f : c.flags)
      for (auto const& v : bad_values(f, rng)) {
        // Both spellings: "--flag value" and "--flag=value" (a leading minus needs the latter).
        bool const glued = rng.below(2) == 0 || (!v.empty() && v[0] == '-') || v.empty();
        auto const a = glued ? line({f.name + "=" + v}) : line({f.name, v});
        run_case(st, dir, a, {{2}, f.name, "", ""});
      }
    // A stray word, an unknown flag, an unknown flag of 100,000 characters.
    run_case(st, dir, line({"stray-word"}), {{2}, "stray-word", "unexpected argument", ""});
    run_case(st, dir, line({"--no-such-flag"}), {{2}, "no-such-flag", "", ""});
    run_case(st, dir, line({"--" + std::string(100000, 'z')}), {{2}, name, "", ""});
    BOOST_TEST(!fs::exists(out), name << " wrote " << out);
  }
  // Commands and groups that do not exist.
  run_case(st, dir, {"sweep", "banana"}, {{2}, "banana", "needs a subcommand", ""});
  run_case(st, dir, {std::string(100000, 'c')}, {{2}, "unknown command", "", ""});
  finish(st);
}
