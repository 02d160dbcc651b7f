// Chain descriptions: parsing, one-line errors for malformed files, and the verify / simulate
// commands' exit statuses and outputs.
#define BOOST_TEST_MODULE pdl_chain
#include <boost/test/unit_test.hpp>

#include "core/store/h5store.hpp"
#include "core/pdl/chain.hpp"
#include "tests/run_moefin.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using namespace moefin::pdl;
using moefin::test::contains;
using moefin::test::lines;
using moefin::test::run;

namespace {

char const* const kValid = R"({
  "name": "two",
  "buffers": {"data": "payload", "flag": "unused"},
  "kernels": [
    {"name": "producer", "ctas": 3, "path": ["trigger", "write data", "fence sys"]},
    {"name": "consumer", "pdl": false, "paths": [["read data", "wait", "read data"], []]}
  ],
  "iterations": 2,
  "expected": "race"
})";

std::string with(std::string text, std::string const& from, std::string const& to) {
  auto const at = text.find(from);
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, "test setup: '" << from << "' not in the text");
  return text.replace(at, from.size(), to);
}

/// The message of the ChainError that parsing `text` throws (fails the test if none).
std::string error_of(std::string const& text) {
  try {
    parse_chain(text, "bad.json");
  } catch (ChainError const& e) {
    return e.what();
  }
  BOOST_FAIL("no error for:\n" << text);
  return {};
}

std::string chains_dir() {
  return std::string(MOEFIN_SOURCE_DIR) + "/data/chains/";
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("moefin_pdl_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string file(std::string const& name, std::string const& text) const {
    std::string const p = (path / name).string();
    std::ofstream(p) << text;
    return p;
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(a_valid_description_parses_into_its_model) {
  Chain const c = parse_chain(kValid, "valid.json");
  BOOST_TEST(c.name == "two");
  BOOST_TEST(c.buffers.size() == 2u);
  BOOST_TEST(c.kernels.size() == 2u);
  BOOST_TEST(!c.graph);
  BOOST_TEST(c.iterations == 2);
  BOOST_TEST((c.expected && *c.expected == Verdict::kRace));
  Kernel const& p = c.kernels[0];
  BOOST_TEST(p.ctas == 3);
  BOOST_TEST(p.pdl);
  BOOST_TEST(p.paths.size() == 1u);
  BOOST_TEST((p.paths[0][0].kind == OpKind::kTrigger));
  BOOST_TEST((p.paths[0][1].kind == OpKind::kWrite));
  BOOST_TEST(p.paths[0][1].buffer == c.buffer_index("data"));
  BOOST_TEST((p.paths[0][2].kind == OpKind::kFence && p.paths[0][2].scope == FenceScope::kSys));
  Kernel const& q = c.kernels[1];
  BOOST_TEST(!q.pdl);
  BOOST_TEST(q.ctas == 2); // the default
  BOOST_TEST(q.paths.size() == 2u);
  BOOST_TEST(q.paths[1].empty());
  BOOST_TEST(first_of(q.paths[0], OpKind::kWait) == 1);
}

BOOST_AUTO_TEST_CASE(to_json_round_trips) {
  Chain const a = parse_chain(kValid, "valid.json");
  Chain const b = parse_chain(to_json(a), "again.json");
  BOOST_TEST(b.name == a.name);
  BOOST_TEST(b.buffers == a.buffers);
  BOOST_TEST(b.iterations == a.iterations);
  BOOST_REQUIRE(b.kernels.size() == a.kernels.size());
  for (std::size_t k = 0; k < a.kernels.size(); ++k) {
    BOOST_TEST(b.kernels[k].name == a.kernels[k].name);
    BOOST_TEST(b.kernels[k].pdl == a.kernels[k].pdl);
    BOOST_TEST(b.kernels[k].ctas == a.kernels[k].ctas);
    BOOST_TEST((b.kernels[k].paths == a.kernels[k].paths));
  }
}

BOOST_AUTO_TEST_CASE(graph_edges_parse_with_their_ports) {
  std::string const g = R"({"name": "g", "buffers": {"d": ""},
    "kernels": [{"name": "a", "path": ["write d"]}, {"name": "b", "path": ["read d"]},
                {"name": "c", "path": ["wait", "read d"]}],
    "edges": [{"from": "a", "to": "b", "port": "default"},
              {"from": "a", "to": "c", "port": "launch_completion"},
              {"from": "b", "to": "c", "port": "programmatic"}]})";
  Chain const c = parse_chain(g, "g.json");
  BOOST_TEST(c.graph);
  BOOST_REQUIRE(c.edges.size() == 3u);
  BOOST_TEST((c.edges[0].port == Port::kDefault));
  BOOST_TEST((c.edges[1].port == Port::kLaunchCompletion));
  BOOST_TEST((c.edges[2].port == Port::kProgrammatic));
  BOOST_TEST(c.edges[2].from == 1);
  BOOST_TEST(c.edges[2].to == 2);
}

BOOST_AUTO_TEST_CASE(unknown_buffer_is_named_with_its_json_path) {
  std::string const e = error_of(with(kValid, "\"write data\"", "\"write dta\""));
  BOOST_TEST(contains(e, "bad.json: /kernels/0/path/1: unknown buffer 'dta'"), e);
  BOOST_TEST(contains(e, "buffers: data, flag"), e);
  BOOST_TEST(lines(e) == 0, e);
}

BOOST_AUTO_TEST_CASE(unknown_op_is_named_with_its_json_path) {
  std::string const e =
      error_of(with(kValid, "\"read data\", \"wait\"", "\"load data\", \"wait\""));
  BOOST_TEST(contains(e, "bad.json: /kernels/1/paths/0/0: unknown op 'load'"), e);
  BOOST_TEST(contains(e, "fence gpu|sys"), e);
  BOOST_TEST(lines(e) == 0, e);
  BOOST_TEST(contains(error_of(with(kValid, "\"fence sys\"", "\"fence cta\"")),
                      "/kernels/0/path/2: 'fence cta': a fence needs its scope"));
  BOOST_TEST(contains(error_of(with(kValid, "\"trigger\",", "\"trigger now\",")),
                      "/kernels/0/path/0: 'trigger now': trigger takes no argument"));
  BOOST_TEST(contains(error_of(with(kValid, "\"write data\"", "\"write\"")),
                      "/kernels/0/path/1: 'write': write takes exactly one buffer name"));
}

BOOST_AUTO_TEST_CASE(missing_kernel_is_an_error) {
  std::string const g = R"({"name": "g", "buffers": {"d": ""},
    "kernels": [{"name": "a", "path": ["write d"]}, {"name": "b", "path": ["read d"]}],
    "edges": [{"from": "a", "to": "bb", "port": "default"}]})";
  std::string const e = error_of(g);
  BOOST_TEST(contains(e, "bad.json: /edges/0/to: missing kernel 'bb' (kernels: a, b)"), e);
  BOOST_TEST(contains(error_of(with(kValid, "\"kernels\"", "\"kernelz\"")),
                      "bad.json: /kernelz: unknown key 'kernelz'"));
  BOOST_TEST(contains(error_of(R"({"name": "x", "buffers": {"d": ""}})"),
                      "bad.json: /kernels: missing required key 'kernels'"));
  BOOST_TEST(contains(error_of(R"({"name": "x", "buffers": {"d": ""}, "kernels": []})"),
                      "bad.json: /kernels: expected a non-empty array of kernels"));
  BOOST_TEST(contains(error_of(with(kValid, R"({"name": "consumer", )", R"({)")),
                      "bad.json: /kernels/1/name: missing required key 'name'"));
}

BOOST_AUTO_TEST_CASE(bad_port_is_an_error) {
  std::string const g = R"({"name": "g", "buffers": {"d": ""},
    "kernels": [{"name": "a", "path": ["write d"]}, {"name": "b", "path": ["read d"]}],
    "edges": [{"from": "a", "to": "b", "port": "launch"}]})";
  std::string const e = error_of(g);
  BOOST_TEST(contains(e, "bad.json: /edges/0/port: bad port 'launch' (expected programmatic, "
                         "launch_completion or default)"),
             e);
  std::string const ok = with(g, "\"port\": \"launch\"", "\"port\": \"default\"");
  BOOST_TEST(contains(
      error_of(with(ok, "\"from\": \"a\", \"to\": \"b\"", "\"from\": \"b\", \"to\": \"a\"")),
      "bad.json: /edges/0: edge b -> a goes backwards"));
  BOOST_TEST(contains(error_of(with(g, "\"name\": \"a\",", "\"name\": \"a\", \"pdl\": true,")),
                      "bad.json: /kernels/0/pdl: 'pdl' is for stream order"));
}

BOOST_AUTO_TEST_CASE(values_of_the_wrong_type_or_range_are_errors) {
  BOOST_TEST(contains(error_of(with(kValid, "\"iterations\": 2", "\"iterations\": 0")),
                      "bad.json: /iterations: value 0 out of range [1, 16]"));
  BOOST_TEST(contains(error_of(with(kValid, "\"ctas\": 3", "\"ctas\": \"3\"")),
                      "bad.json: /kernels/0/ctas: expected an integer, found a string"));
  BOOST_TEST(contains(error_of(with(kValid, "\"pdl\": false", "\"pdl\": 0")),
                      "bad.json: /kernels/1/pdl: expected true or false"));
  BOOST_TEST(contains(error_of(with(kValid, "\"expected\": \"race\"", "\"expected\": \"maybe\"")),
                      "bad.json: /expected: 'maybe' is not one of ordered, race"));
  BOOST_TEST(contains(error_of(with(kValid, "\"name\": \"consumer\"", "\"name\": \"producer\"")),
                      "duplicate kernel name 'producer'"));
  BOOST_TEST(contains(error_of(with(kValid, "\"path\": [", "\"paths\": [[\"wait\"]], \"path\": [")),
                      "give either 'path' or 'paths'"));
}

BOOST_AUTO_TEST_CASE(invalid_json_names_line_and_column) {
  std::string const e = error_of(with(kValid, "\"iterations\": 2,", "\"iterations\": 2,,"));
  BOOST_TEST(contains(e, "bad.json: /: invalid JSON: parse error at line"), e);
  BOOST_TEST(!contains(e, "json.exception"), e);
  BOOST_TEST(lines(e) == 0, e);
}

BOOST_AUTO_TEST_CASE(measured_reads_must_name_a_read_that_exists) {
  std::string const m = with(kValid, "\"expected\": \"race\"",
                             R"("expected": "race", "measured": {"gpu": "X", "runs": 10, "reads": [
                               {"kernel": "consumer", "buffer": "data", "where": "before_wait", "stale": 3}]})");
  Chain const c = parse_chain(m, "m.json");
  BOOST_REQUIRE(c.measured.size() == 1u);
  BOOST_TEST(c.measured[0].stale == 3);
  BOOST_TEST(c.measured[0].runs == 10);
  BOOST_TEST(c.measured[0].before_wait);
  BOOST_TEST(contains(error_of(with(m, "\"kernel\": \"consumer\"", "\"kernel\": \"producer\"")),
                      "kernel 'producer' has no read of 'data' before its wait"));
  BOOST_TEST(contains(error_of(with(m, "\"stale\": 3", "\"stale\": 11")),
                      "/measured/reads/0/stale: value 11 out of range [0, 10]"));
}

BOOST_AUTO_TEST_CASE(verify_exit_status_is_zero_one_or_two) {
  auto const ok = run("verify " + chains_dir() + "seed_after.json");
  BOOST_TEST(ok.status == 0, ok.out);
  BOOST_TEST(contains(ok.out, "verdict: ordered"), ok.out);
  BOOST_TEST(contains(ok.out, "as the file expects"), ok.out);

  auto const race = run("verify " + chains_dir() + "review_claim_gemms_entry.json");
  BOOST_TEST(race.status == 1, race.out);
  BOOST_TEST(contains(race.out, "RACE     RAW routing_meta: routing writes routing_meta after its "
                                "wait -> finalize reads routing_meta before its wait"),
             race.out);
  BOOST_TEST(contains(race.out, "; gemm1 waits before it triggers (every path);"), race.out);

  TempDir tmp;
  std::string const bad = tmp.file("bad.json", with(kValid, "\"write data\"", "\"write dta\""));
  auto const b = run("verify " + bad);
  BOOST_TEST(b.status == 2, b.out);
  BOOST_TEST(contains(b.out, bad + ": /kernels/0/path/1: unknown buffer 'dta'"), b.out);
  BOOST_TEST(lines(b.out) == 1, b.out);

  std::string const missing = (tmp.path / "missing.json").string();
  auto const m = run("verify " + missing);
  BOOST_TEST(m.status == 2, m.out);
  BOOST_TEST(contains(m.out, missing + ": cannot open the file"), m.out);
  BOOST_TEST(lines(m.out) == 1, m.out);

  auto const q = run("verify -q " + chains_dir() + "h200_direct.json");
  BOOST_TEST(q.status == 1);
  BOOST_TEST(lines(q.out) == 1, q.out);
  BOOST_TEST(contains(q.out, "h200_direct: RACE (1 of 2 pairs race)"), q.out);
}

BOOST_AUTO_TEST_CASE(simulate_prints_witnesses_and_writes_a_timeline) {
  TempDir tmp;
  std::string const tl = (tmp.path / "tl.h5").string();
  auto const r = run("simulate " + chains_dir() +
                     "h200_direct.json --schedules 50 --seed 7 "
                     "--timeline " +
                     tl);
  BOOST_TEST(r.status == 1, r.out);
  BOOST_TEST(contains(r.out, "stale read: consumer reads data before its wait"), r.out);
  BOOST_TEST(contains(r.out, "*read data"), r.out);
  BOOST_TEST(!contains(r.out, "after its wait at"), r.out); // the post-wait read is never stale

  moefin::h5::ResultReader reader(tl);
  auto const attrs = reader.group_attrs("timeline");
  BOOST_TEST(attrs.at("kind") == "arrays");
  BOOST_TEST(attrs.at("kernels") == "producer,consumer");
  std::vector<std::size_t> dims;
  auto const kernel = reader.read_ints("timeline", "kernel", &dims);
  BOOST_TEST(dims.size() == 1u);
  BOOST_TEST(kernel.size() == 4u); // 2 CTAs each
  auto const start = reader.read_ints("timeline", "start_ns");
  auto const wait = reader.read_ints("timeline", "wait_ns");
  auto const trig = reader.read_ints("timeline", "trigger_ns");
  auto const end = reader.read_ints("timeline", "end_ns");
  for (std::size_t i = 0; i < kernel.size(); ++i) {
    BOOST_TEST(start[i] >= 0);
    BOOST_TEST(end[i] >= start[i]);
    if (kernel[i] == 0) { // the producer triggers and never waits
      BOOST_TEST(wait[i] == -1);
      BOOST_TEST(trig[i] >= start[i]);
    } else { // the consumer waits and never triggers
      BOOST_TEST(trig[i] == -1);
      BOOST_TEST(wait[i] >= start[i]);
    }
  }

  auto const clean = run("simulate " + chains_dir() + "h200_m1_after_m2_before.json");
  BOOST_TEST(clean.status == 0, clean.out);
  BOOST_TEST(contains(clean.out, "no stale read, premature overwrite or lost write"), clean.out);
  BOOST_TEST(contains(clean.out, "simulated 1000 schedules"), clean.out);

  auto const bad = run("simulate " + chains_dir() + "h200_direct.json --schedules 0");
  BOOST_TEST(bad.status == 2, bad.out);
  BOOST_TEST(contains(bad.out, "--schedules: value 0 out of range [1, 100000000]"), bad.out);
  BOOST_TEST(lines(bad.out) == 1, bad.out);
}
