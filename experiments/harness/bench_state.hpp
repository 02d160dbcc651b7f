#pragma once
// The benchmark state every experiment that writes a result table runs on, in the spirit of
// nvbench: axes are declared by name with their values; the harness enumerates the
// configurations in a fixed order (each with a stable index and a cost estimate), builds each
// row's key and its axis columns from the same values, skips invalid combinations with a reason
// it records in the file (/skipped), honours --resume (rows already in the file are not measured
// again) and --max-minutes (a run stops cleanly before a unit that would likely end past the
// limit), and writes the statistics columns of timed rows (median, quartiles, extremes of the
// raw samples) and their paired ratios. Each runner keeps only its measurement body.
//
// A *unit* is one call of the body (e.g. one shape: inputs built once, every variant timed in
// the same interleaved rounds); its *rows* are the combinations of the row axes (e.g. mode x L2
// x variant). Ratios pair a row with another row of the same unit.

#include "core/store/h5store.hpp"
#include "experiments/harness/progress.hpp"
#include "experiments/harness/run_limit.hpp"

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace moefin::bench {

/// The value of one axis in one configuration: an integer or a name.
using Value = std::variant<std::int64_t, std::string>;
std::string text(Value const& v);

/// Values of the axes of one configuration, in axis order.
class Config {
public:
  Config& set(std::string const& axis, Value v);
  bool has(std::string const& axis) const;
  Value const& at(std::string const& axis) const; // std::out_of_range naming the axis
  std::int64_t num(std::string const& axis) const;
  std::string const& str(std::string const& axis) const;
  std::vector<std::pair<std::string, Value>> const& values() const { return values_; }

private:
  std::vector<std::pair<std::string, Value>> values_;
};

enum class Scope {
  kUnit, // separates calls of the body
  kRow,  // enumerates the rows one call writes
};

struct Axis {
  std::string name; // column name ("H", "weights", "variant")
  Scope scope = Scope::kUnit;
  std::string key_label;     // "name=" in the row key ("w" for weights); empty: the name
  bool in_key = true;        // part of the default key
  std::vector<Value> values; // fixed values, or (when `from` is set) values computed from
  std::function<std::vector<Value>(Config const& outer)> from; // the axes declared before it
};
Axis int_axis(std::string name, std::vector<std::int64_t> const& values,
              Scope scope = Scope::kUnit);
Axis string_axis(std::string name, std::vector<std::string> const& values,
                 Scope scope = Scope::kUnit);

/// A paired ratio of a timed row against another row of its unit: the one with `axis` set to
/// partner(row). Written as `column`, `column_lo`-style interval columns `lo` and `hi`; a row
/// without a partner (partner returns "") gets `none` in all three.
struct Ratio {
  std::string column, lo, hi;
  std::string axis;
  std::function<std::string(Config const& row)> partner;
  bool partner_over_row = true; // speedup: partner / row; false: row / partner
  double none = 1.0;
};

/// One unit of work: the body is called once with the rows of `rows` the file lacks.
struct Unit {
  std::size_t index = 0;    // stable: the unit's position in the enumeration of the same axes
  double cost_s = 0;        // estimated seconds of all its rows (--max-minutes, sharding)
  Config config;            // the unit axes
  std::vector<Config> rows; // every valid row, in row-axis order
  std::vector<std::pair<Config, std::string>> skipped; // rows left out, with the reason
  std::string label; // the unit's axis values ("H=..,T=..,K=..,w=.."): its stable key
};

/// What the body hands back for one row.
struct Measurement {
  std::vector<double> samples; // raw samples (timed benchmarks: one per round); may be empty
  h5::Row columns;             // the body's own columns
};

class Benchmark;

/// Collects a unit's rows as the body measures them (Benchmark::run writes them).
class Recorder {
public:
  void add(Config const& row, Measurement m);
  /// A row the body found it cannot run (its reason is recorded like a declared skip).
  void skip(Config const& row, std::string reason);
  /// The progress line's tail for this unit.
  void summary(std::string s) { summary_ = std::move(s); }

private:
  friend class Benchmark;
  std::vector<std::pair<Config, Measurement>> rows_;
  std::vector<std::pair<Config, std::string>> skips_;
  std::string summary_;
};

/// `todo`: the unit's rows the file does not hold yet (never empty).
using Body = std::function<void(Unit const& unit, std::vector<Config> const& todo, Recorder&)>;

struct RunOptions {
  double max_minutes = 0; // 0: no limit
  /// The units this process runs (e.g. its part of a partition by Unit::index and
  /// Unit::cost_s); unset: every unit. Units it refuses are neither measured nor counted.
  std::function<bool(Unit const&)> runs;
  /// Called once a unit is complete (every row in the file or recorded as skipped), with the
  /// rows written in this call and the seconds it took (0 for a unit the file already held).
  /// A unit whose body recorded no row for some of its rows (e.g. a broken output) is not
  /// complete: a resumed run measures it again.
  std::function<void(Unit const&, std::size_t rows, double seconds)> finished;
};

struct RunResult {
  std::size_t units = 0, measured = 0, resumed = 0; // units: those `runs` selects
  std::size_t left = 0; // selected units not started because of --max-minutes
  std::size_t rows = 0; // rows written in this call
  std::size_t skips = 0;
};

class Benchmark {
public:
  /// `table`: the group the rows go to; `columns`: its schema, every one filled by an axis, a
  /// statistic, a ratio or the body.
  Benchmark(std::string table, std::vector<h5::Column> columns, std::string description = "");

  Benchmark& axis(Axis a);
  /// The order of the axes in the default key (default: declaration order).
  Benchmark& key_order(std::vector<std::string> axes);
  /// A key of the experiment's own format, from the row's values (replaces the default).
  Benchmark& key(std::function<std::string(Config const& row)> f);
  /// A unit list given explicitly instead of the product of the unit axes.
  Benchmark& units(std::vector<Config> list);
  /// A reason to leave a row out ("" keeps it).
  Benchmark& skip_if(std::function<std::string(Config const& row)> f);
  /// Estimated seconds of a unit with `rows` rows (default: 1 s a row).
  Benchmark& cost(std::function<double(Config const& unit, std::size_t rows)> f);
  /// Rows carry samples: median_us, min_us, q1_us, q3_us and max_us are their statistics.
  Benchmark& timed();
  Benchmark& ratio(Ratio r);

  std::string const& table() const { return table_; }
  std::string const& description() const { return description_; }
  std::vector<h5::Column> const& columns() const { return columns_; }
  /// Every unit, in order (indices 0, 1, ...).
  std::vector<Unit> enumerate() const;
  std::string row_key(Config const& row) const;

  /// Prints every unit (index, cost, key of each row) and every skipped row with its reason;
  /// with `mine` (a sharded run) only the units it accepts, the head counting them of the whole.
  void list(std::ostream& os, std::function<bool(std::size_t)> const& mine = {}) const;

  /// Measures every unit the file lacks rows of, in order, into `file`; progress on stderr.
  RunResult run(h5::ResultWriter& file, RunOptions const& o, Body const& body) const;
  /// The same into an open table (another table of the file, e.g. repeated units).
  RunResult run(h5::ResultWriter& file, h5::TableWriter& table, std::vector<Unit> const& units,
                RunOptions const& o, Body const& body) const;

private:
  h5::Row row_of(Config const& row, Measurement const& m,
                 std::map<std::string, std::vector<double>> const& unit_samples) const;
  /// "axis=value" of the first ratio partner of `row` missing from `unit_samples`, or "".
  std::string missing_partner(Config const& row,
                              std::map<std::string, std::vector<double>> const& unit_samples) const;

  std::string table_, description_;
  std::vector<h5::Column> columns_;
  std::vector<Axis> axes_;
  std::vector<std::string> key_order_;
  std::function<std::string(Config const&)> key_;
  std::vector<Config> unit_list_;
  bool has_unit_list_ = false;
  std::function<std::string(Config const&)> skip_;
  std::function<double(Config const&, std::size_t)> cost_;
  bool timed_ = false;
  std::vector<Ratio> ratios_;
};

/// The statistics columns of timed rows, in the order the tables list them.
std::vector<h5::Column> stats_columns();

/// The columns of the /skipped table (one per file: experiment, reason).
std::vector<h5::Column> skip_columns();

} // namespace moefin::bench
