#pragma once
// Running the chain for the experiments: slot comparisons, series of batches, replays of a
// mismatch with full buffer dumps, timelines, and where the resident-wave kernels may sit.

#include "core/chain/presets.hpp"
#include "core/chain/shape.hpp"
#include "core/chain/verifier_chain.hpp"
#include "core/cli.hpp"
#include "core/store/h5store.hpp"
#include "kernels/chain/chain.hpp"

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace moefin::chain_run {

/// The first buffer (chain order) whose hash differs in iteration `it`, or -1.
int first_difference(chain::BatchResult const& a, chain::BatchResult const& b, int it);

/// Totals of PDL-on batches compared with PDL-off batches of the same routings.
struct Series {
  std::int64_t routings = 0;
  std::int64_t mismatches = 0; // iterations with any buffer differing
  std::int64_t stale = 0;      // pre-wait index reads that differ from routing's final values
  std::int64_t stale_iterations = 0;
  std::int64_t recorded = 0; // pre-wait index reads finalize recorded
  int first_buffer = -1;
  std::uint64_t first_seed = 0;
  double seconds = 0; // GPU runs of both modes, hashing and the slot copies included
};
void add_batch(Series& s, chain::BatchResult const& on, chain::BatchResult const& off,
               std::vector<std::uint64_t> const& seeds);

/// Replays routing `seed` after its predecessor (chain::replay_predecessor) with PDL on and off,
/// up to `attempts` times, comparing every buffer element by element after both iterations.
struct Replay {
  bool reproduced = false;
  int attempts = 0;
  int buffer = -1;
  std::int64_t index = -1;
  std::string detail; // "out[517]: on 0x3f80, off 0x3f81"
};
Replay replay(chain::LayerWeights const& w, chain::RunnerOptions opt, chain::ChainConfig const& cfg,
              std::uint64_t seed, int attempts);

/// max |a - b| / max |b| over bf16 arrays of n elements; +inf when a has a NaN.
double max_rel_err(std::uint16_t const* a, std::uint16_t const* b, std::size_t n);

/// Writes a timeline as a group of kind "arrays" (docs/reference/experiment-tables.md "Timelines").
void write_timeline(h5::ResultWriter& file, std::string const& group, chain::Timeline const& t,
                    std::string const& key);

/// Where the resident-wave kernels (GEMMs, permute, activation) may sit: CTAs per SM of their
/// grids and whether they ask for the largest shared-memory carveout. Both decide whether early
/// triggers really let later kernels start early (docs/design/layer-chain.md).
struct Residency {
  int ctas_per_sm = 1;
  bool max_shared_carveout = true;
};
/// --ctas-per-sm and --carveout with these defaults.
void add_residency_options(cli::po::options_description& desc, Residency const& defaults);
/// Reads them (range and choice checked: InputError naming the flag).
Residency read_residency_options(cli::po::variables_map const& vm);
void apply(Residency const& r, chain::RunnerOptions& ro);
/// Root attributes ctas_per_sm and carveout, which analysis/ keeps apart as conditions.
void record(Residency const& r, h5::ResultWriter& file);

/// --flavour moefin|released (default moefin): which implementations the chain launches
/// (chain::set_flavour).
void add_flavour_option(cli::po::options_description& desc);
/// Reads it; `released` in a build without the released kernels is an InputError (one line).
std::string read_flavour_option(cli::po::variables_map const& vm);
/// Root attribute `flavour`; a resumed file of another flavour is an InputError.
void record_flavour(std::string const& flavour, h5::ResultWriter& file);

/// "chain flavour: <flavour>" (moefin for files without the attribute).
void print_flavour(h5::Provenance const& root, std::ostream& out);

/// --weights-format: the weight formats of the layer's GEMMs (core/ops/layer_plan.hpp,
/// weights_format_names: bf16-tiled = the tiled grouped GEMM, bf16 and fp4 = the split-K decode
/// GEMM); `what` says what a list means for the command.
void add_weights_format_option(cli::po::options_description& desc, std::string const& what);
/// Its values, each checked (InputError naming the flag), duplicates refused.
std::vector<std::string> read_weights_formats(cli::po::variables_map const& vm);

/// The decode GEMM's limits for one shape before any GPU work: tile 8 or 16 (--tile-m), and for
/// fp4 hidden and intermediate sizes multiples of 128 (--shapes). InputError naming the flag.
void check_weights_format(std::string const& format, chain::LayerShape const& shape,
                          std::int64_t tile_m);

/// The kernels of --delay-kernels ("routing,gemm1"): InputError naming `flag` otherwise.
std::vector<chain::Kernel> parse_delay_kernels(std::string const& text, std::string const& flag);

/// Throws DeviceError "<what> needs a CUDA device: <reason>" when none is usable.
void require_device(std::string const& what);

/// Parses a seed given as decimal or 0x-hex (throws InputError naming `flag`).
std::uint64_t parse_seed(std::string const& flag, std::string const& text);

} // namespace moefin::chain_run
