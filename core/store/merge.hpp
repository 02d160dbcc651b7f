#pragma once
// Merging the shard files of one sharded run into one result file (`moefin merge`). Everything is
// validated before anything is written: one build (git_commit), one grid (grid_fingerprint:
// command, settings and every configuration key), one GPU model, one seed, one shard count, no
// shard twice, no row key in two shards. The merged file holds every table's rows, every array
// group, the plan, and each shard's provenance; docs/reference/result-files.md ("Sharded runs and
// merging") has the layout.

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace moefin::h5 {

struct MergeResult {
  int shard_count = 0;
  std::vector<int> present, missing_shards;
  std::size_t configurations = 0;                  // in the grid
  std::vector<std::string> missing_configurations; // planned, not done by any shard given
  std::vector<int> missing_planned_for;            // the shard each of them was planned for
  std::map<std::string, std::size_t> rows;         // table group -> rows merged
  bool written = false;                            // false: refused for missing configurations
  bool complete() const { return missing_configurations.empty() && missing_shards.empty(); }
};

/// Merges `shards` into `out`. A refusal is a FileError naming the file and the reason (one
/// line); missing configurations or shards are not: unless `allow_partial`, nothing is written
/// and the result says what is missing. The file appears under its name only when complete
/// (written beside it first, then renamed).
MergeResult merge_shards(std::string const& out, std::vector<std::string> const& shards,
                         bool allow_partial);

} // namespace moefin::h5
