#pragma once
// The cells of the race matrix (moefin race): presets x trigger placements of the kernels between
// routing and finalize x finalize's metadata placement x injected delay. Host-only.

#include "core/chain/presets.hpp"
#include "core/chain/shape.hpp"
#include "core/chain/verifier_chain.hpp"
#include "core/store/h5store.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moefin::race {

struct Cell {
  chain::ChainConfig cfg;
  std::string triggers; // chain::between_triggers(cfg)
  std::string meta;     // "before" / "after"
  std::int64_t delay_ns = 0;
  std::string delayed_kernel; // kernel name, "none" without delay
  std::string key;            // unique row key of the table
  bool benchmark = false;     // is_benchmark(cfg): the cell that must race
  bool own = false;           // the preset's own placements (first trigger variant)
};

struct Axes {
  std::vector<chain::Preset> presets;
  bool full = false; // every combination of the four kernels' placements, else one at a time
  std::vector<std::string> metas = {"before", "after"};
  std::vector<std::int64_t> delays = {0, 3000, 25000};
  std::vector<chain::Kernel> delay_kernels = {chain::Kernel::kRouting};
  chain::FinalizeChoice finalize; // the dispatch rule ("new")
  std::string overrides;          // --set, applied to every cell before the axes
  std::string flavour = "moefin";  // chain::set_flavour of every cell (fixed triggers written in)
};

/// The trigger variations of one preset's chain, deduplicated, the preset's own first:
/// one-at-a-time (each of gemm1/gemm2 over exit/entry/after_wait/after_writes, permute/act over
/// entry/after_wait, then all four at entry and all four after their wait), or the full product.
std::vector<chain::ChainConfig> trigger_variants(chain::ChainConfig const& base, bool full);

std::vector<Cell> cells(Axes const& axes);

/// The cell that must race: every kernel between routing and finalize triggers at entry (before
/// its wait), finalize reads metadata before its wait, and routing is delayed by >= 20 us between
/// its trigger and its writes (it triggers at entry or after its wait; a routing that triggers
/// after its writes or at exit keeps every later kernel from starting until it has written).
bool is_benchmark(chain::ChainConfig const& cfg);

/// The finalize variant ChainRunner launches for `cfg` on (shape, T), without a GPU: the dispatch
/// rule on the shape (ChainRunner::finalize_variant applies it to the device buffers), or the
/// forced variant.
finalize::FinalizeVariant const& planned_finalize_variant(chain::LayerShape const& shape,
                                                          std::int64_t tokens,
                                                          chain::ChainConfig const& cfg);

/// The configuration a /race_matrix row ran, rebuilt from its columns (preset, triggers, meta,
/// delay_ns, delayed_kernel) and the file's root attributes (`overrides`: the run's --set) as
/// cells() built it; the finalize choice is not rebuilt (the row's `finalize` column names the
/// variant that ran). Throws InputError naming the column it cannot map.
chain::ChainConfig row_config(h5::Table const& t, std::size_t row, h5::Provenance const& root);

/// The verifier on the chain of row `row` (chain::verify_cell), in the launch mode of the root
/// attribute `launch` (graph when absent: the only mode before the attribute existed), with the
/// chain flavour of the root attribute `weights_format` (bf16-tiled when absent).
chain::CellVerdict row_verdict(h5::Table const& t, std::size_t row, h5::Provenance const& root);

/// Replaces `unknown` in the `verifier` column (files written before moefin race filled it) by
/// the verdict of row_verdict; returns how many it replaced.
std::size_t fill_verdicts(h5::Table& t, h5::Provenance const& root);

} // namespace moefin::race
