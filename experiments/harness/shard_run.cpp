#include "experiments/harness/shard_run.hpp"

#include "core/ops/errors.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

namespace moefin::harness {

namespace {

namespace sn = shard::names;

std::vector<h5::Column> plan_columns() {
  return {h5::int_col("index"), h5::int_col("shard"), h5::int_col("cost_us")};
}

std::vector<h5::Column> done_columns() {
  return {h5::int_col("index"), h5::int_col("rows"), h5::real_col("seconds")};
}

std::string text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

/// Whether another shard of the same count was started under this base name.
bool sibling_exists(std::string const& base, shard::Spec spec) {
  for (int i = 0; i < spec.count; ++i) {
    spec.index = i;
    if (std::filesystem::exists(shard::shard_path(base, spec)))
      return true;
  }
  return false;
}

std::string value_of(h5::Provenance const& p, std::string const& name) {
  auto const it = p.find(name);
  return it == p.end() ? std::string() : it->second;
}

} // namespace

void add_shard_option(cli::po::options_description& desc) {
  desc.add_options()(
      "shard", cli::po::value<std::string>()->default_value(""),
      "run part I of N of the configuration list (I/N, 0 <= I < N), balanced by estimated cost, "
      "into OUT.shard-I-of-N.h5; 'env': the part the launcher's environment says (OpenMPI, "
      "MPICH/PMI, srun, Slurm array), required. Without the flag a launcher of more than one "
      "process shards the run the same way. The GPU is local rank mod visible devices; merge "
      "the parts with moefin merge");
}

ShardedRun::ShardedRun(std::string command, cli::po::variables_map const& vm,
                       std::vector<PlannedConfig> configs, std::string settings)
    : ShardedRun(std::move(command), vm["shard"].as<std::string>(), std::move(configs),
                 std::move(settings), shard::process_environment()) {}

ShardedRun::ShardedRun(std::string command, std::string const& shard_flag,
                       std::vector<PlannedConfig> configs, std::string settings,
                       shard::EnvLookup const& env)
    : command_(std::move(command)), settings_(std::move(settings)), configs_(std::move(configs)),
      spec_(shard::resolve(shard_flag, env)) {
  std::vector<std::string> keys;
  for (auto const& c : configs_) {
    keys.push_back(c.key);
    // Whole microseconds: every process computes the same integers, so the same partition.
    cost_us_.push_back(std::max<std::int64_t>(1, std::llround(std::max(c.cost_s, 0.0) * 1e6)));
    grid_cost_s_ += c.cost_s;
  }
  fingerprint_ = shard::grid_fingerprint(command_, settings_, keys);
  owner_ = spec_.active ? shard::partition_by_cost(cost_us_, spec_.count)
                        : std::vector<int>(configs_.size(), spec_.index);
  for (std::size_t i = 0; i < configs_.size(); ++i)
    if (mine(i)) {
      mine_.push_back(i);
      shard_cost_s_ += configs_[i].cost_s;
    }
}

std::size_t ShardedRun::mine_from(std::size_t i) const {
  std::size_t n = 0;
  for (std::size_t j : mine_)
    n += j >= i;
  return n;
}

std::string ShardedRun::summary() const {
  if (!active())
    return "";
  char buf[160];
  std::snprintf(buf, sizeof(buf), ": %zu of %zu configurations, ~%.1f of %.1f min (estimate)",
                mine_.size(), configs_.size(), shard_cost_s_ / 60, grid_cost_s_ / 60);
  std::string s = "shard " + std::to_string(spec_.index) + "/" + std::to_string(spec_.count) +
                  " from " + spec_.source + " (" + spec_.detail + ")" + buf;
  if (device_.selected)
    s += "; GPU: " + device_.rule + " (" + device_.pci_bus_id + ")";
  else if (!device_.reason.empty())
    s += "; no GPU picked: " + device_.reason;
  return s;
}

DevicePick const& ShardedRun::use_device() {
  if (active())
    device_ = pick_device(spec_.local_rank);
  return device_;
}

h5::ResultWriter ShardedRun::open(cli::po::variables_map const& vm) {
  return open(vm["out"].as<std::string>(), vm["resume"].as<std::string>(),
              vm["seed"].as<std::uint64_t>());
}

h5::ResultWriter ShardedRun::open(std::string const& out_path, std::string const& resume_path,
                                  std::uint64_t seed) {
  bool resuming = !resume_path.empty();
  std::string const path = shard::shard_path(resuming ? resume_path : out_path, spec_);
  std::string const me = "shard " + std::to_string(spec_.index) + "/" +
                         std::to_string(spec_.count) + " of grid " + fingerprint_;
  if (resuming && active() && !std::filesystem::exists(path) &&
      sibling_exists(resume_path, spec_)) {
    // A shard that never started (e.g. an array task cancelled while pending) starts now; the
    // others of the same count resume theirs.
    std::cout << "note: " << path << " does not exist yet; starting it\n";
    resuming = false;
  }
  if (resuming) {
    // Checked read-only first, so that a refused resume leaves the file as it was.
    h5::ResultReader const r(path);
    auto const& p = r.provenance();
    bool const is_shard = p.count(sn::kIndex) != 0;
    if (!active() && is_shard)
      throw FileError(path, "is shard " + value_of(p, sn::kIndex) + "/" + value_of(p, sn::kCount) +
                                " of a sharded run: resume it with --shard I/N or under the "
                                "same launcher");
    if (active() && !is_shard)
      throw FileError(path, "is not a shard file: resume it without --shard, outside a "
                            "launcher of several processes");
    if (active() && (value_of(p, sn::kIndex) != std::to_string(spec_.index) ||
                     value_of(p, sn::kCount) != std::to_string(spec_.count) ||
                     value_of(p, sn::kFingerprint) != fingerprint_))
      throw FileError(path, "was written as shard " + value_of(p, sn::kIndex) + "/" +
                                value_of(p, sn::kCount) + " of grid " +
                                value_of(p, sn::kFingerprint) + ", this run is " + me +
                                ": resume with the same grid, settings and shard count");
  }
  auto file = h5::ResultWriter::open(resuming ? std::string() : path,
                                     resuming ? path : std::string(), seed);
  if (!active())
    return file;

  auto set = [&](char const* name, std::string const& v) { file.set_attr("/", name, v); };
  if (!resuming) {
    set(sn::kIndex, std::to_string(spec_.index));
    set(sn::kCount, std::to_string(spec_.count));
    set(sn::kSource, spec_.source);
    set(sn::kDetail, spec_.detail);
    set(sn::kCommand, command_);
    set(sn::kFingerprint, fingerprint_);
    set(sn::kSettings, settings_);
    set(sn::kConfigurations, std::to_string(configs_.size()));
    set(sn::kGridCost, text(grid_cost_s_));
    set(sn::kShardConfigurations, std::to_string(mine_.size()));
    set(sn::kShardCost, text(shard_cost_s_));
    set(sn::kPartition, "greedy longest-processing-time: configurations by decreasing estimated "
                        "cost (whole us), then index, each to the least loaded shard (lowest "
                        "index among equals)");
    set(sn::kLocalRank, std::to_string(spec_.local_rank));
    set(sn::kLocalSource, spec_.local_source);
    char const* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
    set(sn::kCudaVisible, cvd ? cvd : "unset");
    if (device_.selected) {
      set(sn::kDeviceOrdinal, std::to_string(device_.ordinal));
      set(sn::kVisibleDevices, std::to_string(device_.visible));
      set(sn::kDeviceRule, device_.rule);
      set(sn::kPciBus, device_.pci_bus_id);
      set(sn::kUuid, device_.uuid);
    } else {
      set(sn::kDeviceOrdinal, "none");
      set(sn::kDeviceRule, device_.reason.empty() ? "no GPU picked (the experiment uses none)"
                                                  : "no GPU picked: " + device_.reason);
    }
    auto plan = file.table(sn::kPlan, plan_columns(),
                           "every configuration of the grid: its index in the grid's order, the "
                           "shard that runs it and its estimated cost (us)");
    for (std::size_t i = 0; i < configs_.size(); ++i) {
      h5::Row row;
      row.set("index", static_cast<std::int64_t>(i))
          .set("shard", owner_[i])
          .set("cost_us", cost_us_[i]);
      plan.append(configs_[i].key, row);
    }
  } else {
    if (file.table(sn::kPlan, plan_columns()).rows() != configs_.size())
      throw FileError(path, std::string("/") + sn::kPlan + " does not list the grid's " +
                                std::to_string(configs_.size()) + " configurations");
    if (device_.selected) {
      set("resumed_device_ordinal", std::to_string(device_.ordinal));
      set("resumed_gpu_uuid", device_.uuid);
    }
  }
  done_ = file.table(sn::kDone, done_columns(),
                     "configurations this shard finished: index in the grid, rows written, "
                     "seconds it took");
  return file;
}

std::string ShardedRun::resume_name(cli::po::variables_map const& vm,
                                    std::string const& path) const {
  if (!active())
    return path;
  auto const& resume = vm["resume"].as<std::string>();
  return resume.empty() ? vm["out"].as<std::string>() : resume;
}

void ShardedRun::per_shard_table(h5::ResultWriter& file, std::string const& group) {
  if (active())
    file.set_attr(group, sn::kScope, sn::kPerShard);
}

bool ShardedRun::recorded(std::size_t i) const {
  return done_ && done_->has(configs_.at(i).key);
}

void ShardedRun::finished(std::size_t i, std::int64_t rows, double seconds) {
  if (!active() || !done_ || recorded(i))
    return;
  h5::Row row;
  row.set("index", static_cast<std::int64_t>(i)).set("rows", rows).set("seconds", seconds);
  done_->append(configs_.at(i).key, row);
}

} // namespace moefin::harness
