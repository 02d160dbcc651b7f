// moefin audit: facts read from SASS. Small kernels with known answers (tests/audit/*.cu, built
// by the test build for sm_90 and sm_100a, old_arch.cu for sm_80), bad input of the command,
// moefin's chain kernels (in the moefin binary) against the chain description the verifier uses,
// a mutant kernel that triggers before its wait, and the H200 race matrix judged by the chain
// the audit derives from the binary.
#define BOOST_TEST_MODULE audit
#include <boost/test/unit_test.hpp>

#include "audit/audit.hpp"
#include "audit/elf_info.hpp"
#include "audit/launches.hpp"
#include "audit/plan.hpp"
#include "audit/process.hpp"
#include "audit/report.hpp"
#include "audit/sass.hpp"
#include "core/store/h5store.hpp"
#include "core/ops/errors.hpp"
#include "core/ops/layer_plan.hpp"
#include "core/pdl/verifier.hpp"
#include "experiments/audit/moefin_plan.hpp"
#include "experiments/chain/race_cells.hpp"
#include "tests/run_moefin.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

namespace fs = std::filesystem;
using namespace moefin;
namespace utf = boost::unit_test;

namespace {

std::string input(std::string const& name) {
  return std::string(MOEFIN_AUDIT_DIR) + "/" + name;
}

bool have_tools() {
  try {
    audit::find_tools("", MOEFIN_SOURCE_DIR);
    return true;
  } catch (std::exception const&) {
    return false;
  }
}

struct ToolsPresent {
  boost::test_tools::assertion_result operator()(utf::test_unit_id) const {
    boost::test_tools::assertion_result r(have_tools());
    r.message() << "cuobjdump/nvdisasm not installed (scripts/fetch_released.sh)";
    return r;
  }
};

audit::AuditOptions options() {
  audit::AuditOptions o;
  o.tools = audit::find_tools("", MOEFIN_SOURCE_DIR);
  o.jobs = 2;
  return o;
}

/// The audited kernels of one run, by plain (extern "C") name.
class Audited {
public:
  Audited(std::vector<std::string> const& files, audit::AuditOptions o)
      : dir_(fs::temp_directory_path() / ("moefin-test-audit-" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
    o.work_dir = dir_.string();
    res_ = audit::run_audit(files, o);
  }
  ~Audited() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  audit::AuditedKernel const& operator[](std::string const& name) const {
    for (auto const& k : res_.kernels)
      if (k.facts.name == name)
        return k;
    BOOST_FAIL("no kernel " << name);
    return res_.kernels.front();
  }
  audit::AuditResult const& result() const { return res_; }

private:
  fs::path dir_;
  audit::AuditResult res_;
};

std::vector<std::string> names(audit::AuditedKernel const& k, bool before_wait,
                               audit::AccessKind kind) {
  return audit::access_names(k, [&](audit::Access const& a) {
    return a.kind == kind && (before_wait ? a.before_wait : !a.before_wait);
  });
}

std::vector<std::string> late_writes(audit::AuditedKernel const& k) {
  return audit::access_names(k, [](audit::Access const& a) {
    return a.kind != audit::AccessKind::kRead && a.after_trigger;
  });
}

using Names = std::vector<std::string>;
constexpr auto kRead = audit::AccessKind::kRead;
constexpr auto kWrite = audit::AccessKind::kWrite;

/// The cases of pdl_cases.cu on one architecture (64 threads: two warps).
void check_cases(std::string const& arch) {
  audit::AuditOptions o = options();
  o.threads = 64;
  audit::load_layout(input("pdl_cases_layout.json"), o.layout);
  Audited const a({input("pdl_cases." + arch + ".cubin")}, o);
  BOOST_TEST_CONTEXT(arch) {
    auto const& s = a["straight_line"];
    BOOST_TEST(s.facts.arch ==
               arch.substr(0, arch.find('a') == std::string::npos ? arch.size() : arch.size()));
    BOOST_TEST(s.facts.has_wait);
    BOOST_TEST(s.facts.has_trigger);
    BOOST_TEST(s.facts.waits_every_path);
    BOOST_TEST(s.facts.wait_before_trigger);
    BOOST_TEST(names(s, true, kRead) == Names{"param_0"});
    BOOST_TEST(names(s, false, kRead) == Names{"param_1"});
    BOOST_TEST(late_writes(s) == Names{"param_2"});
    BOOST_TEST(audit::trigger_text(s.facts) == "after the wait");

    auto const& e = a["early_exit"];
    BOOST_TEST(!e.facts.waits_every_path);
    BOOST_TEST(!e.facts.wait_before_trigger);
    BOOST_TEST(!e.facts.trigger_before_wait); // no explicit trigger: it exits before waiting
    BOOST_TEST_REQUIRE(!e.facts.exit_without_wait.empty());
    BOOST_TEST(e.facts.exit_without_wait.front() == 0u);
    BOOST_TEST(names(e, true, kRead).empty());
    BOOST_TEST(names(e, false, kRead) == Names{"param_0"});

    auto const& l = a["loops"];
    BOOST_TEST(l.facts.waits_every_path);
    BOOST_TEST(l.facts.wait_before_trigger);
    BOOST_TEST(!l.facts.has_trigger);
    BOOST_TEST(names(l, true, kRead) == Names{"param_0"});
    BOOST_TEST(names(l, false, kWrite) == Names{"param_1"});
    BOOST_TEST(audit::trigger_text(l.facts) == "none (implicit at exit)");

    auto const& p = a["predicated_load"];
    BOOST_TEST(p.facts.wait_before_trigger);
    BOOST_TEST(names(p, true, kRead) == Names{"param_0"});
    bool predicated = false;
    for (auto const& x : p.facts.accesses)
      predicated = predicated || (x.before_wait && x.guarded);
    BOOST_TEST(predicated);
    BOOST_TEST(late_writes(p) == Names{"param_1"});

    auto const& r1 = a["roles_trigger_early"];
    BOOST_TEST(r1.facts.warps == 2);
    BOOST_TEST(r1.facts.waits_every_path); // warp 0 waits on all its paths
    BOOST_TEST(r1.facts.trigger_before_wait);
    BOOST_TEST(!r1.facts.wait_before_trigger);
    BOOST_TEST(r1.facts.waiting_warps == std::vector<int>{0});
    BOOST_TEST(!r1.facts.trigger_without_wait.empty());

    auto const& r2 = a["roles_one_waits"];
    BOOST_TEST(r2.facts.waits_every_path);
    BOOST_TEST(r2.facts.wait_before_trigger);
    BOOST_TEST(r2.facts.waiting_warps == std::vector<int>{0});

    auto const& rb = a["roles_barrier"];
    BOOST_TEST(rb.facts.waiting_warps == std::vector<int>{0});
    BOOST_TEST(names(rb, true, kRead) == (Names{"param_0", "param_1"}));
    BOOST_TEST(audit::access_names(rb, [](audit::Access const& x) {
                 return x.kind == kRead && x.before_any_sync;
               }) == Names{"param_1"});

    auto const& f = a["runtime_flag"];
    BOOST_TEST_REQUIRE(f.facts.switches.size() == 1u);
    BOOST_TEST(f.names.name(f.facts.switches[0].offset) == "p.use_pdl");
    BOOST_TEST(!f.facts.switches[0].by_assumption);
    BOOST_TEST(f.facts.switches[0].taken_waits);
    BOOST_TEST(f.facts.wait_before_trigger);
    BOOST_TEST(names(f, false, kRead) == Names{"p.in"});
    BOOST_TEST(late_writes(f) == Names{"p.out"});

    auto const& b = a["struct_params"];
    BOOST_TEST_REQUIRE(b.params.size() == 1u);
    BOOST_TEST(b.params[0].size > 500u);
    BOOST_TEST(names(b, true, kRead) == Names{"p.meta"});
    BOOST_TEST(names(b, false, kRead) == Names{"p.src"});
    BOOST_TEST(late_writes(b) == Names{"p.dst"});

    auto const& kt = a["knob_trigger"];
    BOOST_TEST(kt.facts.trigger_before_wait); // the knob's value unknown: entry is possible
    BOOST_TEST(kt.facts.switches.empty());    // it decides the trigger, not the wait

    auto const& c = a["wait_in_call"];
    BOOST_TEST(c.facts.has_wait);
    BOOST_TEST(c.facts.waits_every_path);
    BOOST_TEST(names(c, true, kRead).empty());
    BOOST_TEST(names(c, false, kRead) == Names{"param_0"});
  }
  // Thread paths only (no block size): roles_one_waits's warp 1 exits without waiting.
  audit::AuditOptions t = options();
  Audited const b({input("pdl_cases." + arch + ".cubin")}, t);
  BOOST_TEST(!b["roles_one_waits"].facts.waits_every_path);
  BOOST_TEST(b["roles_one_waits"].facts.warps == 0);
  BOOST_TEST(b["roles_trigger_early"].facts.trigger_before_wait);
}

} // namespace

BOOST_AUTO_TEST_CASE(operands_of_sass_are_read) {
  auto c = audit::parse_operand("c[0x0][0x218]");
  BOOST_TEST((c.kind == audit::Operand::Kind::kConst));
  BOOST_TEST(c.bank == 0);
  BOOST_TEST(c.offset == 0x218);
  auto ci = audit::parse_operand("c[0x0][R4+0x2a0]");
  BOOST_TEST(ci.index_reg == 4);
  BOOST_TEST(ci.offset == 0x2a0);
  auto m = audit::parse_operand("desc[UR14][R40.64+0x10]");
  BOOST_TEST((m.kind == audit::Operand::Kind::kMem));
  BOOST_TEST(m.base_reg == 40);
  BOOST_TEST(m.base_wide);
  BOOST_TEST(m.offset == 0x10);
  auto u = audit::parse_operand("[UR6]");
  BOOST_TEST(u.ubase_reg == 6);
  auto p = audit::parse_operand("!UP0");
  BOOST_TEST(p.is_reg(audit::RegFile::kUP));
  BOOST_TEST(p.neg);
  auto i = audit::parse_operand("-0x14c0");
  BOOST_TEST((i.kind == audit::Operand::Kind::kImm));
  BOOST_TEST(i.imm == -0x14c0);
  auto l = audit::parse_operand("`(.L_x_18)");
  BOOST_TEST((l.kind == audit::Operand::Kind::kLabel));
  BOOST_TEST(l.text == ".L_x_18");
  BOOST_TEST(audit::arch_number("sm_100a") == 100);
  BOOST_TEST(audit::arch_number("sm_90") == 90);
  BOOST_TEST(audit::arch_number("sm_9x") == 0);
}

BOOST_AUTO_TEST_CASE(a_guard_copied_into_the_other_predicate_file_keeps_its_chain) {
  // ptxas loads a pointer under a uniform predicate and adds to it under that predicate's copy
  // in the vector file (@!UP2 ULDC.64, PLOP3.LUT P5 = UP2, @!P5 IADD3), in a uniform register
  // that the loop's epilogue reuses for another parameter (decode_gemm_tiles_kernel<1, true,
  // 2>: p.gemm.a's rows, p.gemm.c's stores). Both guards are one: the load derives from
  // parameter 0 only. Copying another predicate (UP1) leaves UR20 either pointer: both.
  std::string const sass = R"(	.target	sm_90
//--------------------- .text.k --------------------------
	.section	.text.k,"ax",@progbits
        .other          k,@"STO_CUDA_ENTRY STV_DEFAULT"
.text.k:
        /*0000*/                   S2R R9, SR_TID.X ;
        /*0010*/                   ULDC UR17, c[0x0][0x240] ;
        /*0020*/                   ULDC.64 UR14, c[0x0][0x208] ;
.L_x_0:
        /*0030*/                   UISETP.NE.AND UP2, UPT, UR17, URZ, UPT ;
        /*0040*/                   PLOP3.LUT P5, PT, PT, PT, UP2, 0x80, 0x0 ;
        /*0050*/                   @!UP2 ULDC.64 UR20, c[0x0][0x210] ;
        /*0060*/              @!P5 IADD3 R82, P3, R16, UR20, RZ ;
        /*0070*/              @!P5 IADD3.X R83, R17, UR21, RZ, P3, !PT ;
        /*0080*/                   LDG.E R0, desc[UR14][R82.64] ;
        /*0090*/                   ULDC.64 UR20, c[0x0][0x220] ;
        /*00a0*/                   IMAD.U32 R2, RZ, RZ, UR20 ;
        /*00b0*/                   IMAD.U32 R3, RZ, RZ, UR21 ;
        /*00c0*/                   STG.E desc[UR14][R2.64], R0 ;
        /*00d0*/                   ISETP.NE.AND P0, PT, R9, RZ, PT ;
        /*00e0*/               @P0 BRA `(.L_x_0) ;
        /*00f0*/                   EXIT ;
.L_x_1:
        /*0100*/                   BRA `(.L_x_1);
)";
  auto params_of = [](std::string const& text, std::uint32_t addr) {
    audit::SassModule const m = audit::parse_sass(text, "copied_guard.sass");
    BOOST_TEST_REQUIRE(m.find("k") != nullptr);
    audit::KernelFacts const f =
        audit::analyze_kernel(m, *m.find("k"), audit::Environment{}, audit::AnalysisOptions{});
    std::set<std::uint32_t> out;
    for (auto const& x : f.accesses)
      if (x.addr == addr)
        out.insert(x.params.begin(), x.params.end());
    return out;
  };
  BOOST_TEST((params_of(sass, 0x80) == std::set<std::uint32_t>{0x0}));
  BOOST_TEST((params_of(sass, 0xc0) == std::set<std::uint32_t>{0x10}));
  std::string other = sass;
  other.replace(other.find("UP2, 0x80"), 3, "UP1");
  BOOST_TEST((params_of(other, 0x80) == std::set<std::uint32_t>{0x0, 0x10}));
}

BOOST_AUTO_TEST_CASE(elf_attributes_read_from_the_bytes_match_cuobjdump,
                     *utf::precondition(ToolsPresent())) {
  auto const tools = audit::find_tools("", MOEFIN_SOURCE_DIR);
  for (char const* name : {"pdl_cases.sm_90.cubin", "pdl_cases.sm_100a.cubin",
                           "tma_param.sm_90.cubin", "old_arch.sm_80.cubin"}) {
    std::string const path = input(name);
    std::ifstream in(path, std::ios::binary);
    std::string const bytes((std::istreambuf_iterator<char>(in)), {});
    audit::ElfInfo const mine = audit::read_elf_info(bytes, path);
    auto const r = audit::run_process({tools.cuobjdump, "-elf", path});
    BOOST_TEST_REQUIRE(r.status == 0, name);
    audit::ElfInfo const theirs = audit::parse_elf_info(r.out, path);
    BOOST_TEST(mine.sm == theirs.sm, name);
    BOOST_TEST(mine.kernels.size() == theirs.kernels.size(), name);
    for (auto const& [k, t] : theirs.kernels) {
      BOOST_TEST_REQUIRE(mine.kernels.count(k) == 1u, name << " " << k);
      auto const& m = mine.kernels.at(k);
      BOOST_TEST(m.params.size() == t.params.size(), name << " " << k);
      for (std::size_t i = 0; i < std::min(m.params.size(), t.params.size()); ++i) {
        BOOST_TEST(m.params[i].ordinal == t.params[i].ordinal, name << " " << k);
        BOOST_TEST(m.params[i].offset == t.params[i].offset, name << " " << k);
        BOOST_TEST(m.params[i].size == t.params[i].size, name << " " << k);
      }
      BOOST_TEST(m.has_param_base == t.has_param_base, name << " " << k);
      BOOST_TEST(m.param_base == t.param_base, name << " " << k);
      BOOST_TEST(m.param_size == t.param_size, name << " " << k);
      BOOST_TEST(m.max_threads == t.max_threads, name << " " << k);
      BOOST_TEST(m.constant2 == t.constant2, name << " " << k);
    }
  }
  BOOST_CHECK_THROW(audit::read_elf_info("not an elf", "x"), FileError);
}

BOOST_AUTO_TEST_CASE(known_facts_of_the_test_kernels_on_sm_90, *utf::precondition(ToolsPresent())) {
  check_cases("sm_90");
}

BOOST_AUTO_TEST_CASE(known_facts_of_the_test_kernels_on_sm_100a,
                     *utf::precondition(ToolsPresent())) {
  check_cases("sm_100a");
}

BOOST_AUTO_TEST_CASE(assumed_values_decide_switches_and_knobs, *utf::precondition(ToolsPresent())) {
  audit::AuditOptions o = options();
  audit::load_layout(input("pdl_cases_layout.json"), o.layout);
  o.kernel_filter = "runtime_flag";
  o.assume = {audit::parse_assume("p.use_pdl=0")};
  Audited const off({input("pdl_cases.sm_90.cubin")}, o);
  auto const& f = off["runtime_flag"];
  BOOST_TEST_REQUIRE(f.facts.switches.size() == 1u);
  BOOST_TEST(f.facts.switches[0].by_assumption);
  BOOST_TEST(!f.facts.switches[0].taken_waits);
  BOOST_TEST(!f.facts.has_wait); // the only wait is on the branch not taken
  BOOST_TEST(f.facts.trigger_before_wait);

  for (int where : {2, 3}) {
    audit::AuditOptions k = options();
    k.kernel_filter = "knob_trigger";
    k.assume = {audit::parse_assume("param_2=" + std::to_string(where))};
    Audited const a({input("pdl_cases.sm_90.cubin")}, k);
    auto const& kt = a["knob_trigger"];
    BOOST_TEST(kt.facts.trigger_before_wait == (where == 2), "where=" << where);
    BOOST_TEST(kt.facts.wait_before_trigger == (where == 3), "where=" << where);
    BOOST_TEST(late_writes(kt) == Names{"param_1"});
  }
}

BOOST_AUTO_TEST_CASE(tma_descriptors_are_named_by_their_parameter,
                     *utf::precondition(ToolsPresent())) {
  for (char const* arch : {"sm_90", "sm_100a"}) {
    Audited const a({input(std::string("tma_param.") + arch + ".cubin")}, options());
    auto const& k = a["tma_load"];
    bool found = false;
    for (auto const& x : k.facts.accesses)
      if (x.descriptor) {
        found = true;
        BOOST_TEST(x.params == std::vector<std::uint32_t>{k.params.at(0).offset}, arch);
        BOOST_TEST(!x.before_wait, arch);
      }
    BOOST_TEST(found, arch << ": no TMA load found");
  }
}

BOOST_AUTO_TEST_CASE(ptx_of_a_cu_input_is_compared, *utf::precondition(ToolsPresent())) {
  // A .cu input is compiled with nvcc -cubin and -ptx: its loads before the wait are the PTX's.
  audit::AuditOptions o = options();
  o.kernel_filter = "straight_line";
  Audited const a({std::string(MOEFIN_SOURCE_DIR) + "/tests/audit/pdl_cases.cu"}, o);
  auto const& k = a["straight_line"];
  BOOST_TEST(k.ptx);
  BOOST_TEST(k.ptx_has_wait);
  BOOST_TEST(k.hoisted.empty());
  // The comparison itself: a PTX that loads the parameter only after its wait, and a SASS read of
  // it before the wait, is a hoisted load.
  auto const ptx = audit::parse_ptx(R"(
.visible .entry h(
	.param .u64 h_param_0
)
{
	ld.param.u64 	%rd1, [h_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	griddepcontrol.wait;
	ld.global.u32 	%r1, [%rd2+4];
	ret;
}
)");
  BOOST_TEST_REQUIRE(ptx.count("h") == 1u);
  BOOST_TEST(ptx.at("h").loads.size() == 1u);
  BOOST_TEST(!ptx.at("h").loads[0].before_wait);
  audit::Access early;
  early.kind = kRead;
  early.before_wait = true;
  early.params = {0};
  BOOST_TEST(audit::hoisted_loads(ptx.at("h"), {{0, 0, 8}}, {early}) ==
             std::vector<std::uint32_t>{0});
  early.before_wait = false;
  BOOST_TEST(audit::hoisted_loads(ptx.at("h"), {{0, 0, 8}}, {early}).empty());
}

BOOST_AUTO_TEST_CASE(a_kernel_built_for_sm_80_launched_with_pdl_is_flagged_and_races,
                     *utf::precondition(ToolsPresent())) {
  fs::path const dir =
      fs::temp_directory_path() / ("moefin-audit-old-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string const launches = (dir / "old.json").string();
  std::ofstream(launches) << R"({
  "name": "old_arch_consumer_with_pdl",
  "buffers": {"data": "written by the producer", "out": "consumer output", "early": "producer input"},
  "launches": [
    {"name": "producer", "kernel": "straight_line", "params": {"param_0": "early", "param_2": "data"}},
    {"name": "consumer", "kernel": "old_arch_consumer", "pdl": true,
     "params": {"param_0": "data", "param_1": "out"}}
  ],
  "check": [{"launch": "consumer", "buffer": "data", "where": "before_wait", "expected": "race"}],
  "expected": "race"
})";
  auto const r = test::run("audit " + input("pdl_cases.sm_90.cubin") + " " +
                           input("old_arch.sm_80.cubin") + " --arch sm_90 --chain " + launches);
  // Two files of different architectures: --arch sm_90 cannot take the sm_80 one.
  BOOST_TEST(r.status == 1);
  BOOST_TEST(test::contains(r.out, "no SASS for sm_90"), r.out);
  auto const r2 = test::run("audit " + input("pdl_cases.sm_90.cubin") + " " +
                            input("old_arch.sm_80.cubin") + " --chain " + launches);
  BOOST_TEST(r2.status == 1, r2.out); // RACE
  BOOST_TEST(test::contains(r2.out, "old_arch_consumer: no PDL instructions"), r2.out);
  BOOST_TEST(test::contains(r2.out, "consumer reads data before its wait: RACE"), r2.out);
  BOOST_TEST(test::contains(r2.out, "(as the file expects)"), r2.out);
  BOOST_TEST(test::contains(r2.out, "verdict: RACE"), r2.out);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(bad_input_is_one_line_with_the_right_status,
                     *utf::precondition(ToolsPresent())) {
  fs::path const dir =
      fs::temp_directory_path() / ("moefin-audit-bad-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string const text = (dir / "notes.txt").string();
  std::ofstream(text) << "not a binary\n";
  std::string const bad_json = (dir / "bad.json").string();
  std::ofstream(bad_json) << R"({"name": "x", "launches": [{"name": "a", "kernle": "k"}]})";
  std::string const not_json = (dir / "not.json").string();
  std::ofstream(not_json) << "{ launches";
  // A cubin whose kernels' symbol names were blanked out (the section names remain).
  std::string stripped;
  {
    std::ifstream in(input("pdl_cases.sm_90.cubin"), std::ios::binary);
    stripped.assign(std::istreambuf_iterator<char>(in), {});
    std::string const n = std::string(1, '\0') + "straight_line" + std::string(1, '\0');
    std::size_t const at = stripped.find(n);
    BOOST_TEST_REQUIRE(at != std::string::npos);
    std::fill(stripped.begin() + static_cast<long>(at) + 1,
              stripped.begin() + static_cast<long>(at + n.size()) - 1, '_');
    std::ofstream((dir / "stripped.cubin").string(), std::ios::binary) << stripped;
  }
  struct Case {
    std::string args;
    int status;
    std::string says;
  };
  std::string const cubin = input("pdl_cases.sm_90.cubin");
  std::vector<Case> const cases = {
      {"audit " + text, 1, text + ": not a CUDA binary"},
      {"audit " + (dir / "missing.cubin").string(), 1, "missing.cubin: no such file"},
      {"audit " + cubin + " --arch sm_100a", 1, "no SASS for sm_100"},
      {"audit " + (dir / "stripped.cubin").string(), 1, "stripped names"},
      {"audit " + cubin + " --tools " + dir.string(), 1, "no executable cuobjdump and nvdisasm"},
      {"audit " + cubin + " --chain " + bad_json, 1, "bad.json: /launches/0/kernle: unknown key"},
      {"audit " + cubin + " --chain " + not_json, 1, "not.json: /: not JSON"},
      {"audit", 2, "no input files"},
      {"audit " + cubin + " --explain", 2, "--explain needs --chain"},
      {"audit " + cubin + " --threads 2000", 2, "--threads: value 2000 out of range"},
      {"audit " + cubin + " --assume nothing_here=3", 2, "no audited kernel has a parameter"},
      {"audit " + cubin + " --assume p.x", 2, "is not NAME=VALUE"},
      {"audit " + cubin + " --arch sm_9y", 2, "--arch: 'sm_9y' is not an architecture"},
  };
  for (Case const& c : cases) {
    auto const r = test::run(c.args);
    BOOST_TEST(r.status == c.status, c.args << ": " << r.out);
    BOOST_TEST(test::contains(r.out, c.says), c.args << ": " << r.out);
    if (c.status == 1)
      BOOST_TEST(test::lines(r.out) == 1, c.args << ": " << r.out);
  }
  auto const help = test::run("audit --help");
  BOOST_TEST(help.status == 0);
  BOOST_TEST(test::contains(help.out, "--chain"));
  BOOST_TEST(test::contains(help.out, "--assume"));
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------------------------
// moefin's own chain

namespace {

/// The moefin binary (every chain kernel) and the mutant, loaded once.
struct ChainProgram {
  fs::path dir;
  std::unique_ptr<audit::Program> program;
  ChainProgram() {
    dir = fs::temp_directory_path() / ("moefin-audit-chain-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    audit::AuditOptions o = options();
    o.work_dir = dir.string();
    audit::load_layout(input("moefin_chain_layout.json"), o.layout);
    program = std::make_unique<audit::Program>(
        std::vector<std::string>{MOEFIN_BINARY, input("mutant_permute.sm_90.cubin")}, o);
  }
  ~ChainProgram() {
    program.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  /// The audited fragments of `l`'s launches, in order.
  std::vector<audit::RequestResult> audit_launches(audit::Launches const& l) {
    std::vector<audit::RequestResult> out;
    for (auto const& q : audit::launch_requests(l)) {
      audit::RequestResult r;
      r.request = q;
      r.kernel = program->analyze(program->resolve(q.kernel, q.key), q.assume, q.threads);
      out.push_back(r);
    }
    return out;
  }
};

ChainProgram& chain_program() {
  static ChainProgram p;
  return p;
}

/// The buffers a launch maps a parameter offset to.
std::function<std::vector<std::string>(std::uint32_t)> buffer_map(audit::Launch const& la,
                                                                  audit::AuditedKernel const& k) {
  std::map<std::uint32_t, std::vector<std::string>> m;
  for (auto const& [name, bufs] : la.params) {
    std::uint32_t off = 0, size = 0;
    BOOST_TEST_REQUIRE(k.names.resolve(name, &off, &size), la.name << ": " << name);
    m[off] = bufs;
  }
  return [m](std::uint32_t off) {
    auto it = m.find(off);
    return it == m.end() ? std::vector<std::string>{} : it->second;
  };
}

/// Each kernel of one layer of `layer` as its plan says and as the audit reads it from the binary
/// (launched with `o`), in launch order.
std::vector<std::pair<audit::PlannedKernel, audit::ObservedKernel>>
planned_and_seen(chain::LayerPlan const& layer, audit_plan::MoefinLaunchOptions const& o = {}) {
  audit::Launches const l = audit_plan::moefin_launches(layer, o);
  auto const plan = audit_plan::moefin_plan(layer);
  auto const audited = chain_program().audit_launches(l);
  BOOST_TEST_REQUIRE(plan.size() == l.launches.size());
  std::vector<std::pair<audit::PlannedKernel, audit::ObservedKernel>> out;
  for (std::size_t i = 0; i < plan.size(); ++i)
    out.emplace_back(
        plan[i], audit::observe(audited[i].kernel, buffer_map(l.launches[i], audited[i].kernel)));
  return out;
}

/// The metadata verdict of finalize on the audit-derived chain of `cfg` (as chain::verify_cell
/// gives it on the hand description).
chain::CellVerdict audited_cell(chain::ChainConfig const& cfg, std::string const& variant,
                                bool graph, audit_plan::MoefinLaunchOptions const& o = {}) {
  chain::LayerPlan const plan = chain::make_layer_plan(cfg, finalize::variant(variant, "audit"));
  audit::Launches const l = audit_plan::moefin_launches(plan, o);
  audit::Composition comp = audit::compose(l, chain_program().audit_launches(l));
  pdl::Chain c = comp.chain;
  int const n = static_cast<int>(c.kernels.size());
  int const fin = c.kernel_index("finalize");
  std::vector<int> fins = {fin};
  if (graph) {
    c = pdl::captured_graph(c, l.iterations);
    for (int it = 1; it < l.iterations; ++it)
      fins.push_back(it * n + fin);
  }
  pdl::Report const r = pdl::verify(c, {false});
  chain::CellVerdict v;
  v.chain = r.verdict();
  v.races = r.races();
  v.pairs = r.pairs.size();
  bool const before = plan.finalize_meta_before_wait();
  for (char const* b : {"expanded_to_permuted", "expert_weights"})
    if (pdl::reads_verdict(c, r, fins, c.buffer_index(b), before) == pdl::Verdict::kRace)
      v.metadata = pdl::Verdict::kRace;
  return v;
}

} // namespace

BOOST_AUTO_TEST_CASE(mode_b_producer_waits_before_every_access_only_when_pdl_launched,
                     *utf::precondition(ToolsPresent())) {
  // docs/design/experiments.md: mode b's producer is launched with PDL and waits at entry, as
  // GEMM2; the plain one (files before 2026-12-04) has no wait. Read from moefin's own binary.
  audit::AuditOptions o = options();
  o.kernel_filter = "copy_producer";
  o.threads = 256;
  Audited const a({MOEFIN_BINARY}, o);
  audit::AuditedKernel const* waited = nullptr;
  audit::AuditedKernel const* plain = nullptr;
  for (auto const& k : a.result().kernels) {
    if (k.facts.arch != "sm_90")
      continue;
    if (k.facts.name.find("copy_producerILb1E") != std::string::npos)
      waited = &k;
    if (k.facts.name.find("copy_producerILb0E") != std::string::npos)
      plain = &k;
  }
  BOOST_TEST_REQUIRE(waited != nullptr);
  BOOST_TEST_REQUIRE(plain != nullptr);
  BOOST_TEST(waited->facts.has_wait);
  BOOST_TEST(waited->facts.waits_every_path);
  BOOST_TEST(!waited->facts.has_trigger); // its dependents launch as its CTAs exit
  BOOST_TEST_REQUIRE(!waited->facts.accesses.empty());
  for (auto const& x : waited->facts.accesses)
    BOOST_TEST(!x.before_wait);
  BOOST_TEST(!plain->facts.has_wait);
  BOOST_TEST(!plain->facts.has_trigger);
}

BOOST_AUTO_TEST_CASE(moefin_chain_kernels_agree_with_the_chain_description,
                     *utf::precondition(ToolsPresent())) {
  // Every placement each kernel can take, in every preset, with both finalize variants of the
  // race matrix and both metadata placements: trigger, waits, pre-wait reads, reads after the
  // wait and writes, kernel by kernel.
  std::size_t compared = 0;
  for (chain::Preset p : chain::kAllPresets)
    for (auto const& cfg0 : race::trigger_variants(chain::preset_config(p), false))
      for (bool meta : {true, false})
        for (char const* variant :
             {"small_batch", "small_batch_nosplit", "small_batch_late_trigger",
              "small_batch_meta_after_wait", "scalar", "vecload"}) {
          chain::ChainConfig cfg = cfg0;
          cfg.metadata_before_wait = meta;
          chain::LayerPlan const layer =
              chain::make_layer_plan(cfg, finalize::variant(variant, "audit"));
          for (auto const& [planned, seen] : planned_and_seen(layer)) {
            for (auto const& d : audit::compare_plan(planned, seen))
              BOOST_ERROR(chain::describe(cfg)
                          << " " << variant << ": " << planned.name << ": " << d);
            ++compared;
          }
        }
  BOOST_TEST_MESSAGE(compared << " kernel descriptions compared with their binaries");
  BOOST_TEST(compared > 300u);
}

BOOST_AUTO_TEST_CASE(the_decode_gemm_flavours_agree_with_their_binaries,
                     *utf::precondition(ToolsPresent())) {
  // The split-K decode GEMM as GEMM1 and GEMM2 (bf16 and fp4 weights, tile 8 and 16): every
  // trigger placement of the GEMMs one at a time (trigger_variants), each kernel's trigger, waits,
  // pre-wait reads (none: the chain launches it without weights_before_wait), reads after the
  // wait and writes as the plan says.
  // fp4 nine times: row-major scales (decode_gemm_kernel), tiled ones (decode_gemm_tscale_kernel,
  // the tscale candidate), tiled with lean loads (tscale+lean), the last two with packed values
  // (decode_gemm_wpack_kernel, the wpack candidate), those launched wide
  // (decode_gemm_wide_kernel, at one and two CTAs per SM), and wide on tiled values
  // (decode_gemm_tiles_kernel, the tiles candidate): one contract.
  std::size_t compared = 0, gemms = 0;
  for (char const* format :
       {"bf16", "fp4", "fp4-tiled", "fp4-tiled-lean", "fp4-packed", "fp4-packed-lean", "fp4-wide",
        "fp4-wide-lean", "fp4-tiles", "fp4-tiles-lean"})
    for (std::int64_t tile_m : {8, 16})
      for (auto const& cfg :
           race::trigger_variants(chain::preset_config(chain::Preset::kSeedAfter), false)) {
        std::string const f = format;
        bool const tiles = f.rfind("fp4-tiles", 0) == 0;
        bool const wide = tiles || f.rfind("fp4-wide", 0) == 0;
        bool const packed = wide || f.rfind("fp4-packed", 0) == 0;
        bool const tiled = packed || f.rfind("fp4-tiled", 0) == 0;
        chain::LayerPlan const layer =
            chain::make_layer_plan(cfg, finalize::variant("small_batch", "audit"),
                                   *chain::flavour_for_format(tiled ? "fp4" : format));
        BOOST_TEST_REQUIRE(layer.at(chain::Kernel::kGemm1).impl.find("decode_gemm") !=
                           std::string::npos);
        audit_plan::MoefinLaunchOptions o;
        o.tile_m = tile_m;
        o.tiled_scales = tiled;
        o.lean = f.size() > 5 && f.compare(f.size() - 5, 5, "-lean") == 0;
        o.packed_values = packed;
        o.wide = wide;
        o.tiled_values = tiles;
        // Both of the wide kernels' pipelines, lean or not: 3 stages at one CTA per SM (tile
        // 16), 2 at two (tile 8). The lean ones load each unit's activation row from a p.gemm.a
        // address that ptxas forms under a uniform predicate (@!UP2 ULDC.64) in a uniform
        // register the epilogue reuses for p.gemm.c, and adds under a copy of that predicate
        // (PLOP3.LUT P5 = UP2, then @!P5 IADD3): the audit reads both guards as one.
        o.ctas_per_sm = tile_m == 8 ? 2 : 1;
        for (auto const& [planned, seen] : planned_and_seen(layer, o)) {
          for (auto const& d : audit::compare_plan(planned, seen))
            BOOST_ERROR(format << " tile " << tile_m << " " << chain::describe(cfg) << ": "
                               << planned.name << ": " << d);
          ++compared;
          if (planned.name == "gemm1" || planned.name == "gemm2") {
            ++gemms;
            // The decode kernel's reads of the weights (fp4: values, scales, global scales) all
            // follow its wait.
            BOOST_TEST(seen.reads_before_wait.empty());
            BOOST_TEST(std::count(seen.reads_after_wait.begin(), seen.reads_after_wait.end(),
                                  planned.name == "gemm1" ? "w1" : "w2") == 1);
          }
        }
      }
  BOOST_TEST_MESSAGE(compared << " kernel descriptions of the decode flavours compared");
  BOOST_TEST(gemms >= 10u * 2u * 8u);
  // Unset, the layout is the chain's: fp4 weights' scales tiled and values packed in warp-stage
  // tiles (chain::LayerWeights), launched wide (fp4::chain_wide_gemms), so the decode-fp4 plan
  // names the tiles kernel (at sweep layer's two CTAs per SM: 2 stages) and the bf16 one the
  // plain decode kernel.
  auto gemm1_symbol = [](char const* format, audit_plan::MoefinLaunchOptions const& o = {}) {
    return audit_plan::moefin_launches(
               chain::make_layer_plan(chain::preset_config(chain::Preset::kSeedAfter),
                                      finalize::variant("small_batch", "audit"),
                                      *chain::flavour_for_format(format)),
               o)
        .launches[2]
        .kernel;
  };
  BOOST_TEST(gemm1_symbol("fp4") == "moefin::gemm::decode_gemm_tiles_kernel<2, false, 2>");
  audit_plan::MoefinLaunchOptions one_cta;
  one_cta.ctas_per_sm = 1;
  BOOST_TEST(gemm1_symbol("fp4", one_cta) == "moefin::gemm::decode_gemm_tiles_kernel<2, false, 3>");
  // Row-major packed values launched wide name the wide kernel.
  audit_plan::MoefinLaunchOptions rowmajor_wide;
  rowmajor_wide.tiled_values = false;
  BOOST_TEST(gemm1_symbol("fp4", rowmajor_wide) ==
             "moefin::gemm::decode_gemm_wide_kernel<2, false, 2>");
  BOOST_TEST(gemm1_symbol("bf16") ==
             "moefin::gemm::decode_gemm_kernel<(moefin::gemm::WeightFormat)0, 2, true>");
  // Nibbles name the tiled-scale kernel; row-major scales (values unset) the row-major one.
  audit_plan::MoefinLaunchOptions nibbles;
  nibbles.packed_values = false;
  BOOST_TEST(gemm1_symbol("fp4", nibbles) == "moefin::gemm::decode_gemm_tscale_kernel<2, false>");
  audit_plan::MoefinLaunchOptions rowmajor;
  rowmajor.tiled_scales = false;
  BOOST_TEST(gemm1_symbol("fp4", rowmajor) ==
             "moefin::gemm::decode_gemm_kernel<(moefin::gemm::WeightFormat)1, 2, true>");
  // Packed values launched single name the wpack kernel; packed values need tiled scales, and
  // the wide launch packed values.
  audit_plan::MoefinLaunchOptions packed;
  packed.packed_values = true;
  packed.wide = false;
  BOOST_TEST(gemm1_symbol("fp4", packed) == "moefin::gemm::decode_gemm_wpack_kernel<2, false>");
  packed.tiled_scales = false;
  BOOST_CHECK_THROW(gemm1_symbol("fp4", packed), InputError);
  // Tiled values (asked for) name the tiles kernel; they are packed words read wide only.
  audit_plan::MoefinLaunchOptions tiles;
  tiles.tiled_values = true;
  BOOST_TEST(gemm1_symbol("fp4", tiles) == "moefin::gemm::decode_gemm_tiles_kernel<2, false, 2>");
  tiles.wide = false;
  BOOST_CHECK_THROW(gemm1_symbol("fp4", tiles), InputError);
  tiles.wide.reset();
  tiles.packed_values = false;
  BOOST_CHECK_THROW(gemm1_symbol("fp4", tiles), InputError);
  audit_plan::MoefinLaunchOptions wide_nibbles;
  wide_nibbles.packed_values = false;
  wide_nibbles.wide = true;
  BOOST_CHECK_THROW(gemm1_symbol("fp4", wide_nibbles), InputError);
  // The tiled kernel is another symbol: a plan with another GEMM cannot name it.
  audit_plan::MoefinLaunchOptions o;
  o.tiled_scales = true;
  BOOST_CHECK_THROW(gemm1_symbol("bf16", o), InputError);
}

BOOST_AUTO_TEST_CASE(the_decode_gemm_reading_weights_before_its_wait_is_seen,
                     *utf::precondition(ToolsPresent())) {
  // The comparison can fail: with weights_before_wait the binary's pre-wait reads are the expert
  // map and the weights, which the chain's plan does not allow, and the comparison says so.
  chain::LayerPlan const layer = chain::make_layer_plan(
      chain::preset_config(chain::Preset::kSeedAfter), finalize::variant("small_batch", "audit"),
      *chain::flavour_for_format("fp4"));
  audit::Launches l = audit_plan::moefin_launches(layer);
  for (auto& a : l.launches[2].assume)
    if (a.name == "launch.weights_before_wait") {
      a.value = 1;
      a.text = "launch.weights_before_wait=1";
    }
  auto const audited = chain_program().audit_launches(l);
  auto const seen = audit::observe(audited[2].kernel, buffer_map(l.launches[2], audited[2].kernel));
  auto const diff = audit::compare_plan(audit_plan::moefin_plan(layer).at(2), seen);
  BOOST_TEST(!diff.empty());
  BOOST_TEST(std::count(seen.reads_before_wait.begin(), seen.reads_before_wait.end(),
                        "cta_to_expert") == 1);
}

BOOST_AUTO_TEST_CASE(a_mutant_that_triggers_before_its_wait_turns_the_chain_into_a_race,
                     *utf::precondition(ToolsPresent())) {
  // Permute is the only kernel between routing and finalize that waits before it triggers.
  chain::ChainConfig cfg = chain::preset_config(chain::Preset::kAllEarly);
  cfg.at(chain::Kernel::kPermute).trigger = Trigger::kAfterWait;
  auto const& small_batch = finalize::variant("small_batch", "audit");
  chain::LayerPlan const layer = chain::make_layer_plan(cfg, small_batch);
  BOOST_TEST((chain::verify_cell(cfg, small_batch, false).metadata == pdl::Verdict::kOrdered));
  BOOST_TEST((audited_cell(cfg, "small_batch", false).metadata == pdl::Verdict::kOrdered));
  audit_plan::MoefinLaunchOptions m;
  m.permute_kernel = "moefin::permute::permute_kernel_mutant";
  audit::Launches const l = audit_plan::moefin_launches(layer, m);
  auto const audited = chain_program().audit_launches(l);
  audit::AuditedKernel const& mutant = audited.at(1).kernel;
  BOOST_TEST(mutant.facts.trigger_before_wait);
  BOOST_TEST(!mutant.facts.trigger_without_wait.empty());
  auto const diff = audit::compare_plan(audit_plan::moefin_plan(layer).at(1),
                                        audit::observe(mutant, buffer_map(l.launches[1], mutant)));
  BOOST_TEST_REQUIRE(diff.size() == 1u);
  BOOST_TEST(diff[0] == "trigger: planned after_wait, the binary entry");
  BOOST_TEST((audited_cell(cfg, "small_batch", false, m).metadata == pdl::Verdict::kRace));
  BOOST_TEST((audited_cell(cfg, "small_batch", true, m).metadata == pdl::Verdict::kRace));
}

BOOST_AUTO_TEST_CASE(the_race_matrix_agrees_with_the_chain_read_from_the_binaries,
                     *utf::precondition(ToolsPresent())) {
  // As test_pdl_gpu_agreement, with each cell's chain derived from the kernels' SASS under the
  // cell's knob values instead of the hand description: a race seen on the GPU is a race, and a
  // chain the verifier orders showed nothing.
  std::vector<std::string> files;
  for (auto const& e : fs::directory_iterator(fs::path(MOEFIN_SOURCE_DIR) / "data" / "h200"))
    if (e.path().extension() == ".h5" &&
        e.path().filename().string().find("race") != std::string::npos)
      files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  BOOST_TEST_REQUIRE(files.size() >= 2u);
  std::map<std::string, chain::CellVerdict> memo;
  std::size_t rows = 0, observed = 0, disagreements = 0, races = 0;
  for (auto const& f : files) {
    h5::ResultReader reader(f);
    h5::Table const t = reader.read_table("race_matrix");
    h5::Provenance const& root = reader.provenance();
    auto const launch = root.find("launch");
    bool const graph = launch == root.end() || launch->second == "graph";
    for (std::size_t i = 0; i < t.rows; ++i) {
      chain::ChainConfig const cfg = race::row_config(t, i, root);
      std::string const variant = t.strings.at("finalize")[i];
      std::string const key = chain::describe(cfg) + variant + (graph ? "g" : "s");
      auto it = memo.find(key);
      if (it == memo.end())
        it = memo.emplace(key, audited_cell(cfg, variant, graph)).first;
      chain::CellVerdict const& v = it->second;
      bool const seen = t.ints.at("stale_iterations")[i] > 0 || t.ints.at("stale_reads")[i] > 0 ||
                        t.ints.at("mismatches")[i] > 0;
      bool const race = v.metadata == pdl::Verdict::kRace;
      observed += seen;
      races += race;
      if (seen && !race) {
        ++disagreements;
        BOOST_ERROR(f << " row " << i << " (" << t.keys()[i]
                      << "): a race seen on the GPU, the audit-derived chain orders it");
      }
      // The hand description and the binaries give the same verdict on every cell.
      chain::CellVerdict const hand = race::row_verdict(t, i, root);
      BOOST_TEST((hand.metadata == v.metadata), f << " row " << i << " (" << t.keys()[i] << ")");
      ++rows;
    }
  }
  BOOST_TEST_MESSAGE(rows << " race-matrix rows, " << observed << " with a race seen, " << races
                          << " races for the audit-derived chain, " << disagreements
                          << " disagreements (" << memo.size() << " distinct chains)");
  BOOST_TEST(disagreements == 0u);
  BOOST_TEST(observed > 0u);
  BOOST_TEST(rows > 300u);
}
