#pragma once
// `moefin audit` without its command line: the inputs (cubins, fatbins, objects, shared
// libraries, executables, .cu files) turned into cubins of one architecture, disassembled in
// parallel, and every kernel analysed (audit/analysis.hpp), with parameter names and the
// PTX comparison. Launch-specific audits (a chain's assumptions and block size for one kernel)
// are answered in a second pass over the cubins that hold those kernels.

#include "audit/analysis.hpp"
#include "audit/layout.hpp"
#include "audit/ptx.hpp"
#include "audit/tools.hpp"

#include <functional>
#include <string>
#include <vector>

namespace moefin::audit {

/// One kernel audited under a launch's own parameter values and block size.
struct KernelRequest {
  std::string key;    // who asks (a launch name), for messages
  std::string kernel; // the symbol, or a substring that names exactly one audited kernel
  std::vector<AssumeItem> assume;
  int threads = 0;
};

struct AuditOptions {
  std::string arch; // "sm_90", "sm_100a", ...; empty: each input's only one (sm_90 when several)
  std::vector<std::string> nvcc_flags; // for .cu inputs
  Tools tools;
  int jobs = 1;
  std::string kernel_filter; // audit only kernels whose symbol contains it
  int threads = 0;           // threads per CTA for every kernel (0: unknown)
  std::vector<AssumeItem> assume;
  Layout layout;
  std::vector<KernelRequest> requests;
  bool requests_only = false; // audit only the requested kernels (no table of every kernel)
  std::string work_dir; // scratch directory (created and removed by the caller)
  std::function<void(std::string const&)> progress;
};

struct AuditedKernel {
  std::string input;  // the file it came from, as named
  std::string cubin;  // the cubin inside it (or the input itself)
  std::string sha256; // of the cubin
  KernelFacts facts;
  ParamNames names;
  std::vector<ParamInfo> params;
  std::uint32_t param_base = 0;
  std::vector<std::string> assumed; // the --assume items that applied
  bool ptx = false;                 // PTX of the kernel was available
  bool ptx_has_wait = false;
  std::vector<std::uint32_t> hoisted; // parameters loaded before the wait in SASS, not in PTX
};

struct RequestResult {
  KernelRequest request;
  AuditedKernel kernel;
};

struct AuditResult {
  std::vector<AuditedKernel> kernels;
  std::vector<RequestResult> requests;
  std::string cuobjdump_version, nvdisasm_version;
  std::size_t cubins = 0;
  double seconds = 0;
};

/// Audits every kernel of `files`. Throws FileError for a bad file (not a CUDA binary, no SASS
/// for the architecture, a failing tool, stripped names) and InputError for bad usage (an
/// --assume that names no parameter of any kernel, a request naming no kernel or several).
AuditResult run_audit(std::vector<std::string> const& files, AuditOptions const& opt);

/// The inputs loaded once and kept in memory (their SASS parsed), for analysing a few kernels
/// under many launches' values: the chain comparisons of the tests. Results are cached per
/// (kernel, assumptions, threads).
class Program {
public:
  Program(std::vector<std::string> const& files, AuditOptions const& opt);
  ~Program();
  Program(Program const&) = delete;
  Program& operator=(Program const&) = delete;

  /// Every kernel symbol, in the order of the inputs.
  std::vector<std::string> kernels() const;
  /// The symbol `name` stands for (the symbol itself, its demangled name without parameters,
  /// or a substring naming exactly one kernel). Throws InputError naming `who` otherwise.
  std::string resolve(std::string const& name, std::string const& who) const;
  /// The kernel analysed with these values (after the options' --assume) and block size.
  AuditedKernel const& analyze(std::string const& symbol, std::vector<AssumeItem> const& assume,
                               int threads);

private:
  struct Impl;
  Impl* impl_;
};

/// The parameters (offsets into the block) that the SASS reads before the wait while the PTX
/// reads them only after it: loads ptxas moved above griddepcontrol.wait.
std::vector<std::uint32_t> hoisted_loads(PtxEntry const& ptx, std::vector<ParamInfo> const& params,
                                         std::vector<Access> const& sass);

/// The architecture number of "sm_90", "sm_100a", "sm_100f", "90"; 0 when not one.
int arch_number(std::string const& arch);

/// The c[0x0] offset that holds the parameter block's generic address on an architecture
/// (TMA descriptors of __grid_constant__ parameters are addressed from it), or -1.
std::int64_t param_address_slot(int sm);

} // namespace moefin::audit
