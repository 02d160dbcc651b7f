#pragma once
// A launches file (`moefin audit --chain LAUNCHES.json`, format in docs/reference/launches-json.md
// "Launches files"): the kernels of a stream in launch order by symbol, whether each is launched
// with the PDL attribute, its parameter values and block size, and which of its parameters name
// which buffer of the chain. Composed with the audited kernels into a chain description of the
// verifier (core/pdl), each kernel being its audited fragment.

#include "audit/audit.hpp"
#include "core/pdl/chain.hpp"
#include "core/pdl/verifier.hpp"

#include <optional>
#include <string>
#include <vector>

namespace moefin::audit {

/// One kernel a launch may run (a released GEMM's tactics are alternatives of one launch).
struct Alternative {
  std::string kernel; // symbol, demangled name, or unique substring
  int threads = 0;    // threads per CTA (0: the launch's)
};

struct Launch {
  std::string name;   // the chain's kernel name
  std::string kernel; // symbol or unique substring (the first alternative)
  std::vector<Alternative> alternatives; // every kernel it may run; {kernel} when one
  bool pdl = true;
  int threads = 0;
  std::vector<AssumeItem> assume;
  // Parameter name -> the buffers it names (several for an array of pointers indexed at run
  // time: the audit traces the access to the array, not to one element).
  std::vector<std::pair<std::string, std::vector<std::string>>> params;
  std::string note;
};

/// A read whose verdict the file asks for (the claim under test).
struct ReadCheck {
  std::string launch;
  std::string buffer;
  bool before_wait = true;
  std::optional<pdl::Verdict> expected;
};

struct Launches {
  std::string origin; // the file
  std::string name, description, source;
  std::vector<std::pair<std::string, std::string>> buffers; // name -> what it holds
  std::vector<Launch> launches;
  int iterations = 1;
  std::optional<pdl::Verdict> expected;
  std::vector<ReadCheck> checks;
  std::vector<std::string> files; // inputs to audit besides the command line (absolute)
};

/// Parses a launches file. Throws FileError ("FILE: /json/pointer: problem", exit 1).
Launches load_launches(std::string const& path);
Launches parse_launches(std::string const& text, std::string const& origin);

/// The kernel requests of a launches file: one per alternative of each launch, launch by launch.
std::vector<KernelRequest> launch_requests(Launches const& l);

/// Index into launch_requests(l) of alternative `alt` of launch `launch`.
std::size_t request_index(Launches const& l, std::size_t launch, std::size_t alt);

struct ComposedKernel {
  std::string launch;
  AuditedKernel const* audited = nullptr;
  std::vector<std::string> unmapped; // parameters accessed but naming no buffer of the chain
  std::vector<std::string> unknown;  // "p.x" names in the file that mean nothing for the kernel
};

struct Composition {
  pdl::Chain chain;
  std::vector<ComposedKernel> kernels;
};

/// The chain description: the launches in order, each kernel's paths its fragment with the
/// parameters mapped to buffers; `choice[i]` picks launch i's alternative (all 0 when empty).
/// Throws FileError naming the launches file when a parameter name in it is not a parameter of
/// its kernel.
Composition compose(Launches const& l, std::vector<RequestResult> const& audited,
                    std::vector<std::size_t> const& choice = {});

/// The fragment of alternative `alt` of launch `launch` in the chain's buffer names (what decides
/// the verdict: alternatives with equal fragments are interchangeable).
std::vector<std::vector<std::string>> launch_fragment(Launches const& l, std::size_t launch,
                                                      AuditedKernel const& k,
                                                      std::vector<std::string>* unmapped = nullptr);

/// For a pre-wait read of `reader` (kernel index) racing or ordered against an earlier kernel
/// `writer`: the kernel that links them by the ordering rule of docs/design/pdl.md (the first one
/// in between that waits before it triggers on every path, or is launched without PDL, with every
/// kernel before it waiting on every path), or -1.
int linking_kernel(pdl::Chain const& c, int writer, int reader);

} // namespace moefin::audit
