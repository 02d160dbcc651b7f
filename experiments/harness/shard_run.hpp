#pragma once
// The sharded side of an experiment that sweeps a configuration list: `--shard I/N` or the
// launcher's environment decides the part, the partition is balanced by each configuration's
// estimated cost, the GPU is picked by local rank, and each shard writes (and resumes) its own
// file, named from --out, recording the plan and every configuration it finished. Without a
// shard (no flag, no launcher of more than one process) everything behaves as before: the whole
// list, the --out file, nothing added to it.

#include "core/cli.hpp"
#include "core/device_pick.hpp"
#include "core/store/h5store.hpp"
#include "core/shard.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace moefin::harness {

/// One configuration of an experiment's list: its key (stable across runs) and estimated cost.
struct PlannedConfig {
  std::string key;
  double cost_s = 0;
};

/// Declares `--shard I/N|env`.
void add_shard_option(cli::po::options_description& desc);

class ShardedRun {
public:
  /// Resolves the shard from `--shard` (vm) and the environment and partitions `configs`.
  /// `settings` names what changes a row's meaning besides the keys (modes, rounds, ...): it goes
  /// into the grid fingerprint, so shards of different settings never merge.
  ShardedRun(std::string command, cli::po::variables_map const& vm,
             std::vector<PlannedConfig> configs, std::string settings);
  /// The same, with an explicit environment (tests).
  ShardedRun(std::string command, std::string const& shard_flag, std::vector<PlannedConfig> configs,
             std::string settings, shard::EnvLookup const& env);

  shard::Spec const& spec() const { return spec_; }
  bool active() const { return spec_.active; }
  std::size_t size() const { return configs_.size(); }
  /// Whether this process runs configuration i; the indices it runs, ascending.
  bool mine(std::size_t i) const { return owner_.at(i) == spec_.index; }
  /// What `--list` shows: `mine` for a shard, or every unit (an empty function) unsharded.
  std::function<bool(std::size_t)> listed() const {
    if (!active())
      return {};
    return [this](std::size_t i) { return mine(i); };
  }
  std::vector<std::size_t> const& mine() const { return mine_; }
  /// How many of this process's configurations come at or after index i.
  std::size_t mine_from(std::size_t i) const;
  double grid_cost_s() const { return grid_cost_s_; }
  double shard_cost_s() const { return shard_cost_s_; }
  std::string const& fingerprint() const { return fingerprint_; }

  /// "shard 1/4 (openmpi: ...): 37 of 144 configurations, ~12.0 of 48.1 min (estimate)";
  /// empty when inactive.
  std::string summary() const;

  /// Active runs: makes device `local rank % visible devices` current. Call before anything
  /// else touches CUDA (query_device, the result file's provenance, streams).
  DevicePick const& use_device();

  /// Creates (or, with `resume_path`, continues) this process's result file: for a shard the
  /// name derived from the path (shard::shard_path), its root attributes recording the shard, the
  /// grid and the GPU pick, and /shard_plan; on resume the file must be the same shard of the
  /// same grid (FileError otherwise). A shard whose file is missing while another shard of the
  /// same count exists under that name starts afresh (it never ran).
  h5::ResultWriter open(std::string const& out_path, std::string const& resume_path,
                        std::uint64_t seed);
  /// Opens with the --out / --resume / --seed options of `vm`.
  h5::ResultWriter open(cli::po::variables_map const& vm);

  /// What to pass to --resume to continue `path`: the path itself, or for a shard the base name
  /// it was started with (the shard's file name derives from it).
  std::string resume_name(cli::po::variables_map const& vm, std::string const& path) const;

  /// Marks a table every shard measures on its own (e.g. the launch floor): the merge keeps each
  /// shard's rows, keys suffixed with the shard. No-op when inactive.
  void per_shard_table(h5::ResultWriter& file, std::string const& group);

  /// Records configuration i as finished, its rows written, in /shard_done (no-op when inactive
  /// or already recorded).
  void finished(std::size_t i, std::int64_t rows, double seconds);
  bool recorded(std::size_t i) const;

private:
  std::string command_, settings_, fingerprint_;
  std::vector<PlannedConfig> configs_;
  shard::Spec spec_;
  std::vector<std::int64_t> cost_us_;
  std::vector<int> owner_;
  std::vector<std::size_t> mine_;
  double grid_cost_s_ = 0, shard_cost_s_ = 0;
  DevicePick device_;
  std::optional<h5::TableWriter> done_;
};

} // namespace moefin::harness
