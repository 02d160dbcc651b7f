#include "core/store/merge.hpp"

#include "core/ops/errors.hpp"
#include "core/shard.hpp"
#include "core/store/h5store.hpp"

#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>

namespace moefin::h5 {

namespace {

namespace fs = std::filesystem;
namespace sn = shard::names;

/// Root attributes that describe one shard's process, not the run: kept per shard in
/// /merge_shard_<i> and /merge_shards, left out of the merged file's root.
std::set<std::string> const& per_process_attributes() {
  static std::set<std::string> const names{sn::kIndex,
                                           sn::kSource,
                                           sn::kDetail,
                                           sn::kShardConfigurations,
                                           sn::kShardCost,
                                           sn::kLocalRank,
                                           sn::kLocalSource,
                                           sn::kDeviceOrdinal,
                                           sn::kDeviceRule,
                                           sn::kVisibleDevices,
                                           sn::kCudaVisible,
                                           sn::kPciBus,
                                           sn::kUuid,
                                           "resumed_by",
                                           "resumed_date_utc",
                                           "resumed_gpu_uuid",
                                           "resumed_device_ordinal",
                                           "moefin_state"};
  return names;
}

struct Shard {
  std::string path;
  std::unique_ptr<ResultReader> reader;
  int index = 0;
  std::map<std::string, Table> tables;   // every table group
  std::map<std::string, bool> per_shard; // table group -> shard_scope = per-shard
  std::vector<std::string> other_groups; // array groups, copied whole
  std::map<std::string, std::map<std::string, std::string>> group_attrs; // of the table groups
};

std::string attr(Shard const& s, std::string const& name) {
  auto const& p = s.reader->provenance();
  auto const it = p.find(name);
  if (it == p.end())
    throw FileError(s.path, "no " + name + " attribute (written by another version?)");
  return it->second;
}

std::string attr_or(Shard const& s, std::string const& name, std::string const& fallback) {
  auto const& p = s.reader->provenance();
  auto const it = p.find(name);
  return it == p.end() ? fallback : it->second;
}

int attr_int(Shard const& s, std::string const& name) {
  std::string const v = attr(s, name);
  std::size_t used = 0;
  int x = -1;
  try {
    x = std::stoi(v, &used);
  } catch (std::exception const&) {
    used = 0;
  }
  if (v.empty() || used != v.size() || x < 0)
    throw FileError(s.path, "attribute " + name + "='" + v + "' is not a non-negative integer");
  return x;
}

std::string shard_name(int index, int count) {
  std::string i = std::to_string(index);
  std::size_t const width = std::to_string(std::max(count - 1, 0)).size();
  if (i.size() < width)
    i.insert(0, width - i.size(), '0');
  return i;
}

std::string fit(std::string s, std::size_t len) {
  if (s.size() >= len)
    s.resize(len - 1);
  return s;
}

/// Opens one input and checks that it is a shard; reads its tables.
Shard open_shard(std::string const& path) {
  Shard s;
  s.path = path;
  s.reader = std::make_unique<ResultReader>(path);
  if (!s.reader->provenance().count(sn::kIndex))
    throw FileError(path, std::string("not a shard (no ") + sn::kIndex +
                              " attribute): merge takes the files a run with --shard I/N or "
                              "under a launcher writes");
  s.index = attr_int(s, sn::kIndex);
  for (auto const& g : s.reader->groups()) {
    auto attrs = s.reader->group_attrs(g);
    if (attrs.count("kind") && attrs.at("kind") == "table") {
      s.tables.emplace(g, s.reader->read_table(g));
      s.per_shard[g] = attrs.count(sn::kScope) && attrs.at(sn::kScope) == sn::kPerShard;
      s.group_attrs[g] = std::move(attrs);
    } else {
      s.other_groups.push_back(g);
    }
  }
  for (char const* needed : {sn::kPlan, sn::kDone})
    if (!s.tables.count(needed))
      throw FileError(path, std::string("no /") + needed + " table (not a complete shard file)");
  return s;
}

/// Refuses a shard that does not belong with the first one.
void check_same_run(Shard const& ref, Shard const& s) {
  auto const same = [&](char const* name, std::string const& what, std::string const& hint) {
    std::string const a = attr(ref, name), b = attr(s, name);
    if (a != b)
      throw FileError(s.path, what + " " + b + " differs from " + ref.path + "'s " + a + hint);
  };
  same("git_commit", "commit", " (the shards of one merge come from one build)");
  std::string const fa = attr(ref, sn::kFingerprint), fb = attr(s, sn::kFingerprint);
  if (fa != fb)
    throw FileError(s.path, "grid " + fb + " (" + attr_or(s, sn::kCommand, "?") + ", " +
                                attr_or(s, sn::kConfigurations, "?") +
                                " configurations) differs from " + ref.path + "'s " + fa + " (" +
                                attr_or(ref, sn::kCommand, "?") + ", " +
                                attr_or(ref, sn::kConfigurations, "?") +
                                " configurations): another command, grid or settings");
  same("gpu_name", "GPU model", "");
  same("seed", "seed", "");
  same(sn::kCount, "shard count", "");
}

/// The keys of a table; a table without rows has no column vectors at all in h5::Table.
std::vector<std::string> const& keys_of(Table const& t) {
  static std::vector<std::string> const kNone;
  return t.rows ? t.keys() : kNone;
}

bool same_columns(std::vector<Column> const& a, std::vector<Column> const& b) {
  if (a.size() != b.size())
    return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].type != b[i].type || a[i].str_len != b[i].str_len)
      return false;
  return true;
}

std::vector<Column> user_columns(Table const& t) {
  std::vector<Column> out;
  for (auto const& c : t.columns)
    if (c.name != "key" && c.name != "sample_offset" && c.name != "sample_count")
      out.push_back(c);
  return out;
}

std::string merged_key(Shard const& s, std::string const& group, std::string const& key,
                       int count) {
  if (!s.per_shard.at(group))
    return key;
  std::string const k = key + ",shard=" + shard_name(s.index, count);
  if (k.size() >= 160)
    throw FileError(s.path, "key '" + key + "' of /" + group + " is too long for its shard suffix");
  return k;
}

Row row_of(Table const& t, std::vector<Column> const& cols, std::size_t r) {
  Row row;
  for (auto const& c : cols) {
    if (c.type == ColType::kInt64)
      row.set(c.name, t.ints.at(c.name)[r]);
    else if (c.type == ColType::kFloat64)
      row.set(c.name, t.reals.at(c.name)[r]);
    else
      row.set(c.name, t.strings.at(c.name)[r]);
  }
  return row;
}

/// The root attributes of the merged file: what every shard agrees on, the earliest start, and
/// what the merge adds.
Provenance merged_provenance(std::vector<Shard> const& shards, MergeResult const& res) {
  std::set<std::string> names;
  for (auto const& s : shards)
    for (auto const& kv : s.reader->provenance())
      names.insert(kv.first);
  Provenance p;
  for (auto const& n : names) {
    if (per_process_attributes().count(n))
      continue;
    std::set<std::string> values;
    for (auto const& s : shards)
      values.insert(attr_or(s, n, "(not recorded)"));
    if (values.size() == 1)
      p[n] = *values.begin();
    else if (n == "date_utc")
      p[n] = *values.begin(); // ISO 8601 sorts by time: the run's first start
    else
      p[n] = "differs between shards (see /merge_shards and /merge_shard_<i>)";
  }
  std::string present, from, missing;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    present += (i ? "," : "") + std::to_string(shards[i].index);
    from += (i ? "," : "") + fs::path(shards[i].path).filename().string();
  }
  for (std::size_t i = 0; i < res.missing_shards.size(); ++i)
    missing += (i ? "," : "") + std::to_string(res.missing_shards[i]);
  p["merge_state"] = res.complete() ? "complete" : "partial";
  p["merged_shards"] = present;
  p["missing_shards"] = missing.empty() ? "none" : missing;
  p["missing_configurations"] = std::to_string(res.missing_configurations.size());
  p["merged_from"] = from;
  p["merged_by"] = command_line();
  p["merged_date_utc"] = utc_now();
  return p;
}

/// Array groups (timelines, layouts) are copied whole; a name two shards both use gets the
/// second one's shard as suffix (readers find timelines by content, not by name).
void copy_array_groups(std::string const& dst_path, std::vector<Shard> const& shards, int count) {
  hid_t const dst = H5Fopen(dst_path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (dst < 0)
    throw FileError(dst_path, "cannot reopen to copy the array groups");
  std::unique_ptr<hid_t, void (*)(hid_t*)> dst_guard(new hid_t(dst), [](hid_t* h) {
    H5Fclose(*h);
    delete h;
  });
  for (auto const& s : shards) {
    if (s.other_groups.empty())
      continue;
    hid_t const src = H5Fopen(s.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (src < 0)
      throw FileError(s.path, "cannot reopen to copy its array groups");
    std::unique_ptr<hid_t, void (*)(hid_t*)> src_guard(new hid_t(src), [](hid_t* h) {
      H5Fclose(*h);
      delete h;
    });
    for (auto const& g : s.other_groups) {
      std::string name = g;
      for (int n = 0; H5Lexists(dst, name.c_str(), H5P_DEFAULT) > 0; ++n)
        name = g + "_shard" + shard_name(s.index, count) + (n ? "_" + std::to_string(n) : "");
      if (H5Ocopy(src, g.c_str(), dst, name.c_str(), H5P_DEFAULT, H5P_DEFAULT) < 0)
        throw FileError(s.path, "cannot copy /" + g + " into " + dst_path);
    }
  }
  if (H5Fflush(dst, H5F_SCOPE_GLOBAL) < 0)
    throw FileError(dst_path, "cannot flush");
}

std::vector<Column> merge_shards_columns() {
  return {int_col("shard"),          str_col("file", 160),    str_col("host", 64),
          str_col("gpu_name", 64),   str_col("gpu_uuid", 48), str_col("gpu_pci_bus_id", 24),
          int_col("device_ordinal"), str_col("date_utc", 24), int_col("planned"),
          int_col("done"),           int_col("rows"),         real_col("estimated_s"),
          real_col("measured_s")};
}

} // namespace

MergeResult merge_shards(std::string const& out, std::vector<std::string> const& inputs,
                         bool allow_partial) {
  MergeResult res;
  if (inputs.empty())
    throw UsageError("merge: no shard files given");
  std::error_code ec;
  if (fs::exists(out, ec))
    throw FileError(out, "already exists (merge writes a new file; remove it first)");

  // 1. Every input is a shard of the same run, each shard once.
  std::vector<Shard> shards;
  for (auto const& path : inputs)
    shards.push_back(open_shard(path));
  for (std::size_t i = 1; i < shards.size(); ++i)
    check_same_run(shards[0], shards[i]);
  std::sort(shards.begin(), shards.end(),
            [](Shard const& a, Shard const& b) { return a.index < b.index; });
  res.shard_count = attr_int(shards[0], sn::kCount);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    if (shards[i].index >= res.shard_count)
      throw FileError(shards[i].path, "shard index " + std::to_string(shards[i].index) +
                                          " is not below its count " +
                                          std::to_string(res.shard_count));
    if (i && shards[i].index == shards[i - 1].index)
      throw FileError(shards[i].path, "shard " + std::to_string(shards[i].index) + "/" +
                                          std::to_string(res.shard_count) + " again (also " +
                                          shards[i - 1].path + ")");
    res.present.push_back(shards[i].index);
  }
  for (int i = 0, j = 0; i < res.shard_count; ++i) {
    if (j < static_cast<int>(res.present.size()) && res.present[static_cast<std::size_t>(j)] == i)
      ++j;
    else
      res.missing_shards.push_back(i);
  }

  // 2. The plan (identical in every shard: the fingerprint covers its keys) against what each
  // shard says it finished.
  Shard const& ref = shards[0];
  Table const& plan = ref.tables.at(sn::kPlan);
  res.configurations = plan.rows;
  if (std::to_string(plan.rows) != attr(ref, sn::kConfigurations))
    throw FileError(ref.path, "/" + std::string(sn::kPlan) + " has " + std::to_string(plan.rows) +
                                  " rows, the grid " + attr(ref, sn::kConfigurations));
  std::map<std::string, int> planned;
  for (std::size_t r = 0; r < plan.rows; ++r)
    planned[plan.keys()[r]] = static_cast<int>(plan.ints.at("shard")[r]);
  std::set<std::string> done;
  for (auto const& s : shards) {
    Table const& d = s.tables.at(sn::kDone);
    for (auto const& k : keys_of(d)) {
      auto const it = planned.find(k);
      if (it == planned.end())
        throw FileError(s.path, "finished configuration '" + k + "' is not in the grid's plan");
      if (it->second != s.index)
        throw FileError(s.path, "finished configuration '" + k + "' is planned for shard " +
                                    std::to_string(it->second) + ", not this one");
      done.insert(k);
    }
  }
  for (auto const& k : keys_of(plan))
    if (!done.count(k)) {
      res.missing_configurations.push_back(k);
      res.missing_planned_for.push_back(planned.at(k));
    }

  // 3. Every table: the same columns in every shard, no key in two shards.
  std::vector<std::string> order;
  std::map<std::string, std::map<std::string, std::string>> owner; // group -> key -> path
  for (auto const& s : shards)
    for (auto const& kv : s.tables) {
      std::string const& g = kv.first;
      if (g == sn::kPlan)
        continue;
      if (std::find(order.begin(), order.end(), g) == order.end())
        order.push_back(g);
      for (auto const& other : shards)
        if (&other != &s && other.tables.count(g) &&
            !same_columns(other.tables.at(g).columns, kv.second.columns))
          throw FileError(s.path, "table /" + g + " has other columns than in " + other.path);
      auto& keys = owner[g];
      for (auto const& k : keys_of(kv.second)) {
        std::string const mk = merged_key(s, g, k, res.shard_count);
        auto const [it, fresh] = keys.emplace(mk, s.path);
        if (!fresh)
          throw FileError(s.path, "key '" + k + "' of /" + g + " is also in " + it->second +
                                      " (the shards overlap)");
      }
    }
  if (!res.complete() && !allow_partial)
    return res;

  // 4. Write beside the target, rename when complete.
  std::string const tmp = out + ".merging";
  fs::remove(tmp, ec);
  {
    auto w = ResultWriter::create(tmp, merged_provenance(shards, res), true);
    auto const copy_table = [&](std::string const& g, std::vector<Shard const*> const& from) {
      Shard const& first = *from.front();
      auto const& attrs = first.group_attrs.at(g);
      auto const desc = attrs.count("description") ? attrs.at("description") : std::string();
      auto const cols = user_columns(first.tables.at(g));
      auto t = w.table(g, cols, desc);
      for (auto const& kv : attrs)
        if (kv.first != "kind" && kv.first != "experiment" && kv.first != "description")
          w.set_attr(g, kv.first, kv.second);
      std::size_t n = 0;
      for (Shard const* s : from) {
        Table const& src = s->tables.at(g);
        for (std::size_t r = 0; r < src.rows; ++r, ++n)
          t.append(merged_key(*s, g, src.keys()[r], res.shard_count), row_of(src, cols, r),
                   src.row_samples(r));
      }
      res.rows[g] = n;
    };
    copy_table(sn::kPlan, {&ref});
    for (auto const& g : order) {
      std::vector<Shard const*> from;
      for (auto const& s : shards)
        if (s.tables.count(g))
          from.push_back(&s);
      copy_table(g, from);
    }
    // One row and one group per shard: where it ran and what it did.
    auto t = w.table("merge_shards", merge_shards_columns(),
                     "one row per merged shard: file, host, GPU, finished configurations, rows, "
                     "estimated and measured seconds (the sum over its /shard_done)");
    for (auto const& s : shards) {
      Table const& d = s.tables.at(sn::kDone);
      double measured = 0;
      for (std::size_t r = 0; r < d.rows; ++r)
        measured += d.reals.at("seconds")[r];
      std::size_t rows = 0;
      for (auto const& kv : s.tables)
        if (kv.first != sn::kPlan && kv.first != sn::kDone)
          rows += kv.second.rows;
      std::int64_t mine = 0;
      for (auto const& kv : planned)
        mine += kv.second == s.index;
      double estimated = 0;
      try {
        estimated = std::stod(attr_or(s, sn::kShardCost, "0"));
      } catch (std::exception const&) {
        estimated = 0;
      }
      int ordinal = -1;
      try {
        ordinal = std::stoi(attr_or(s, sn::kDeviceOrdinal, "-1"));
      } catch (std::exception const&) {
        ordinal = -1;
      }
      Row row;
      row.set("shard", s.index)
          .set("file", fit(fs::path(s.path).filename().string(), 160))
          .set("host", fit(attr_or(s, "host", "none"), 64))
          .set("gpu_name", fit(attr_or(s, "gpu_name", "none"), 64))
          .set("gpu_uuid", fit(attr_or(s, sn::kUuid, "none"), 48))
          .set("gpu_pci_bus_id", fit(attr_or(s, sn::kPciBus, "none"), 24))
          .set("device_ordinal", ordinal)
          .set("date_utc", fit(attr_or(s, "date_utc", "none"), 24))
          .set("planned", mine)
          .set("done", static_cast<std::int64_t>(d.rows))
          .set("rows", static_cast<std::int64_t>(rows))
          .set("estimated_s", estimated)
          .set("measured_s", measured);
      t.append("shard=" + shard_name(s.index, res.shard_count), row);
      std::string const g = "merge_shard_" + shard_name(s.index, res.shard_count);
      w.set_attr(g, "file", s.path);
      for (auto const& kv : s.reader->provenance())
        w.set_attr(g, kv.first, kv.second);
    }
  }
  copy_array_groups(tmp, shards, res.shard_count);
  fs::rename(tmp, out, ec);
  if (ec)
    throw FileError(out, "cannot rename " + tmp + " to it: " + ec.message());
  res.written = true;
  return res;
}

} // namespace moefin::h5
