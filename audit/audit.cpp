#include "audit/audit.hpp"

#include "audit/elf_info.hpp"
#include "audit/process.hpp"
#include "audit/ptx.hpp"
#include "audit/report.hpp"
#include "audit/sass.hpp"
#include "audit/sha256.hpp"
#include "core/ops/errors.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace moefin::audit {

int arch_number(std::string const& arch) {
  std::string s = arch;
  if (s.rfind("sm_", 0) == 0)
    s = s.substr(3);
  else if (s.rfind("compute_", 0) == 0)
    s = s.substr(8);
  std::size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
    ++i;
  if (i == 0 || i > 3)
    return 0;
  std::string const suffix = s.substr(i);
  if (!suffix.empty() && suffix != "a" && suffix != "f")
    return 0;
  return std::atoi(s.substr(0, i).c_str());
}

std::vector<std::uint32_t> hoisted_loads(PtxEntry const& ptx, std::vector<ParamInfo> const& params,
                                         std::vector<Access> const& sass) {
  std::set<std::uint32_t> early;
  for (PtxLoad const& l : ptx.loads)
    if (l.before_wait && l.ordinal >= 0)
      for (ParamInfo const& p : params)
        if (p.ordinal == l.ordinal)
          early.insert(p.offset + l.offset);
  std::set<std::uint32_t> hoisted;
  if (ptx.has_wait)
    for (Access const& a : sass)
      if (a.before_wait && a.kind == AccessKind::kRead && !a.descriptor)
        for (std::uint32_t p : a.params)
          if (!early.count(p))
            hoisted.insert(p);
  return {hoisted.begin(), hoisted.end()};
}

std::int64_t param_address_slot(int sm) {
  // Where ptxas reads the generic address of the parameter block when a __grid_constant__
  // parameter's address is taken (a TMA descriptor): pinned by tests/audit/tma_param.cu.
  if (sm >= 90 && sm < 100)
    return 0x198;
  if (sm >= 100)
    return 0x348;
  return -1;
}

namespace {

struct Cubin {
  std::string input; // as named on the command line
  std::string path;  // on disk
  std::string name;  // for messages
  int sm = 0;
  ElfInfo elf;
  std::string ptx_key; // which PTX text belongs to it (the input)
};

struct Loaded {
  std::vector<std::vector<Cubin>> per_input;
  std::vector<Cubin const*> selected;
  std::map<std::string, std::map<std::string, PtxEntry>> ptx; // input -> entries
};

std::string read_file(std::string const& path, std::size_t limit = std::string::npos) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw FileError(path, "cannot read");
  std::string s;
  if (limit == std::string::npos) {
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  s.resize(limit);
  in.read(&s[0], static_cast<std::streamsize>(limit));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

std::string first_line(std::string const& s) {
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos)
      return line;
  return {};
}

std::string tool_failure(ProcessResult const& r) {
  std::string const l = first_line(r.err.empty() ? r.out : r.err);
  return l.empty() ? "exit status " + std::to_string(r.status) : l;
}

enum class InputKind { kCubin, kHostElf, kFatbin, kCuda, kOther };

InputKind classify(std::string const& path) {
  if (fs::path(path).extension() == ".cu")
    return InputKind::kCuda;
  std::string const head = read_file(path, 64);
  if (head.size() >= 20 && head.compare(0, 4,
                                        "\x7f"
                                        "ELF") == 0) {
    unsigned const machine = static_cast<unsigned char>(head[18]) |
                             (static_cast<unsigned>(static_cast<unsigned char>(head[19])) << 8);
    return machine == 190 ? InputKind::kCubin : InputKind::kHostElf; // EM_CUDA
  }
  if (head.size() >= 4 && static_cast<unsigned char>(head[0]) == 0x50 &&
      static_cast<unsigned char>(head[1]) == 0xed && static_cast<unsigned char>(head[2]) == 0x55 &&
      static_cast<unsigned char>(head[3]) == 0xba)
    return InputKind::kFatbin;
  return InputKind::kOther;
}

std::string sm_name(int sm) {
  return "sm_" + std::to_string(sm);
}

/// Steps 1 and 2: the inputs as cubins of the chosen architecture, with their ELF info and PTX.
Loaded load(std::vector<std::string> const& files, AuditOptions const& opt) {
  Loaded out;
  int const want = opt.arch.empty() ? 0 : arch_number(opt.arch);
  if (!opt.arch.empty() && want == 0)
    throw InputError("--arch: '" + opt.arch + "' is not an architecture like sm_90 or sm_100a");

  // 1. Inputs to cubins (and PTX where there is some).
  std::vector<std::vector<Cubin>>& per_input = out.per_input;
  per_input.resize(files.size());
  std::map<std::string, std::string> ptx_text; // input -> PTX
  std::mutex m;
  parallel_for(files.size(), opt.jobs, [&](std::size_t fi) {
    std::string const& f = files[fi];
    std::error_code ec;
    if (!fs::is_regular_file(f, ec))
      throw FileError(f, fs::exists(f, ec) ? "not a regular file" : "no such file");
    fs::path const dir = fs::path(opt.work_dir) / ("in" + std::to_string(fi));
    fs::create_directories(dir);
    InputKind const kind = classify(f);
    std::vector<std::string> paths;
    std::string ptx;
    switch (kind) {
    case InputKind::kOther:
      throw FileError(f, "not a CUDA binary (neither a CUDA ELF, a fatbin, a host ELF with "
                         "device code, nor a .cu file)");
    case InputKind::kCubin:
      paths.push_back(f);
      break;
    case InputKind::kCuda: {
      std::string const arch = opt.arch.empty() ? "sm_90" : opt.arch;
      std::string const nvcc = find_nvcc();
      std::string const out =
          (dir / (fs::path(f).stem().string() + "." + arch + ".cubin")).string();
      std::vector<std::string> cmd = {nvcc, "-cubin", "-arch=" + arch, "-o", out};
      cmd.insert(cmd.end(), opt.nvcc_flags.begin(), opt.nvcc_flags.end());
      cmd.push_back(f);
      ProcessResult const r = run_process(cmd);
      if (r.status != 0)
        throw FileError(f, "nvcc -cubin failed: " + tool_failure(r));
      paths.push_back(out);
      std::string const ptx_out = (dir / (fs::path(f).stem().string() + ".ptx")).string();
      std::vector<std::string> pcmd = {nvcc, "-ptx", "-arch=" + arch, "-o", ptx_out};
      pcmd.insert(pcmd.end(), opt.nvcc_flags.begin(), opt.nvcc_flags.end());
      pcmd.push_back(f);
      if (run_process(pcmd).status == 0)
        ptx = read_file(ptx_out);
      break;
    }
    case InputKind::kHostElf:
    case InputKind::kFatbin: {
      std::string const abs = fs::absolute(f).string();
      ProcessResult const r = run_process({opt.tools.cuobjdump, "-xelf", "all", abs}, dir.string());
      for (auto const& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".cubin")
          paths.push_back(e.path().string());
      std::sort(paths.begin(), paths.end());
      if (paths.empty())
        throw FileError(f, kind == InputKind::kFatbin
                               ? "a fatbin without SASS (cuobjdump -xelf: " + tool_failure(r) + ")"
                               : "no CUDA device code in this file (cuobjdump found no ELF)");
      ProcessResult const p = run_process({opt.tools.cuobjdump, "-ptx", abs});
      if (p.status == 0)
        ptx = p.out;
      break;
    }
    }
    std::vector<Cubin> cs;
    for (auto const& p : paths) {
      Cubin c;
      c.input = f;
      c.path = p;
      c.name = kind == InputKind::kCubin || kind == InputKind::kCuda
                   ? f
                   : f + ":" + fs::path(p).filename().string();
      c.ptx_key = f;
      cs.push_back(std::move(c));
    }
    std::lock_guard<std::mutex> lock(m);
    per_input[fi] = std::move(cs);
    if (!ptx.empty())
      ptx_text[f] = std::move(ptx);
  });

  // 2. ELF info (read from the bytes: cheap) decides the architecture of each cubin.
  std::vector<Cubin*> all;
  for (auto& v : per_input)
    for (auto& c : v)
      all.push_back(&c);
  parallel_for(all.size(), opt.jobs, [&](std::size_t i) {
    Cubin& c = *all[i];
    c.elf = read_elf_info(read_file(c.path), c.name);
    c.sm = c.elf.sm;
  });
  std::vector<Cubin const*>& selected = out.selected;
  for (std::size_t fi = 0; fi < files.size(); ++fi) {
    std::set<int> sms;
    for (auto const& c : per_input[fi])
      sms.insert(c.sm);
    int pick = want;
    if (!pick) {
      if (sms.size() == 1)
        pick = *sms.begin();
      else if (sms.count(90))
        pick = 90;
      else {
        std::string list;
        for (int s : sms)
          list += (list.empty() ? "" : ", ") + sm_name(s);
        throw FileError(files[fi], "holds SASS for several architectures (" + list +
                                       "): choose one with --arch");
      }
    }
    bool any = false;
    for (auto const& c : per_input[fi])
      if (c.sm == pick) {
        selected.push_back(&c);
        any = true;
      }
    if (!any) {
      std::string list;
      for (int s : sms)
        list += (list.empty() ? "" : ", ") + sm_name(s);
      throw FileError(files[fi], "no SASS for " + sm_name(pick) + " (it holds " + list + ")");
    }
  }
  for (auto const& [input, text] : ptx_text)
    out.ptx[input] = parse_ptx(text);
  return out;
}

SassModule disassemble(Cubin const& c, AuditOptions const& opt) {
  ProcessResult const r = run_process({opt.tools.nvdisasm, "-c", c.path});
  if (r.status != 0)
    throw FileError(c.name, "nvdisasm failed: " + tool_failure(r));
  return parse_sass(r.out, c.name);
}

/// Whether a function of the module is a kernel to audit; throws on a stripped one.
bool is_kernel(SassFunction const& fn, Cubin const& c) {
  if (!fn.entry)
    return false;
  if (fn.name.empty() || fn.symbol != fn.name)
    throw FileError(c.name, "stripped names: the kernel in section .text." + fn.name +
                                " is defined by symbol '" + fn.symbol +
                                "'; the audit needs the kernels' own names");
  if (!c.elf.kernels.count(fn.name))
    throw FileError(c.name,
                    "kernel " + fn.name + " has no ELF attributes (.nv.info): stripped or damaged");
  return true;
}

/// One kernel analysed: the global --assume items (those that name a parameter of it; `applied`
/// marks them), then `extra` (each must), with `threads` per CTA.
AuditedKernel analyse(Cubin const& c, SassModule const& mod, SassFunction const& fn,
                      std::string const& digest, Loaded const& ld, AuditOptions const& opt,
                      int threads, std::vector<AssumeItem> const* extra, std::vector<char>* applied,
                      std::mutex* m) {
  ElfKernelInfo const& ek = c.elf.kernels.at(fn.name);
  AuditedKernel k;
  k.input = c.input;
  k.cubin = c.name;
  k.sha256 = digest;
  k.params = ek.params;
  Environment env;
  env.param_base = ek.has_param_base ? ek.param_base : (c.sm >= 100 ? 0x380u : 0x210u);
  env.param_size = ek.param_size;
  env.param_addr_slot = param_address_slot(c.sm);
  env.constant2 = ek.constant2;
  k.param_base = env.param_base;
  k.names = ParamNames(fn.name, ek.params, opt.layout.structs.empty() ? nullptr : &opt.layout);
  for (std::size_t i = 0; i < opt.assume.size(); ++i)
    if (apply_assume(opt.assume[i], k.names, env.known)) {
      k.assumed.push_back(opt.assume[i].text);
      if (applied) {
        std::lock_guard<std::mutex> lock(*m);
        (*applied)[i] = 1;
      }
    }
  if (extra)
    for (AssumeItem const& a : *extra) {
      if (!apply_assume(a, k.names, env.known))
        throw InputError("assume '" + a.text + "': kernel " + fn.name +
                         " has no parameter named '" + a.name + "'");
      k.assumed.push_back(a.text);
    }
  AnalysisOptions ao;
  ao.threads = threads;
  if (ao.threads == 0 && !ek.req_threads.empty() &&
      (ek.req_threads.size() < 2 || ek.req_threads[1] == 1))
    ao.threads = static_cast<int>(ek.req_threads[0]);
  k.facts = analyze_kernel(mod, fn, env, ao);
  if (!ek.has_param_base)
    k.facts.notes.push_back("no EIATTR_PARAM_CBANK: parameters taken at c[0x0][" +
                            std::to_string(env.param_base) + "]");
  // PTX: parameters loaded before the wait in SASS but only after it in PTX.
  auto const pit = ld.ptx.find(c.ptx_key);
  if (pit != ld.ptx.end()) {
    auto const e = pit->second.find(fn.name);
    if (e != pit->second.end()) {
      k.ptx = true;
      k.ptx_has_wait = e->second.has_wait;
      k.hoisted = hoisted_loads(e->second, ek.params, k.facts.accesses);
    }
  }
  return k;
}

/// The symbol a launch or request names among `symbols`.
std::string pick_symbol(std::vector<std::string> const& symbols, std::string const& name,
                        std::string const& who);

} // namespace

AuditResult run_audit(std::vector<std::string> const& files, AuditOptions const& opt) {
  auto const t0 = std::chrono::steady_clock::now();
  AuditResult res;
  res.cuobjdump_version = tool_version(opt.tools.cuobjdump);
  res.nvdisasm_version = tool_version(opt.tools.nvdisasm);
  auto say = [&](std::string const& s) {
    if (opt.progress)
      opt.progress(s);
  };
  Loaded const ld = load(files, opt);
  std::vector<Cubin const*> const& selected = ld.selected;
  res.cubins = selected.size();
  std::mutex m;

  // 3. Disassemble and analyse, one cubin per job.
  std::vector<char> applied(opt.assume.size(), 0);
  std::vector<std::vector<AuditedKernel>> slots(selected.size());
  std::size_t done = 0;
  parallel_for(opt.requests_only ? 0 : selected.size(), opt.jobs, [&](std::size_t i) {
    Cubin const& c = *selected[i];
    SassModule const mod = disassemble(c, opt);
    std::string const digest = sha256_file(c.path);
    for (SassFunction const& fn : mod.functions) {
      if (!is_kernel(fn, c))
        continue;
      if (!opt.kernel_filter.empty() && fn.name.find(opt.kernel_filter) == std::string::npos)
        continue;
      slots[i].push_back(analyse(c, mod, fn, digest, ld, opt, opt.threads, nullptr, &applied, &m));
    }
    std::lock_guard<std::mutex> lock(m);
    ++done;
    if (selected.size() >= 20 && (done % 50 == 0 || done == selected.size()))
      say("audited " + std::to_string(done) + " of " + std::to_string(selected.size()) + " cubins");
  });
  for (auto& v : slots)
    for (auto& k : v)
      res.kernels.push_back(std::move(k));
  for (std::size_t i = 0; i < opt.assume.size(); ++i)
    if (!applied[i] && !res.kernels.empty())
      throw InputError("--assume '" + opt.assume[i].text +
                       "': no audited kernel has a "
                       "parameter named '" +
                       opt.assume[i].name + "'");

  // 4. Requests: the kernels a chain launches, under the launch's values.
  // The kernels of the selected cubins by their ELF attributes (with requests_only nothing was
  // disassembled yet; otherwise the same set as res.kernels).
  std::vector<std::string> symbols;
  std::map<std::string, Cubin const*> in_cubin;
  for (Cubin const* c : selected)
    for (auto const& [name, info] : c->elf.kernels)
      if (in_cubin.emplace(name, c).second)
        symbols.push_back(name);
  res.requests.resize(opt.requests.size());
  std::vector<std::string> symbol(opt.requests.size());
  std::vector<Cubin const*> holder(opt.requests.size(), nullptr);
  for (std::size_t ri = 0; ri < opt.requests.size(); ++ri) {
    symbol[ri] = pick_symbol(symbols, opt.requests[ri].kernel, opt.requests[ri].key);
    holder[ri] = in_cubin.at(symbol[ri]);
  }
  parallel_for(opt.requests.size(), opt.jobs, [&](std::size_t ri) {
    Cubin const& c = *holder[ri];
    SassModule const mod = disassemble(c, opt);
    KernelRequest const& q = opt.requests[ri];
    SassFunction const* fn = mod.find(symbol[ri]);
    if (!fn)
      throw InputError(q.key + ": kernel " + symbol[ri] + " vanished on the second pass");
    res.requests[ri].request = q;
    res.requests[ri].kernel =
        analyse(c, mod, *fn, sha256_file(c.path), ld, opt, q.threads ? q.threads : opt.threads,
                &q.assume, nullptr, nullptr);
  });
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

namespace {

std::string pick_symbol(std::vector<std::string> const& symbols, std::string const& name,
                        std::string const& who) {
  std::set<std::string> exact, partial;
  for (auto const& s : symbols) {
    if (s == name || short_name(s) == name)
      exact.insert(s);
    else if (s.find(name) != std::string::npos)
      partial.insert(s);
  }
  std::set<std::string> const& hit = exact.empty() ? partial : exact;
  if (hit.empty())
    throw InputError(who + ": no audited kernel is named '" + name + "'");
  if (hit.size() > 1) {
    std::string list;
    int n = 0;
    for (auto const& h : hit)
      if (n++ < 3)
        list += (list.empty() ? "" : ", ") + short_name(h);
    throw InputError(who + ": '" + name + "' names " + std::to_string(hit.size()) + " kernels (" +
                     list + (hit.size() > 3 ? ", ..." : "") + "); give the full symbol");
  }
  return *hit.begin();
}

} // namespace

struct Program::Impl {
  AuditOptions opt;
  Loaded ld;
  struct Held {
    Cubin const* cubin;
    SassModule mod;
    std::string digest;
  };
  std::vector<Held> held;
  std::vector<std::pair<std::string, std::size_t>> symbols; // symbol -> held index
  std::map<std::string, AuditedKernel> cache;
};

Program::Program(std::vector<std::string> const& files, AuditOptions const& opt) : impl_(new Impl) {
  impl_->opt = opt;
  impl_->ld = load(files, opt);
  auto& held = impl_->held;
  held.resize(impl_->ld.selected.size());
  parallel_for(held.size(), opt.jobs, [&](std::size_t i) {
    Cubin const& c = *impl_->ld.selected[i];
    held[i].cubin = &c;
    held[i].mod = disassemble(c, opt);
    held[i].digest = sha256_file(c.path);
  });
  for (std::size_t i = 0; i < held.size(); ++i)
    for (SassFunction const& fn : held[i].mod.functions)
      if (is_kernel(fn, *held[i].cubin))
        impl_->symbols.emplace_back(fn.name, i);
}

Program::~Program() {
  delete impl_;
}

std::vector<std::string> Program::kernels() const {
  std::vector<std::string> out;
  for (auto const& s : impl_->symbols)
    out.push_back(s.first);
  return out;
}

std::string Program::resolve(std::string const& name, std::string const& who) const {
  return pick_symbol(kernels(), name, who);
}

AuditedKernel const& Program::analyze(std::string const& symbol,
                                      std::vector<AssumeItem> const& assume, int threads) {
  std::string key = symbol + "|" + std::to_string(threads);
  for (auto const& a : assume)
    key += "|" + a.name + "=" + std::to_string(a.value);
  auto it = impl_->cache.find(key);
  if (it != impl_->cache.end())
    return it->second;
  for (auto const& [sym, hi] : impl_->symbols)
    if (sym == symbol) {
      Impl::Held const& h = impl_->held[hi];
      SassFunction const* fn = h.mod.find(symbol);
      AuditedKernel k = analyse(*h.cubin, h.mod, *fn, h.digest, impl_->ld, impl_->opt, threads,
                                &assume, nullptr, nullptr);
      return impl_->cache.emplace(key, std::move(k)).first->second;
    }
  throw InputError("no audited kernel " + symbol);
}

} // namespace moefin::audit
