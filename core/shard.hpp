#pragma once
// Sweeps split across processes: which part of a configuration list this process runs (from
// `--shard I/N` or from the environment a cluster launcher sets), the deterministic partition of
// the list by estimated cost, the grid fingerprint every part records, and the part's file name.
// Host only: no CUDA, no HDF5, no option parser (the GPU pick is in core/device_pick.hpp).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace moefin::shard {

/// Reads one environment variable (nullopt when unset); tests pass a map instead of the process
/// environment.
using EnvLookup = std::function<std::optional<std::string>(std::string const&)>;

/// The process environment (getenv).
EnvLookup process_environment();

/// Rank, size and node-local rank as one launcher set them.
struct LauncherRank {
  std::string launcher; // "openmpi", "mpich", "srun", "slurm-array"
  int rank = 0, size = 1;
  int local_rank = 0;
  std::string detail; // the variables read, e.g. "OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=2"
  std::string local_source; // the variable the local rank came from, or "none"
};

/// The launcher environment of this process, innermost launcher first: OpenMPI
/// (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK), MPICH Hydra or Cray PMI (PMI_RANK, PMI_SIZE,
/// MPI_LOCALRANKID or PMI_LOCAL_RANK), Slurm's srun (SLURM_PROCID, SLURM_STEP_NUM_TASKS,
/// SLURM_LOCALID; an sbatch script without srun is one process and not a launcher). A launcher
/// without a local rank of its own takes any other's (PMI under srun: SLURM_LOCALID). A Slurm
/// job array (SLURM_ARRAY_TASK_ID, _COUNT, _MIN, _STEP, _MAX) around it multiplies: part =
/// array index * size + rank of N = array count * size. nullopt when none is set. A variable
/// that is set but malformed, or a rank without its size, is an InputError naming it.
std::optional<LauncherRank> detect_launcher(EnvLookup const& env);

/// The part of the configuration list this process runs.
struct Spec {
  int index = 0, count = 1;
  bool active = false;         // false: the whole list, one file named by --out as before
  std::string source = "none"; // "--shard", or the launcher's name
  std::string detail;          // how it was decided, for the provenance and the progress line
  int local_rank = 0;          // picks the GPU (device_pick.hpp)
  std::string local_source = "none";
};

/// What `--shard` accepts besides I/N: the launcher's environment, required, and shard-named
/// files even when it reports a single process (scripts that merge whatever ran).
inline constexpr char const* kFromLauncher = "env";

/// `--shard I/N` (0 <= I < N <= kMaxShards); InputError naming the flag otherwise.
Spec parse_flag(std::string const& text);

inline constexpr int kMaxShards = 100000;

/// The flag wins over the environment; without the flag the launcher's environment applies when
/// it reports more than one process. The local rank always comes from the launcher, when any.
Spec resolve(std::string const& flag_text, EnvLookup const& env);

/// "out/sweep.h5" -> "out/sweep.shard-02-of-16.h5" (the index zero-padded to N's width so that
/// the names sort); a path without an extension gets the suffix appended. Inactive: unchanged.
std::string shard_path(std::string const& out, Spec const& spec);

/// Which shard runs each configuration: greedy longest-processing-time over `cost` (any unit;
/// values below 1 count as 1), configurations taken by decreasing cost and then by index, each
/// to the least loaded shard (the lowest index among equals). Integer costs make every process
/// compute the same partition. Throws std::invalid_argument for shards < 1.
std::vector<int> partition_by_cost(std::vector<std::int64_t> const& cost, int shards);

/// FNV-1a 64 of the command, the settings that change what a row means, and every
/// configuration key in order, as 16 hex digits: equal fingerprints, same grid.
std::string grid_fingerprint(std::string const& command, std::string const& settings,
                             std::vector<std::string> const& keys);

/// Names a shard's result file uses (docs/reference/result-files.md, "Sharded runs and merging"):
/// root attributes, the two tables every shard writes, and the group attribute of tables each shard
/// measures on its own.
namespace names {
inline constexpr char const* kIndex = "shard_index";
inline constexpr char const* kCount = "shard_count";
inline constexpr char const* kSource = "shard_source";
inline constexpr char const* kDetail = "shard_detail";
inline constexpr char const* kCommand = "grid_command";
inline constexpr char const* kFingerprint = "grid_fingerprint";
inline constexpr char const* kSettings = "grid_settings";
inline constexpr char const* kConfigurations = "grid_configurations";
inline constexpr char const* kGridCost = "grid_cost_s";
inline constexpr char const* kShardConfigurations = "shard_configurations";
inline constexpr char const* kShardCost = "shard_cost_s";
inline constexpr char const* kPartition = "shard_partition";
inline constexpr char const* kLocalRank = "local_rank";
inline constexpr char const* kLocalSource = "local_rank_source";
inline constexpr char const* kDeviceOrdinal = "device_ordinal";
inline constexpr char const* kDeviceRule = "device_rule";
inline constexpr char const* kVisibleDevices = "visible_devices";
inline constexpr char const* kCudaVisible = "cuda_visible_devices";
inline constexpr char const* kPciBus = "gpu_pci_bus_id";
inline constexpr char const* kUuid = "gpu_uuid";
inline constexpr char const* kPlan = "shard_plan"; // table: every configuration of the grid
inline constexpr char const* kDone = "shard_done"; // table: the configurations this shard finished
inline constexpr char const* kScope = "shard_scope";
inline constexpr char const* kPerShard = "per-shard"; // rows measured by every shard (keys repeat)
} // namespace names

} // namespace moefin::shard
