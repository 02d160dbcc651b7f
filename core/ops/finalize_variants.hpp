#pragma once
// The finalize variants as data. Every kernel finalize can launch is one registry entry: its name
// in result files, its role in the tables, what the chain and the verifier need to know about its
// PDL behaviour (default trigger, pre-wait metadata reads), its limits, which default experiment
// lists it appears in, a host-only geometry function and a launch function. The experiments, the
// tables, the layer plan and the dispatcher read entries; nothing switches over variant names.
//
// Entries are registered by a static Registrar in the file that holds the kernel's launch code
// (kernels/finalize/finalize_dispatch.cu, one line per variant), so a new variant is one kernel
// function plus one entry. Libraries holding registrars are linked whole
// (cmake/whole_archive.cmake) so that the linker keeps them. Header-only, no CUDA: host-only builds
// register the same entries with a null launch function.

#include "core/ops/errors.hpp"
#include "core/ops/finalize_params.hpp"
#include "core/ops/pdl_knobs.hpp"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct CUstream_st;

namespace moefin::finalize {

using Stream = CUstream_st*; // cudaStream_t

struct FinalizeVariant;

/// CTA budget of the dispatch rule: the seed hard-codes 1184 (148 SMs x 8).
constexpr int kPublishedCtaBudget = 1184;

/// How one finalize call runs.
struct Options {
  FinalizeVariant const* variant = nullptr; // nullptr: the dispatch rule (finalize::select)
  int cta_budget = kPublishedCtaBudget;     // or SMs x 8 of the device (device_cta_budget())
  bool deepseek_fp8 = false;                // the dispatch rule picks the FP8 block-scale variant
  bool allow_small_batch = true;            // false: the dispatch rule before the seed's change

  // Whether the run lets the kernel read indices and weights before its grid-dependency wait
  // (the chain's finalize.meta knob). A variant reads them there only when it is one that does
  // (FinalizeVariant::meta_before_wait) and this allows it.
  bool metadata_before_wait = true;

  // PDL knobs. Trigger::kDefault = the variant's own placement (FinalizeVariant::default_trigger).
  PdlKnobs pdl;

  // Race study: when set, the kernel copies the permuted indices it read before its wait here
  // ([num_tokens * top_k], device), so the host can compare them with what routing wrote.
  // Variants that read them after the wait record the indices they used.
  std::int32_t* pre_wait_snapshot = nullptr;

  // small_batch tuning: 128-bit column chunks per CTA (8, 16 or 32); 0 = the policy's choice.
  int slice_chunks = 0;

  // small_batch_v2 geometry override, for the measurement its policy table is made from
  // (variant names small_batch_v2/c<chunks>/l<loads>): 128-bit chunks per CTA and experts per
  // thread; 0 = the table's choice.
  int v2_chunks = 0, v2_loads = 0;

  // Launch the instrumented instantiation even where the knobs allow a lean one (LaunchPlan::
  // lean; tests compare the two bit for bit).
  bool force_instrumented = false;
};

/// The launch a variant makes for a shape: grid, block and its resolved PDL behaviour.
struct LaunchPlan {
  FinalizeVariant const* variant = nullptr;
  int grid_x = 0, grid_y = 0;   // CTAs; per-CTA stamps are indexed blockIdx.x + grid_x * blockIdx.y
  int block_x = 0, block_y = 0; // threads
  int loads_per_thread = 0;     // independent expert loads in flight per thread
  Trigger trigger = Trigger::kExit; // resolved placement (never kDefault)
  bool meta_before_wait = false;    // resolved: indices and weights are read before the wait
  int groups = 1;                   // top-K groups combined per output chunk
  // Set by a geometry that picks the placement per shape (small_batch_v2's policy table):
  // plan() uses it instead of the entry's default_trigger for Trigger::kDefault.
  Trigger policy_trigger = Trigger::kDefault;
  // small_batch_v2: a chunk's top-K groups in separate warps, combined through shared memory
  // (the released lane layout; its table picks it per shape), not in adjacent lanes.
  bool warp_groups = false;
  // A lean instantiation serves the launch: placement and metadata side fixed at compile time,
  // no delay, stamps or snapshot (kernels/finalize/finalize_kernels.cuh, "Knob sets").
  bool lean = false;
  std::int64_t ctas() const { return static_cast<std::int64_t>(grid_x) * grid_y; }
};

/// What a variant is for, in the tables: the dispatcher picks one dispatchable moefin entry per
/// role, and ratios compare entries of one role family against its baseline.
enum class Role : std::int32_t {
  kPrevious = 0, // the kernel before the seed's change (scalar): the baseline of every ratio
  kLargeBatch,   // one CTA per token, 128-bit loads (vecload)
  kSmallBatch,   // the seed's kernel and its ablations
  kFp8,          // DeepSeek-FP8 block scales, E4M3 output
  kDispatch,     // a dispatcher (picks one of the others per shape)
};
inline char const* role_name(Role r) {
  switch (r) {
  case Role::kPrevious:
    return "previous";
  case Role::kLargeBatch:
    return "large_batch";
  case Role::kSmallBatch:
    return "small_batch";
  case Role::kFp8:
    return "fp8";
  case Role::kDispatch:
    return "dispatch";
  }
  return "?";
}

/// Whose kernel it is.
enum class Source : std::int32_t {
  kMoefin = 0, // this repository's kernels
  kReleased,   // a released library's kernels built from its package
  kTest,       // defined in the test tree
};
inline char const* source_name(Source s) {
  switch (s) {
  case Source::kMoefin:
    return "moefin";
  case Source::kReleased:
    return "released";
  case Source::kTest:
    return "test";
  }
  return "?";
}

/// The default experiment lists (bit flags of FinalizeVariant::lists).
enum List : unsigned {
  kListCheck = 1u, // moefin check finalize --variants
  kListSweep = 2u, // moefin sweep finalize --variants
  kListChain = 4u, // the layer chain's finalize axis (sweep layer), beside new and previous
};

/// Host-only geometry: validates the shape for the variant (InputError naming the field, the
/// value and what the variant supports) and computes its launch. Needs no GPU.
using GeometryFn = LaunchPlan (*)(FinalizeParams const&, Options const&, FinalizeVariant const&);
/// Launches `plan` on `stream` and checks the launch (capturable in a CUDA graph).
using LaunchFn = void (*)(FinalizeParams const&, Options const&, LaunchPlan const&, Stream);

struct FinalizeVariant {
  std::string name; // in result files and on the command line ("scalar", "small_batch", ...)
  Role role = Role::kPrevious;
  Source source = Source::kMoefin;
  // The variant this one's ratios are computed against (same role family, e.g. small_batch ->
  // scalar, a released small-batch kernel -> the released scalar one); empty: it is a baseline.
  std::string baseline;
  // Ablations: the full variant (`ablation_of`) and the ingredient this one lacks (`ablation`).
  std::string ablation_of, ablation;
  Trigger default_trigger = Trigger::kExit; // its placement for Trigger::kDefault
  bool meta_before_wait = false;  // reads indices and weights before its wait when allowed
  bool fp8_output = false;        // E4M3 output with per-(token, 128-column) scales
  bool needs_128bit_rows = false; // hidden and hidden_padded multiples of 8, 16-byte aligned rows
  std::int64_t max_top_k = 0;     // 0: any
  bool dispatchable = false;      // the dispatch rule may pick it (one per role and source)
  // No kernel of its own: GEMM2 reduces in its epilogue (kernels/finalize/fused_finalize.hpp);
  // only the layer chain runs it, and its plan gives GEMM2 finalize's reads and writes.
  bool inside_gemm2 = false;
  unsigned lists = 0; // List flags
  int order = 0;      // position in lists and tables (then the name)
  std::string note;   // one line for --help
  GeometryFn geometry = nullptr;
  LaunchFn launch = nullptr; // nullptr in host-only builds

  bool in_list(unsigned l) const { return (lists & l) != 0; }
  /// Whether the kernel reads indices and weights before its wait in a run with `allowed`.
  bool reads_meta_before_wait(bool allowed) const { return meta_before_wait && allowed; }
  /// The trigger the variant uses for a requested one (kDefault: its own).
  Trigger trigger_for(Trigger requested) const { return resolve(requested, default_trigger); }

  // Chainable setters, so that a registry entry reads as one declaration.
  FinalizeVariant& as(Role r, Source s = Source::kMoefin) {
    role = r;
    source = s;
    return *this;
  }
  FinalizeVariant& against(std::string b) {
    baseline = std::move(b);
    return *this;
  }
  FinalizeVariant& ablates(std::string of, std::string ingredient) {
    ablation_of = std::move(of);
    ablation = std::move(ingredient);
    return *this;
  }
  FinalizeVariant& triggers(Trigger t) {
    default_trigger = t;
    return *this;
  }
  FinalizeVariant& meta_before(bool b = true) {
    meta_before_wait = b;
    return *this;
  }
  FinalizeVariant& fp8(bool b = true) {
    fp8_output = b;
    return *this;
  }
  FinalizeVariant& vectorized(std::int64_t top_k_limit) {
    needs_128bit_rows = true;
    max_top_k = top_k_limit;
    return *this;
  }
  FinalizeVariant& dispatched(bool b = true) {
    dispatchable = b;
    return *this;
  }
  FinalizeVariant& fused_into_gemm2(bool b = true) {
    inside_gemm2 = b;
    return *this;
  }
  FinalizeVariant& listed(unsigned l, int position) {
    lists = l;
    order = position;
    return *this;
  }
  FinalizeVariant& noted(std::string n) {
    note = std::move(n);
    return *this;
  }
  FinalizeVariant& runs(GeometryFn g, LaunchFn l) {
    geometry = g;
    launch = l;
    return *this;
  }
};

/// A new entry named `name` (the start of a registration: variant("x").as(...)....).
inline FinalizeVariant variant_entry(std::string name) {
  FinalizeVariant v;
  v.name = std::move(name);
  return v;
}

/// Every registered variant. Entries never move once added (a deque), so pointers to them stay
/// valid for the life of the process and serve as variant ids.
class Registry {
public:
  static Registry& instance() {
    static Registry r;
    return r;
  }

  /// Adds an entry; a second entry of the same name, or one without a geometry, is a bug of the
  /// build (std::logic_error at start-up).
  FinalizeVariant const& add(FinalizeVariant v) {
    if (v.name.empty() || v.geometry == nullptr)
      throw std::logic_error("finalize variant registry: entry '" + v.name +
                             "' without a name or a geometry function");
    if (find(v.name))
      throw std::logic_error("finalize variant registry: two entries named '" + v.name + "'");
    entries_.push_back(std::move(v));
    return entries_.back();
  }

  FinalizeVariant const* find(std::string_view name) const {
    for (auto const& v : entries_)
      if (v.name == name)
        return &v;
    return nullptr;
  }

  /// Every entry in list order (FinalizeVariant::order, then the name).
  std::vector<FinalizeVariant const*> all() const {
    std::vector<FinalizeVariant const*> out;
    for (auto const& v : entries_)
      out.push_back(&v);
    std::sort(out.begin(), out.end(), [](auto const* a, auto const* b) {
      return a->order != b->order ? a->order < b->order : a->name < b->name;
    });
    return out;
  }

private:
  Registry() = default;
  std::deque<FinalizeVariant> entries_;
};

/// Registers an entry at static initialization: `Registrar const kX(variant_entry("x")...);`.
struct Registrar {
  explicit Registrar(FinalizeVariant v) : entry(&Registry::instance().add(std::move(v))) {}
  FinalizeVariant const* entry;
};

inline FinalizeVariant const* find_variant(std::string_view name) {
  return Registry::instance().find(name);
}

/// Entries of a default list (List flags; 0: every entry), in list order.
inline std::vector<FinalizeVariant const*> variants(unsigned list = 0) {
  std::vector<FinalizeVariant const*> out;
  for (auto const* v : Registry::instance().all())
    if (list == 0 || v->in_list(list))
      out.push_back(v);
  return out;
}

/// "scalar, vecload, ...": the names of `vs`.
inline std::string variant_names(std::vector<FinalizeVariant const*> const& vs) {
  std::string s;
  for (auto const* v : vs)
    s += (s.empty() ? "" : ", ") + v->name;
  return s;
}

/// The entry named `name`; InputError naming `what` (a flag or a column) and listing the
/// registered names otherwise.
inline FinalizeVariant const& variant(std::string_view name, std::string const& what) {
  if (auto const* v = find_variant(name))
    return *v;
  throw InputError(what + ": '" + std::string(name) + "' is not a finalize variant (" +
                   variant_names(variants()) + ")");
}

/// The baseline entry of `v` (its `baseline`, or itself when it is one); InputError when the
/// named baseline is not registered.
inline FinalizeVariant const& baseline_of(FinalizeVariant const& v) {
  return v.baseline.empty() ? v : variant(v.baseline, "baseline of " + v.name);
}

} // namespace moefin::finalize
