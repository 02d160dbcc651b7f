#pragma once
// The /finalize_sweep schema and the seed-format tables printed from result files (no GPU):
// median speedup of small_batch over scalar per top-K, minimum in parentheses, one column per
// architecture found in the files, the published Blackwell columns beside them.

#include "core/store/h5store.hpp"

#include <string>
#include <vector>

namespace moefin::fin {

/// Columns of /finalize_sweep (and /finalize_repeat) in the order the sweep writes them.
std::vector<h5::Column> finalize_sweep_columns();
std::vector<h5::Column> launch_floor_columns();
std::vector<h5::Column> copy_bandwidth_columns();

/// data/published/finalize_only_speedup.csv of this source tree, else the same path relative to
/// the working directory.
std::string default_published_csv();

/// The protocol of a file's mode b rows: its root attribute `mode_b_producer` ("pdl-wait": the
/// producer launched with the PDL attribute and waiting at entry, docs/design/experiments.md), or
/// "plain" for files that predate it (producer without the attribute or a wait).
std::string mode_b_producer(h5::Provenance const& root);

/// The mode name a row of `mode` from a file of this protocol is tabulated under: "b0" for mode
/// b of a plain-producer file (another measurement than mode b), else `mode`.
std::string tabulated_mode(std::string const& mode, std::string const& producer);

/// `group` of the file with its `mode` column (when it has one) as tabulated_mode() names it:
/// what the tables and `moefin compare` read, so that mode b0 is never matched with mode b.
h5::Table read_tabulated(h5::ResultReader const& reader, std::string const& group);

/// Records `producer` on a new file; a resumed file keeps its own (a file without the
/// attribute predates it: "plain") and a different one is an InputError naming --producer.
void record_mode_b_producer(h5::ResultWriter& file, std::string const& producer);

/// Every table the files support: per mode (a with the published columns, b, b0, c), the same on
/// the released kernels (fi_small_batch vs fi_scalar, modes a and b), the T = 1 view (per-launch
/// time and the targets), the ablation per architecture and mode, the faithfulness of moefin's
/// variants to the released ones (X / fi_X), peers as extra columns, and the spread of repeated
/// configurations. FileError for an unreadable file; a missing published CSV is reported in the
/// text.
std::string render_finalize_tables(std::vector<std::string> const& files,
                                   std::string const& published_csv);

} // namespace moefin::fin
