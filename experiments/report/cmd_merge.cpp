// moefin merge OUT.h5 SHARD...: the shard files of one sharded run (--shard I/N, or a launcher)
// into one result file that every reader takes like any other. Refuses shards of another build,
// grid, GPU model or seed, a shard given twice and overlapping keys (one line naming the file
// and the reason); reports the shards and configurations missing and writes nothing then unless
// --allow-partial.

#include "core/store/merge.hpp"
#include "experiments/commands.hpp"

#include <iostream>
#include <map>

namespace moefin::cmd {

int merge(cli::Args const& args) {
  cli::po::options_description desc("merge options");
  std::vector<std::string> files;
  desc.add_options()("files", cli::po::value(&files)->multitoken(),
                     "OUT.h5 (created; must not exist) then the shard files, in any order. "
                     "Refused with one line naming the file (exit 1): not a shard, another "
                     "build, grid, GPU model, seed or shard count, a shard twice, a key in two "
                     "shards. Missing shards and configurations are listed and stop the merge "
                     "(exit 1) unless --allow-partial")(
      "allow-partial", "write the merged file even when shards or configurations are missing "
                       "(root attribute merge_state = partial); the report still lists them");
  cli::po::positional_options_description pos;
  pos.add("files", -1);
  cli::po::variables_map vm;
  if (!cli::parse("merge", "OUT.h5 SHARD.h5... [--allow-partial]", desc, args, vm, &pos))
    return kExitOk;
  if (files.size() < 2)
    throw UsageError("merge: needs OUT.h5 and at least one shard file (usage: moefin merge "
                     "OUT.h5 SHARD.h5... [--allow-partial])");
  std::string const out = files.front();
  for (auto const& f : files)
    if (f.empty()) // '' as OUT would merge into ".merging" in the current folder
      throw UsageError("merge: an empty file name (usage: moefin merge OUT.h5 SHARD.h5... "
                       "[--allow-partial])");
  std::vector<std::string> const shards(files.begin() + 1, files.end());
  bool const allow_partial = vm.count("allow-partial") != 0;

  auto const res = h5::merge_shards(out, shards, allow_partial);
  std::cout << "merge: " << res.present.size() << " of " << res.shard_count << " shards";
  if (!res.missing_shards.empty()) {
    std::cout << "; missing:";
    for (int s : res.missing_shards)
      std::cout << " " << s;
  }
  std::cout << "\nmerge: " << res.configurations - res.missing_configurations.size() << " of "
            << res.configurations << " configurations finished";
  if (!res.missing_configurations.empty()) {
    std::map<int, std::size_t> by_shard;
    for (int s : res.missing_planned_for)
      ++by_shard[s];
    std::cout << "; " << res.missing_configurations.size() << " missing (planned for";
    for (auto const& kv : by_shard)
      std::cout << " shard " << kv.first << ": " << kv.second;
    std::cout << "):\n";
    constexpr std::size_t kShown = 20;
    for (std::size_t i = 0; i < res.missing_configurations.size() && i < kShown; ++i)
      std::cout << "  " << res.missing_configurations[i] << " (shard " << res.missing_planned_for[i]
                << ")\n";
    if (res.missing_configurations.size() > kShown)
      std::cout << "  ... and " << res.missing_configurations.size() - kShown << " more\n";
  } else {
    std::cout << "\n";
  }
  if (!res.written) {
    std::cerr << "moefin: merge: refused: " << res.missing_shards.size() << " of "
              << res.shard_count << " shards and " << res.missing_configurations.size() << " of "
              << res.configurations << " configurations missing; --allow-partial writes " << out
              << " anyway\n";
    return kExitFailure;
  }
  std::cout << "wrote " << out << " (" << (res.complete() ? "complete" : "partial") << ";";
  for (auto const& kv : res.rows)
    std::cout << " /" << kv.first << " " << kv.second;
  std::cout << " rows)\n";
  return kExitOk;
}

} // namespace moefin::cmd
