// moefin audit FILE...: the PDL facts of compiled kernels (audit): per kernel whether every
// path waits, whether every path waits before it triggers, the global accesses that may run
// before the wait and the writes that may run after the trigger, each by the parameter its
// address comes from; `--chain LAUNCHES.json` composes the kernels into a chain description
// and runs the happens-before verifier (core/pdl) on it.
// Exit 0: audited (with --chain: ordered); 1: a race (with --chain), a bad file or a missing
// tool; 2: bad usage.

#include "audit/audit.hpp"
#include "audit/launches.hpp"
#include "audit/process.hpp"
#include "audit/report.hpp"
#include "core/pdl/verifier.hpp"
#include "experiments/commands.hpp"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace moefin::cmd {

namespace {

/// A scratch directory removed when the command ends.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    char const* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/moefin-audit-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data()))
      throw FileError(tmpl, "cannot create a scratch directory");
    path = buf.data();
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::vector<std::string> split_words(std::string const& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w)
    out.push_back(w);
  return out;
}

void write_text(std::string const& path, std::string const& text) {
  std::ofstream out(path);
  if (!out)
    throw FileError(path, "cannot write");
  out << text;
  if (!out)
    throw FileError(path, "write failed");
}

std::string op_list(pdl::Chain const& c, pdl::Path const& p) {
  std::string s;
  for (pdl::Op const& o : p)
    s += (s.empty() ? "" : ", ") + pdl::op_text(c, o);
  return "[" + s + "]";
}

/// The outcome of a read check on one composed chain: "ordered through gemm1", "RACE with
/// routing's writes: no kernel of gemm1, gemm2 waits before it triggers", ...; `verdict` is
/// set when the chain has the read.
std::string check_outcome(pdl::Chain const& c, pdl::Report const& rep, audit::ReadCheck const& rc,
                          std::optional<pdl::Verdict>* verdict) {
  int const ki = c.kernel_index(rc.launch);
  int const bi = c.buffer_index(rc.buffer);
  if (ki < 0 || bi < 0)
    return "no such kernel or buffer in the chain";
  pdl::Verdict v;
  try {
    v = pdl::reads_verdict(c, rep, {ki}, bi, rc.before_wait);
  } catch (std::invalid_argument const&) {
    return "the audited kernel has no such read";
  }
  *verdict = v;
  for (int w = ki - 1; w >= 0; --w) {
    bool writes = false;
    for (auto const& p : c.kernels[static_cast<std::size_t>(w)].paths)
      for (auto const& o : p)
        writes = writes || (o.kind == pdl::OpKind::kWrite && o.buffer == bi);
    if (!writes)
      continue;
    std::string const wn = c.kernels[static_cast<std::size_t>(w)].name;
    if (v == pdl::Verdict::kOrdered) {
      int const lk = audit::linking_kernel(c, w, ki);
      return lk >= 0 ? "ordered after " + wn + "'s writes through " +
                           c.kernels[static_cast<std::size_t>(lk)].name
                     : "ordered";
    }
    std::string between;
    for (int i = w + 1; i < ki; ++i)
      between += (between.empty() ? "" : ", ") + c.kernels[static_cast<std::size_t>(i)].name;
    return "RACE with " + wn + "'s writes: " +
           (between.empty() ? std::string("no kernel in between")
                            : "no kernel of " + between + " waits before it triggers");
  }
  return v == pdl::Verdict::kOrdered ? "ordered" : "RACE";
}

std::string check_text(audit::ReadCheck const& rc) {
  return rc.launch + " reads " + rc.buffer +
         (rc.before_wait ? " before its wait" : " after its wait");
}

std::string join_paths(std::vector<std::vector<std::string>> const& paths) {
  std::string s;
  for (auto const& p : paths) {
    std::string q;
    for (auto const& o : p)
      q += (q.empty() ? "" : ", ") + o;
    s += (s.empty() ? "" : " | ") + ("[" + q + "]");
  }
  return s;
}

/// Runs the verifier on the composed chain(s) and prints the verdicts; returns the exit status.
/// A launch with several alternatives (tactics) is verified for every choice of them; choices
/// whose fragments are equal are verified once and counted together.
int verify_chain(audit::Launches const& l, std::vector<audit::RequestResult> const& req,
                 bool explain, bool quiet, nlohmann::ordered_json* out) {
  std::size_t const n = l.launches.size();
  // Classes of interchangeable alternatives, per launch.
  std::vector<std::vector<std::vector<std::size_t>>> classes(n);
  std::vector<std::vector<std::string>> class_text(n);
  std::size_t combos = 1;
  for (std::size_t i = 0; i < n; ++i) {
    std::map<std::string, std::size_t> by_sig;
    std::size_t const alts = std::max<std::size_t>(1, l.launches[i].alternatives.size());
    for (std::size_t a = 0; a < alts; ++a) {
      std::string const sig =
          join_paths(audit::launch_fragment(l, i, req.at(audit::request_index(l, i, a)).kernel));
      auto it = by_sig.find(sig);
      if (it == by_sig.end()) {
        it = by_sig.emplace(sig, classes[i].size()).first;
        classes[i].emplace_back();
        class_text[i].push_back(sig);
      }
      classes[i][it->second].push_back(a);
    }
    combos *= classes[i].size();
  }
  if (combos > 200000)
    throw InputError(l.origin + ": " + std::to_string(combos) +
                     " distinct combinations of the launches' alternatives; at most 200000");
  std::size_t choices = 1;
  for (std::size_t i = 0; i < n; ++i)
    choices *= std::max<std::size_t>(1, l.launches[i].alternatives.size());

  if (combos == 1) {
    audit::Composition const comp = audit::compose(l, req);
    pdl::Chain const& c = comp.chain;
    if (!quiet) {
      std::cout << "\nchain " << c.name << " (" << l.origin << "): " << c.kernels.size()
                << " launches in stream order"
                << (c.iterations > 1 ? ", " + std::to_string(c.iterations) + " iterations" : "")
                << "\n";
      for (std::size_t i = 0; i < c.kernels.size(); ++i) {
        pdl::Kernel const& k = c.kernels[i];
        std::cout << "  " << k.name << (k.pdl ? " (PDL)" : " (no PDL)") << ": ";
        for (std::size_t p = 0; p < k.paths.size(); ++p)
          std::cout << (p ? " | " : "") << op_list(c, k.paths[p]);
        std::cout << "\n";
        auto const& ck = comp.kernels[i];
        if (!ck.unmapped.empty()) {
          std::string u;
          for (auto const& x : ck.unmapped)
            u += (u.empty() ? "" : ", ") + x;
          std::cout << "      not in the chain: accesses through " << u << "\n";
        }
      }
    }
    pdl::VerifyOptions vo;
    vo.explain = explain;
    pdl::Report const rep = pdl::verify(c, vo);
    int status = rep.verdict() == pdl::Verdict::kRace ? kExitFailure : kExitOk;
    if (!l.checks.empty())
      std::cout << "\nreads checked:\n";
    nlohmann::ordered_json checks = nlohmann::ordered_json::array();
    for (audit::ReadCheck const& rc : l.checks) {
      std::optional<pdl::Verdict> v;
      std::string const outcome = check_outcome(c, rep, rc, &v);
      std::cout << "  " << check_text(rc) << ": " << outcome;
      bool ok = true;
      if (rc.expected) {
        ok = v && *v == *rc.expected;
        std::cout << (ok ? " (as the file expects)"
                         : std::string(" (MISMATCH: the file expects ") +
                               pdl::verdict_name(*rc.expected) + ")");
      }
      if (!v || !ok)
        status = kExitFailure;
      std::cout << "\n";
      checks.push_back({{"check", check_text(rc)}, {"outcome", outcome}});
    }
    if (!quiet) {
      std::cout << "\npairs:\n";
      for (pdl::PairVerdict const& p : rep.pairs) {
        if (p.ordered && !explain)
          continue;
        std::cout << "  " << (p.ordered ? "ordered" : "RACE   ") << "  "
                  << pdl::hazard_name(p.hazard) << " "
                  << c.buffers[static_cast<std::size_t>(p.key.buffer)] << ": " << p.first << " -> "
                  << p.second << "\n";
        for (auto const& w : p.why)
          std::cout << "           " << w << "\n";
      }
    }
    std::cout << "verdict: " << (rep.verdict() == pdl::Verdict::kRace ? "RACE" : "ordered") << " ("
              << rep.races() << " of " << rep.pairs.size() << " pairs race)";
    if (l.expected) {
      bool const ok = *l.expected == rep.verdict();
      std::cout << (ok ? "; as the file expects"
                       : std::string("; MISMATCH: the file expects ") +
                             pdl::verdict_name(*l.expected));
    }
    std::cout << "\n";
    if (out) {
      (*out)["chain"] = nlohmann::ordered_json::parse(pdl::to_json(c));
      (*out)["checks"] = checks;
      (*out)["verdict"] = pdl::verdict_name(rep.verdict());
    }
    return status;
  }

  // Every combination of the classes.
  std::cout << "\nchain " << l.name << " (" << l.origin << "): " << n << " launches; " << choices
            << " choices of their alternatives, " << combos << " distinct chains\n";
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t const alts = std::max<std::size_t>(1, l.launches[i].alternatives.size());
    std::cout << "  " << l.launches[i].name << ": " << alts << " alternative"
              << (alts == 1 ? "" : "s") << ", " << classes[i].size() << " distinct fragment"
              << (classes[i].size() == 1 ? "" : "s") << "\n";
    if (!quiet)
      for (std::size_t k = 0; k < classes[i].size(); ++k)
        std::cout << "    " << classes[i][k].size() << " x " << class_text[i][k] << "\n";
  }
  std::vector<std::map<std::string, std::size_t>> tally(l.checks.size());
  std::vector<std::map<std::string, std::set<std::string>>> racing(l.checks.size());
  std::map<std::string, std::size_t> verdicts;
  std::size_t mismatches = 0;
  // Every distinct chain's verdicts, so a single choice of alternatives can be looked up.
  nlohmann::ordered_json chains = nlohmann::ordered_json::array();
  std::vector<std::size_t> pick(n, 0); // class per launch
  for (std::size_t done = 0; done < combos; ++done) {
    std::vector<std::size_t> choice(n);
    std::size_t weight = 1;
    for (std::size_t i = 0; i < n; ++i) {
      choice[i] = classes[i][pick[i]].front();
      weight *= classes[i][pick[i]].size();
    }
    audit::Composition const comp = audit::compose(l, req, choice);
    pdl::Report const rep = pdl::verify(comp.chain, {false});
    verdicts[pdl::verdict_name(rep.verdict())] += weight;
    if (l.expected && *l.expected != rep.verdict())
      mismatches += weight;
    nlohmann::ordered_json outcomes = nlohmann::ordered_json::array();
    for (std::size_t ci = 0; ci < l.checks.size(); ++ci) {
      std::optional<pdl::Verdict> v;
      std::string const outcome = check_outcome(comp.chain, rep, l.checks[ci], &v);
      outcomes.push_back({{"outcome", outcome}, {"verdict", v ? pdl::verdict_name(*v) : "none"}});
      tally[ci][outcome] += weight;
      if (l.checks[ci].expected && (!v || *v != *l.checks[ci].expected))
        mismatches += weight;
      if (v && *v == pdl::Verdict::kRace)
        for (std::size_t i = 0; i < n; ++i)
          if (l.launches[i].alternatives.size() > 1)
            for (std::size_t a : classes[i][pick[i]])
              racing[ci][l.launches[i].name].insert(
                  audit::short_name(req.at(audit::request_index(l, i, a)).kernel.facts.name));
    }
    chains.push_back({{"classes", pick},
                      {"choices", weight},
                      {"verdict", pdl::verdict_name(rep.verdict())},
                      {"checks", outcomes}});
    for (std::size_t i = n; i-- > 0;) {
      if (++pick[i] < classes[i].size())
        break;
      pick[i] = 0;
    }
  }
  std::cout << "\nreads checked, over the " << choices << " choices:\n";
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (std::size_t ci = 0; ci < l.checks.size(); ++ci) {
    std::cout << "  " << check_text(l.checks[ci]) << ":\n";
    nlohmann::ordered_json outcomes = nlohmann::ordered_json::object();
    for (auto const& [outcome, count] : tally[ci]) {
      std::cout << "    " << count << " of " << choices << ": " << outcome << "\n";
      outcomes[outcome] = count;
    }
    nlohmann::ordered_json race_alts = nlohmann::ordered_json::object();
    for (auto const& [launch, set] : racing[ci]) {
      std::cout << "    racing " << launch << " alternatives: " << set.size() << "\n";
      race_alts[launch] = std::vector<std::string>(set.begin(), set.end());
    }
    checks.push_back({{"check", check_text(l.checks[ci])},
                      {"outcomes", outcomes},
                      {"racing_alternatives", race_alts}});
  }
  std::cout << "verdict of the whole chain:";
  for (auto const& [v, count] : verdicts)
    std::cout << " " << (v == "race" ? "RACE" : v) << " in " << count;
  std::cout << " of " << choices << " choices";
  if (l.expected || mismatches)
    std::cout << (mismatches ? "; MISMATCH with the file's expectations in " +
                                   std::to_string(mismatches) + " (check, choice) cases"
                             : std::string("; as the file expects"));
  std::cout << "\n";
  if (out) {
    nlohmann::ordered_json launches = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < n; ++i) {
      nlohmann::ordered_json cls = nlohmann::ordered_json::array();
      for (std::size_t k = 0; k < classes[i].size(); ++k) {
        std::vector<std::string> members;
        for (std::size_t a : classes[i][k])
          members.push_back(req.at(audit::request_index(l, i, a)).kernel.facts.name);
        cls.push_back({{"fragment", class_text[i][k]}, {"kernels", members}});
      }
      launches.push_back({{"launch", l.launches[i].name}, {"classes", cls}});
    }
    (*out)["choices"] = choices;
    (*out)["distinct_chains"] = combos;
    (*out)["fragment_classes"] = launches;
    (*out)["checks"] = checks;
    (*out)["verdicts"] = verdicts;
    (*out)["chains"] = chains;
  }
  bool const any_race = verdicts.count("race") != 0;
  return (mismatches || (any_race && !l.expected)) ? kExitFailure : kExitOk;
}

} // namespace

int audit(cli::Args const& args) {
  cli::po::options_description desc("audit options");
  desc.add_options()("files", cli::po::value<std::vector<std::string>>()->multitoken(),
                     "cubins, fatbins, objects, shared libraries, executables or .cu files")(
      "arch", cli::po::value<std::string>()->default_value(""),
      "the architecture whose SASS to audit (sm_90, sm_100a, ...); default: the only one a "
      "file holds, sm_90 when it holds several; .cu files are compiled for it (default sm_90)")(
      "layout", cli::po::value<std::vector<std::string>>()->composing(),
      "struct layout file(s) naming parameter fields (tools/audit/struct_layout.py writes "
      "them)")("assume", cli::po::value<std::vector<std::string>>()->composing(),
               "NAME=VALUE: a parameter's value (a field name, param_N[+0xK] or an offset like "
               "0x60, optionally :SIZE); branches it decides are pruned; repeatable")(
      "threads", cli::po::value<int>()->default_value(0),
      "threads per CTA of the launch (blockDim.x): warp-specialized kernels are then analysed "
      "warp by warp (0: unknown)")("kernel", cli::po::value<std::string>()->default_value(""),
                                   "audit only kernels whose symbol contains this text")(
      "json", cli::po::value<std::string>()->default_value(""), "write the facts as JSON here")(
      "chain", cli::po::value<std::string>()->default_value(""),
      "a launches file: compose the audited kernels into a chain and run the verifier")(
      "chain-out", cli::po::value<std::string>()->default_value(""),
      "with --chain: write the composed chain description (moefin verify format) here")(
      "explain", cli::po::bool_switch(), "with --chain: print why every pair is ordered or not")(
      "chain-only", cli::po::bool_switch(),
      "with --chain: audit only the kernels the launches name (no table of every kernel)")(
      "quiet,q", cli::po::bool_switch(), "print only the verdict lines (with --chain)")(
      "nvcc-flags", cli::po::value<std::string>()->default_value(""),
      "flags for compiling .cu inputs (e.g. \"-std=c++17 -I.\")")(
      "tools", cli::po::value<std::string>()->default_value(""),
      "directory holding cuobjdump and nvdisasm (else $MOEFIN_TOOLS, .deps/tools/bin of the "
      "source tree, PATH)")("jobs,j", cli::po::value<int>()->default_value(0),
                            "parallel disassemblies (default: the processors available)");
  cli::po::positional_options_description pos;
  pos.add("files", -1);
  cli::po::variables_map vm;
  if (!cli::parse("audit",
                  "FILE... [--arch sm_90] [--layout PARAMS.json] [--assume NAME=VALUE] "
                  "[--threads N] [--json OUT] [--chain LAUNCHES.json]",
                  desc, args, vm, &pos))
    return kExitOk;
  std::vector<std::string> files;
  if (vm.count("files"))
    files = vm["files"].as<std::vector<std::string>>();
  std::string const chain_path = vm["chain"].as<std::string>();
  audit::Launches launches;
  bool const with_chain = !chain_path.empty();
  if (with_chain) {
    launches = audit::load_launches(chain_path);
    files.insert(files.end(), launches.files.begin(), launches.files.end());
  }
  if (files.empty())
    throw UsageError("audit: no input files; usage: moefin audit FILE... (see 'moefin audit "
                     "--help')");
  if (!vm["chain-out"].as<std::string>().empty() && !with_chain)
    throw UsageError("audit: --chain-out needs --chain");
  if (vm["explain"].as<bool>() && !with_chain)
    throw UsageError("audit: --explain needs --chain (it explains the verdicts of a chain)");
  int const threads = vm["threads"].as<int>();
  cli::check_range("--threads", threads, 0, 1024);
  int jobs = vm["jobs"].as<int>();
  cli::check_range("--jobs", jobs, 0, 256);
  if (jobs == 0)
    jobs = audit::available_cpus();

  audit::AuditOptions opt;
  opt.arch = vm["arch"].as<std::string>();
  opt.nvcc_flags = split_words(vm["nvcc-flags"].as<std::string>());
  opt.tools = audit::find_tools(vm["tools"].as<std::string>(), MOEFIN_SOURCE_DIR);
  opt.jobs = jobs;
  opt.kernel_filter = vm["kernel"].as<std::string>();
  opt.threads = threads;
  if (vm.count("assume"))
    for (auto const& a : vm["assume"].as<std::vector<std::string>>())
      opt.assume.push_back(audit::parse_assume(a));
  if (vm.count("layout"))
    for (auto const& p : vm["layout"].as<std::vector<std::string>>())
      audit::load_layout(p, opt.layout);
  if (with_chain)
    opt.requests = audit::launch_requests(launches);
  opt.requests_only = vm["chain-only"].as<bool>();
  if (opt.requests_only && !with_chain)
    throw UsageError("audit: --chain-only needs --chain");
  bool const quiet = vm["quiet"].as<bool>();
  opt.progress = [](std::string const& s) { std::cerr << "audit: " << s << "\n"; };
  ScratchDir scratch;
  opt.work_dir = scratch.path;

  audit::AuditResult const res = audit::run_audit(files, opt);
  if (res.kernels.empty() && !opt.requests_only)
    throw FileError(files.front(), opt.kernel_filter.empty()
                                       ? "no kernels in the audited SASS"
                                       : "no kernel matches --kernel '" + opt.kernel_filter + "'");
  if (!quiet && !opt.requests_only) {
    audit::print_table(std::cout, res.kernels);
    std::cout << res.kernels.size() << " kernels in " << res.cubins << " cubins audited in "
              << std::fixed << std::setprecision(2) << res.seconds << " s (" << jobs
              << " jobs; tools: " << opt.tools.where << ")\n";
  }
  int status = kExitOk;
  nlohmann::ordered_json chain_json;
  if (with_chain) {
    status = verify_chain(launches, res.requests, vm["explain"].as<bool>(), quiet, &chain_json);
    if (!vm["chain-out"].as<std::string>().empty())
      write_text(vm["chain-out"].as<std::string>(),
                 pdl::to_json(audit::compose(launches, res.requests).chain) + "\n");
  }
  std::string const json_path = vm["json"].as<std::string>();
  if (!json_path.empty()) {
    nlohmann::ordered_json j;
    j["moefin_audit"] = 1;
    j["command_line"] = "moefin audit " + audit::command_text(args);
    j["tools"] = {{"cuobjdump", res.cuobjdump_version},
                  {"nvdisasm", res.nvdisasm_version},
                  {"where", opt.tools.where}};
    j["cubins"] = res.cubins;
    j["seconds"] = res.seconds;
    nlohmann::ordered_json ks = nlohmann::ordered_json::array();
    for (auto const& k : res.kernels)
      ks.push_back(audit::facts_json(k));
    j["kernels"] = ks;
    if (with_chain) {
      nlohmann::ordered_json ls = nlohmann::ordered_json::array();
      for (std::size_t i = 0; i < res.requests.size(); ++i) {
        nlohmann::ordered_json lj = audit::facts_json(res.requests[i].kernel);
        lj["launch"] = res.requests[i].request.key;
        ls.push_back(lj);
      }
      j["launches"] = ls;
      for (auto it = chain_json.begin(); it != chain_json.end(); ++it)
        j[it.key()] = it.value();
    }
    write_text(json_path, j.dump(1) + "\n");
  }
  return status;
}

} // namespace moefin::cmd
