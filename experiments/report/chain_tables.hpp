#pragma once
// The tables of the chain experiments (/equivalence, /race_matrix, /layer_sweep): their columns,
// and the printed forms, rendered from a result file so that a committed file prints the same
// tables anywhere (no GPU needed).

#include "core/store/h5store.hpp"

#include <iosfwd>
#include <string>
#include <vector>

namespace moefin::chain_tables {

std::vector<h5::Column> equivalence_columns();
std::vector<h5::Column> race_columns();
std::vector<h5::Column> layer_columns();

/// One line per row: mismatches, stale reads, reference error, throughput.
void print_equivalence(h5::Table const& t, std::ostream& os);

/// The race matrix: one line per (shape, T, preset, triggers), one cell per (meta, delay):
/// "mismatches/iterations s<stale-read iterations>", then " R" where the `verifier` column says
/// race and " !" where a race was seen in a chain it calls ordered.
void print_race_matrix(h5::Table const& t, std::ostream& os);

/// A published speedup (data/published/*.csv).
struct Published {
  std::int64_t hidden = 0, experts = 0, topk = 0, tokens = 0;
  std::string arch;
  double speedup = 0; // 0: not published
};
/// Reads one of the published CSVs (comment lines '#', a header with hidden, experts, topk,
/// tokens, arch and speedup). Throws FileError naming the file.
std::vector<Published> read_published(std::string const& path);

/// The seed-format tables from /layer_sweep: new vs previous finalize (seed-after placement)
/// beside whole_op_speedup.csv, and seed-after vs seed-before (new finalize) beside
/// pdl_ordering_speedup.csv; `published_dir` holds both CSVs; `gpu` (the file's root attribute
/// gpu_name) labels the measured column. A file with the weights_format column gets both tables
/// per format, then the per-layer time of every format side by side (seed-after, new finalize)
/// with the PyTorch peer's variants as further columns where `peers` (its /layer_sweep) is given
/// or the file holds rows of finalize `torch`.
void print_layer_tables(h5::Table const& t, std::string const& published_dir,
                        std::string const& gpu, std::ostream& os, h5::Table const* peers = nullptr);

/// data/published of the source tree (compiled in), or ./data/published when that is missing.
std::string default_published_dir();

} // namespace moefin::chain_tables
