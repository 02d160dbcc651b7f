#pragma once
// Before/after comparison of two result files (`moefin compare`): for every timing table both
// files hold, the configurations are matched by their axis values, and each gets the ratio of
// the medians (base time / new time), its bootstrap interval from the raw samples (the rounds of
// each file resampled on their own: two runs have no rounds to pair) and a verdict set against
// the threshold and the noise the files measured. analysis/compare.py implements the same rules
// (tests/python checks that both agree).

#include "core/store/h5store.hpp"
#include "core/table_format.hpp"

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace moefin::compare {

/// Root attributes that say where and how a file was measured; files differing in one of them
/// are not compared (unless shown side by side). A missing attribute reads "not recorded".
inline constexpr char const* kConditionAttrs[] = {"arch", "gpu_name", "carveout", "ctas_per_sm",
                                                  "launch"};

/// The axes of the timing tables moefin writes (docs/reference/experiment-tables.md); a table with
/// `median_us` and no entry here is matched by its `key`. `repeat` names the table of the same
/// configurations measured again in the same run, whose differences are the run-to-run noise
/// (relative to the first measurement: this table when `first`, else `repeat`).
struct TimedTable {
  std::string group;
  std::vector<std::string> axes;
  std::string repeat;
  bool first = true;
};
std::vector<TimedTable> const& timed_tables();

enum class Verdict { kFaster, kSlower, kSame, kNoisy, kNotJudged };
char const* verdict_name(Verdict v);

/// One configuration in both files.
struct Row {
  std::vector<table::Cell> axes; // the values of TableResult::axes
  double base_us = 0, new_us = 0;
  double ratio = 0, lo = 0, hi = 0; // base / new; > 1: the new file is faster
  double noise = 0;                 // relative: the largest of the sources (see `noise_of`)
  std::size_t base_rounds = 0, new_rounds = 0;
  Verdict verdict = Verdict::kNotJudged;
};

struct TableResult {
  std::string group;
  std::vector<std::string> axes;
  std::vector<Row> rows; // in the base file's row order
  std::size_t only_base = 0, only_new = 0;
  double repeat_base = -1, repeat_new = -1; // median run-to-run difference; -1: not measured
  std::string repeat_group;                 // where the run-to-run difference comes from
  std::map<Verdict, std::size_t> counts() const;
};

struct Options {
  double threshold = 0.05; // relative: "same" within a factor 1 + threshold either way
  bool side_by_side = false;
  std::vector<std::string> tables; // only these groups (empty: every timing table)
};

struct Result {
  std::string base_path, new_path;
  h5::Provenance base_prov, new_prov;
  Options options;
  std::vector<std::string> condition_differences; // "gpu_name: A vs B"
  std::vector<TableResult> tables;
  std::vector<std::string> not_compared; // "/group: why"
  bool judged() const { return condition_differences.empty(); }
  std::size_t slower() const;
  std::size_t matched() const; // configurations in both files, over every table
};

/// "attr: A vs B" for every condition attribute the two provenances disagree on.
std::vector<std::string> condition_differences(h5::Provenance const& a, h5::Provenance const& b);

/// Compares `base` and `next`. Throws InputError when their conditions differ and
/// `options.side_by_side` is not set, or when a table named in `options.tables` is in neither;
/// FileError naming the file when a table lacks an axis column or holds one configuration twice.
Result compare_files(h5::ResultReader const& base, h5::ResultReader const& next,
                     Options const& options);

/// The verdict of one configuration: "same" when base/new is within a factor 1 + threshold
/// either way; beyond it "noisy" when the change is within the configuration's noise (relative),
/// else "faster" or "slower". Never judged when `judged` is false.
Verdict verdict_of(double ratio, double noise, double threshold, bool judged);

/// The rows of one table (all, or those not "same"): the axes, then the numbers.
table::Table rows_table(TableResult const& t, bool changed_only);

/// Every table of `r` in one table: a `table` column, the union of the axes, the numbers.
table::Table combined_table(Result const& r, bool changed_only);

/// One line per table: configurations matched, the verdict counts, the geometric-mean ratio,
/// the noise and the unmatched configurations.
std::string summary_line(TableResult const& t, Options const& o, bool judged);

/// The whole comparison as Markdown (header, method, a section per table), or JSON.
void write_markdown(Result const& r, bool changed_only, std::ostream& os);
void write_json(Result const& r, bool changed_only, std::ostream& os);

} // namespace moefin::compare
