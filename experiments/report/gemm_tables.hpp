#pragma once
// The tables of `moefin sweep gemm` and `moefin sweep routing` (/gemm_sweep, /gemm_check,
// /routing_sweep, /routing_check): their columns and printed forms, rendered from a result file
// so that a committed file prints the same tables anywhere (no GPU needed).

#include "core/store/h5store.hpp"

#include <iosfwd>
#include <string>
#include <vector>

namespace moefin::gemm_tables {

/// The variant name of the split-K diagnostic without math (loads and stores only); the longest
/// value of the variant columns, which are sized for it.
inline constexpr char const* kSplitkLoads = "splitk_loads";
/// The variant name of `sweep gemm --read-floor`: a plain streaming read of a launch's bytes.
inline constexpr char const* kReadFloor = "read";
/// The name prefix of the loads-only candidates (kernels/gemm/decode_candidates.hpp).
inline constexpr char const* kLoadsCandidatePrefix = "sk+loads";

/// Whether rows of this variant are a GEMM (not a diagnostic: splitk_loads, sk+loads..., read).
bool is_gemm_row(std::string const& variant);

std::vector<h5::Column> gemm_sweep_columns();
std::vector<h5::Column> gemm_check_columns();
std::vector<h5::Column> bandwidth_columns(); // /copy_bandwidth and /read_bandwidth of this sweep
std::vector<h5::Column> routing_sweep_columns();
std::vector<h5::Column> routing_check_columns();

/// Per (shape, GEMM, T): time, GB/s and share of the copy bandwidth of every (format, variant,
/// mode), and the splitk/tiled speedup; then the check rows.
void print_gemm_tables(h5::ResultReader const& file, std::ostream& os);
/// Per (shape, GEMM, format): the copy fraction of every (variant, mode) at every T, and the
/// best GEMM row per T (printed last by `sweep gemm`).
void print_copy_fraction_tables(h5::ResultReader const& file, std::ostream& os);
/// Per (shape, T): time of every routing implementation, and the check rows.
void print_routing_tables(h5::ResultReader const& file, std::ostream& os);

/// What `sweep gemm --print` and `sweep routing --print` show, rendered whole before anything is
/// printed; a FileError naming the file when it holds no /gemm_sweep (/routing_sweep), or a table
/// of it lacks a column.
std::string gemm_print(h5::ResultReader const& file);
std::string routing_print(h5::ResultReader const& file);

} // namespace moefin::gemm_tables
