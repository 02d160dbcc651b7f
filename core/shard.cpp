#include "core/shard.hpp"

#include "core/ops/errors.hpp"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <queue>
#include <stdexcept>
#include <utility>

namespace moefin::shard {

namespace {

/// Parses a whole decimal string into [0, kMaxShards * kMaxShards]; nullopt if it is not one.
std::optional<std::int64_t> parse_count(std::string const& text) {
  if (text.empty() || text.size() > 12)
    return std::nullopt;
  std::int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

/// An environment variable as a non-negative integer; nullopt when unset.
std::optional<int> env_int(EnvLookup const& env, std::string const& name) {
  auto const text = env(name);
  if (!text)
    return std::nullopt;
  auto const v = parse_count(*text);
  if (!v || *v > kMaxShards)
    throw InputError("launcher environment: " + name + "='" + text->substr(0, 40) +
                     "' is not an integer in [0, " + std::to_string(kMaxShards) + "]");
  return static_cast<int>(*v);
}

int env_required(EnvLookup const& env, std::string const& name, std::string const& because) {
  auto const v = env_int(env, name);
  if (!v)
    throw InputError("launcher environment: " + because + " is set but " + name + " is not");
  return *v;
}

std::string assign(std::string const& name, int v) {
  return name + "=" + std::to_string(v);
}

/// One process launcher: the variable that says it started this process, rank, size, local rank.
struct LauncherVars {
  char const* launcher;
  char const* gate;
  char const* rank;
  char const* size;
  std::vector<char const*> local;
};

/// Every local-rank variable, for a launcher that sets none itself (MPICH's PMI under srun).
std::vector<char const*> const kAnyLocal{"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                         "PMI_LOCAL_RANK", "SLURM_LOCALID"};

std::optional<LauncherRank> detect_process_launcher(EnvLookup const& env) {
  // Innermost first: mpirun started inside a Slurm allocation also sees srun's variables. An
  // sbatch script itself has SLURM_PROCID and SLURM_NTASKS but is one process; only the tasks
  // srun starts have SLURM_STEP_NUM_TASKS, so that is what marks srun.
  static std::vector<LauncherVars> const kLaunchers{
      {"openmpi",
       "OMPI_COMM_WORLD_RANK",
       "OMPI_COMM_WORLD_RANK",
       "OMPI_COMM_WORLD_SIZE",
       {"OMPI_COMM_WORLD_LOCAL_RANK"}},
      {"mpich", "PMI_RANK", "PMI_RANK", "PMI_SIZE", {"MPI_LOCALRANKID", "PMI_LOCAL_RANK"}},
      {"srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", {"SLURM_LOCALID"}},
  };
  for (auto const& l : kLaunchers) {
    if (!env(l.gate))
      continue;
    LauncherRank r;
    r.launcher = l.launcher;
    r.rank = env_required(env, l.rank, l.gate);
    r.size = env_required(env, l.size, l.rank);
    r.detail = assign(l.rank, r.rank) + ", " + assign(l.size, r.size);
    for (auto const& locals : {l.local, kAnyLocal}) {
      for (char const* s : locals)
        if (auto const local = env_int(env, s)) {
          r.local_rank = *local;
          r.local_source = s;
          r.detail += ", " + assign(s, *local);
          break;
        }
      if (!r.local_source.empty())
        break;
    }
    if (r.local_source.empty())
      r.local_source = "none";
    if (r.size < 1 || r.rank >= r.size)
      throw InputError("launcher environment: " + r.detail + " is not a rank below its size");
    return r;
  }
  return std::nullopt;
}

std::optional<LauncherRank> detect_array(EnvLookup const& env) {
  auto const id = env_int(env, "SLURM_ARRAY_TASK_ID");
  if (!id)
    return std::nullopt;
  std::string const because = "SLURM_ARRAY_TASK_ID";
  int const count = env_required(env, "SLURM_ARRAY_TASK_COUNT", because);
  int const min = env_required(env, "SLURM_ARRAY_TASK_MIN", because);
  int const step = env_int(env, "SLURM_ARRAY_TASK_STEP").value_or(1);
  auto const max = env_int(env, "SLURM_ARRAY_TASK_MAX");
  std::string detail =
      assign("SLURM_ARRAY_TASK_ID", *id) + ", " + assign("SLURM_ARRAY_TASK_COUNT", count) + ", " +
      assign("SLURM_ARRAY_TASK_MIN", min) + ", " + assign("SLURM_ARRAY_TASK_STEP", step);
  if (max)
    detail += ", " + assign("SLURM_ARRAY_TASK_MAX", *max);
  // Only an evenly stepped range maps task ids to 0..count-1 without knowing the other tasks.
  bool const even =
      count >= 1 && step >= 1 && *id >= min && (*id - min) % step == 0 &&
      (*id - min) / step < count &&
      (!max || static_cast<std::int64_t>(min) + std::int64_t(count - 1) * step == *max);
  if (!even)
    throw InputError("launcher environment: the Slurm array is not one evenly stepped range "
                     "(" +
                     detail + "); pass --shard I/N");
  LauncherRank r;
  r.launcher = "slurm-array";
  r.rank = (*id - min) / step;
  r.size = count;
  r.detail = detail;
  r.local_source = "none";
  return r;
}

} // namespace

EnvLookup process_environment() {
  return [](std::string const& name) -> std::optional<std::string> {
    char const* v = std::getenv(name.c_str());
    if (!v)
      return std::nullopt;
    return std::string(v);
  };
}

std::optional<LauncherRank> detect_launcher(EnvLookup const& env) {
  auto const array = detect_array(env);
  auto const proc = detect_process_launcher(env);
  if (!array)
    return proc;
  if (!proc)
    return array;
  // Each array task runs a launcher of its own: the array index counts whole launcher jobs.
  std::int64_t const size = std::int64_t(array->size) * proc->size;
  if (size > kMaxShards)
    throw InputError("launcher environment: " + std::to_string(array->size) + " array tasks x " +
                     std::to_string(proc->size) + " processes exceed " +
                     std::to_string(kMaxShards) + " shards");
  LauncherRank r = *proc;
  r.launcher = "slurm-array+" + proc->launcher;
  r.rank = array->rank * proc->size + proc->rank;
  r.size = static_cast<int>(size);
  r.detail = array->detail + "; " + proc->detail;
  return r;
}

Spec parse_flag(std::string const& text) {
  auto const bad = [&](std::string const& why) {
    return InputError("--shard: '" + text.substr(0, 40) + "' " + why +
                      " (expected I/N with 0 <= I < N <= " + std::to_string(kMaxShards) +
                      ", e.g. 0/4, or '" + kFromLauncher + "')");
  };
  auto const slash = text.find('/');
  if (slash == std::string::npos)
    throw bad("is not I/N");
  auto const i = parse_count(text.substr(0, slash));
  auto const n = parse_count(text.substr(slash + 1));
  if (!i || !n)
    throw bad("is not I/N");
  if (*n < 1 || *n > kMaxShards)
    throw bad("has N out of range");
  if (*i >= *n)
    throw bad("has I >= N");
  Spec s;
  s.index = static_cast<int>(*i);
  s.count = static_cast<int>(*n);
  s.active = true;
  s.source = "--shard";
  s.detail = "--shard " + text;
  return s;
}

Spec resolve(std::string const& flag_text, EnvLookup const& env) {
  auto const launcher = detect_launcher(env);
  Spec s;
  if (!flag_text.empty() && flag_text != kFromLauncher) {
    s = parse_flag(flag_text);
    if (launcher)
      s.detail +=
          " (overrides the " + launcher->launcher + " environment: " + launcher->detail + ")";
  } else if (launcher) {
    s.index = launcher->rank;
    s.count = launcher->size;
    s.active = flag_text == kFromLauncher || launcher->size > 1;
    s.source = launcher->launcher;
    s.detail = launcher->detail;
  } else if (flag_text == kFromLauncher) {
    throw InputError(std::string("--shard ") + kFromLauncher +
                     ": no launcher environment in this process (OpenMPI, MPICH/PMI, srun or "
                     "a Slurm array)");
  }
  if (launcher) {
    s.local_rank = launcher->local_rank;
    s.local_source = launcher->local_source;
  }
  return s;
}

std::string shard_path(std::string const& out, Spec const& spec) {
  if (!spec.active)
    return out;
  std::string const n = std::to_string(spec.count);
  std::string i = std::to_string(spec.index);
  std::size_t const width = std::to_string(spec.count - 1).size();
  if (i.size() < width)
    i.insert(0, width - i.size(), '0');
  std::string const tag = ".shard-" + i + "-of-" + n;
  auto const slash = out.find_last_of('/');
  auto const dot = out.find_last_of('.');
  std::size_t const name_start = slash == std::string::npos ? 0 : slash + 1;
  if (dot == std::string::npos || dot <= name_start) // no extension (or a dot-file's name)
    return out + tag;
  return out.substr(0, dot) + tag + out.substr(dot);
}

std::vector<int> partition_by_cost(std::vector<std::int64_t> const& cost, int shards) {
  if (shards < 1)
    throw std::invalid_argument("partition_by_cost: shards must be >= 1");
  std::vector<std::size_t> order(cost.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  auto const c = [&](std::size_t i) { return std::max<std::int64_t>(cost[i], 1); };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return c(a) > c(b); });
  using Load = std::pair<std::int64_t, int>; // (load, shard): the least loaded, then lowest index
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> loads;
  for (int s = 0; s < shards; ++s)
    loads.push({0, s});
  std::vector<int> owner(cost.size(), 0);
  for (std::size_t i : order) {
    Load l = loads.top();
    loads.pop();
    owner[i] = l.second;
    l.first += c(i);
    loads.push(l);
  }
  return owner;
}

std::string grid_fingerprint(std::string const& command, std::string const& settings,
                             std::vector<std::string> const& keys) {
  std::uint64_t h = 14695981039346656037ull;
  auto const feed = [&](std::string const& s, char end) {
    for (unsigned char ch : s)
      h = (h ^ ch) * 1099511628211ull;
    h = (h ^ static_cast<unsigned char>(end)) * 1099511628211ull;
  };
  feed(command, '\0');
  feed(settings, '\0');
  for (auto const& k : keys)
    feed(k, '\n');
  static char const kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4)
    out[static_cast<std::size_t>(i)] = kHex[h & 15];
  return out;
}

} // namespace moefin::shard
