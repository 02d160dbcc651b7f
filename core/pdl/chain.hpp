#pragma once
// A PDL chain description (DESIGN.md section 3; format in data/README.md, "Chain descriptions"):
// named buffers, kernels in stream order with the paths their CTAs may execute, optional CUDA-graph
// edges with their ports, and an iteration count. Shared by the verifier and the simulator.

#include "core/ops/errors.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moefin::pdl {

enum class OpKind : std::int32_t { kRead, kWrite, kWait, kTrigger, kFence };
enum class FenceScope : std::int32_t { kGpu, kSys };

/// One step of a path. Reads and writes name a buffer (index into Chain::buffers).
struct Op {
  OpKind kind = OpKind::kWait;
  int buffer = -1;
  FenceScope scope = FenceScope::kGpu;

  bool is_access() const { return kind == OpKind::kRead || kind == OpKind::kWrite; }
  friend bool operator==(Op const& a, Op const& b) {
    return a.kind == b.kind && a.buffer == b.buffer && a.scope == b.scope;
  }
};

/// What one CTA may execute, in order. A CTA runs exactly one path of its kernel; any
/// assignment of paths to CTAs is possible, all CTAs on one path included.
using Path = std::vector<Op>;

struct Kernel {
  std::string name;
  bool pdl = true; // stream mode: launched with programmatic stream serialization
  int ctas = 2;    // CTAs of one launch (the simulator runs this many)
  std::vector<Path> paths;
  std::string note;
};

/// Port of a CUDA-graph edge.
enum class Port : std::int32_t {
  kProgrammatic,     // like the stream attribute: launch after trigger, the wait sees it
  kLaunchCompletion, // launch after every upstream CTA started; invisible to a wait
  kDefault,          // launch after the upstream kernel completed (and flushed)
};

struct Edge {
  int from = 0; // kernel indices; from < to (the kernel list is a topological order)
  int to = 0;
  Port port = Port::kDefault;
};

enum class Verdict : std::int32_t { kOrdered, kRace };

/// A stale-read count measured on a GPU for the reads of one buffer in one kernel.
struct MeasuredReads {
  int kernel = 0;
  int buffer = 0;
  bool before_wait = true; // the reads before the kernel's first wait, or those after it
  std::int64_t stale = 0;
  std::int64_t runs = 0;
};

struct Chain {
  std::string name;
  std::string description;
  std::string source; // where the chain comes from (a document, a measurement)
  std::string origin; // the file it was read from, for messages
  std::vector<std::string> buffers;
  std::vector<std::string> buffer_notes;
  std::vector<Kernel> kernels;
  bool graph = false;      // CUDA-graph edges instead of stream order
  std::vector<Edge> edges; // graph mode only
  int iterations = 1;      // the chain repeats (graph replays, consecutive layers)
  std::optional<Verdict> expected;
  std::string measured_gpu;
  std::vector<MeasuredReads> measured;

  int kernel_index(std::string const& name) const; // -1 when absent
  int buffer_index(std::string const& name) const; // -1 when absent
};

/// A malformed or unreadable chain description: "FILE: /json/pointer: what is wrong" on one line.
/// An input error (exit status 2), so that exit status 1 keeps meaning "a race".
class ChainError : public InputError {
public:
  ChainError(std::string const& file, std::string const& pointer, std::string const& what);
};

/// Parses a chain description; every problem is a ChainError naming `origin` and the JSON path.
Chain parse_chain(std::string const& text, std::string const& origin);

/// Reads and parses a file (a missing or unreadable file is a ChainError too).
Chain load_chain(std::string const& path);

/// The JSON text of a chain (the format parse_chain reads).
std::string to_json(Chain const& chain);

char const* port_name(Port p);                     // "programmatic", "launch_completion", "default"
char const* verdict_name(Verdict v);               // "ordered", "race"
std::string op_text(Chain const& c, Op const& op); // "read layout", "wait", "fence gpu", ...

/// Index of the first op of `kind` on the path, or -1.
int first_of(Path const& p, OpKind kind);

/// The CUDA graph that stream capture of `rounds` back-to-back rounds of a stream chain records
/// (a launch with the programmatic-serialization attribute is captured as a programmatic edge;
/// CUDA Programming Guide, "Programmatic Dependent Launch and Synchronization"): kernel k of round
/// r is kernel r * n + k, named "<name>_r<r>" after round 0, with one in-edge from the kernel
/// launched before it, programmatic when it has `pdl`, else default. One replay (iterations 1).
/// Throws std::invalid_argument on a graph chain or rounds < 1.
Chain captured_graph(Chain const& stream, int rounds);

} // namespace moefin::pdl
