#pragma once
// A PDL chain description (docs/design/pdl.md; format in docs/reference/chain-json.md):
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

/// What a chain description may hold (docs/reference/chain-json.md, "Errors and limits").
/// Everything is checked while the file is read, before anything whose size or depth scales with
/// the input is built, so that the verifier and the simulator run in bounded time and memory on any
/// file.
struct ChainLimits {
  static constexpr std::size_t kFileBytes = 1 << 20; // 1 MiB
  static constexpr int kDepth = 8;                   // nested arrays and objects
  static constexpr int kKernels = 32;
  static constexpr int kPaths = 16;     // per kernel
  static constexpr int kOps = 32;       // per path
  static constexpr int kTotalOps = 512; // over every path of every kernel
  static constexpr int kBuffers = 32;
  static constexpr int kIterations = 16;
  static constexpr int kInstances = 128; // kernels x iterations
  static constexpr int kCtas = 1024;     // per kernel
  static constexpr int kMeasuredReads = 64;
  static constexpr int kNameChars = 64;
  // Work of one run of the verifier and of one simulated schedule, from the counts above:
  static constexpr std::int64_t kPairs = 20000;            // conflicting access pairs checked
  static constexpr std::int64_t kScheduleEvents = 1 << 20; // events of one simulated schedule
  static constexpr std::int64_t kScheduleAccesses = 8192;  // reads and writes of one schedule
};

/// Conflicting access pairs `moefin verify` checks (earlier access in iteration 0, later one in
/// any iteration), counted without running it.
std::int64_t verifier_pairs(Chain const& c);

/// Events of one simulated schedule at most: per kernel instance, its CTAs times their longest
/// path plus start and exit, and four per instance.
std::int64_t schedule_events(Chain const& c);

/// Reads and writes of one simulated schedule at most: per kernel instance, its CTAs times the
/// most accesses on one of its paths (the simulator compares them pairwise, per buffer).
std::int64_t schedule_accesses(Chain const& c);

/// A malformed or unreadable chain description: "FILE: /json/pointer: what is wrong" on one line.
/// An input error (exit status 2), so that exit status 1 keeps meaning "a race".
class ChainError : public InputError {
public:
  /// "FILE: POINTER: WHAT"; an empty pointer (the file itself) leaves it out.
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
