#pragma once
// The HDF5 result store: one file per run, provenance in root attributes, one group per
// experiment, one table row per configuration appended and flushed as soon as it finishes.
// The schema is the contract with analysis/ and is documented in data/README.md.

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace moefin::h5 {

/// Value of the root attribute `moefin_schema`; a file without it is foreign.
inline constexpr char const* kSchema = "moefin-results/1";

enum class ColType { kInt64, kFloat64, kString };

struct Column {
  std::string name;
  ColType type = ColType::kFloat64;
  std::size_t str_len = 0; // fixed length of a kString column (bytes, NUL-terminated)
};

inline Column int_col(std::string n) {
  return {std::move(n), ColType::kInt64, 0};
}
inline Column real_col(std::string n) {
  return {std::move(n), ColType::kFloat64, 0};
}
inline Column str_col(std::string n, std::size_t len = 48) {
  return {std::move(n), ColType::kString, len};
}

using Value = std::variant<std::int64_t, double, std::string>;

/// One table row under construction: every column of the table must be set before appending.
class Row {
public:
  Row& set(std::string const& col, std::int64_t v);
  Row& set(std::string const& col, int v) { return set(col, static_cast<std::int64_t>(v)); }
  Row& set(std::string const& col, double v);
  Row& set(std::string const& col, std::string v);
  Row& set(std::string const& col, char const* v) { return set(col, std::string(v)); }
  std::map<std::string, Value> const& values() const { return values_; }

private:
  std::map<std::string, Value> values_;
};

/// Root attributes of a result file. All values are strings; GPU fields read "none" when the run
/// had no GPU.
using Provenance = std::map<std::string, std::string>;

/// Provenance of this process: version, commit, command line, seed, UTC date, host and the GPU.
Provenance collect_provenance(std::uint64_t seed);

/// Now in UTC, ISO 8601 ("2026-12-02T09:30:00Z"): the form of date_utc.
std::string utc_now();

/// The command line recorded in provenance; set once by main().
void set_command_line(int argc, char** argv);
std::string const& command_line();

class File; // RAII handle of an open HDF5 file (h5store.cpp)

/// Writer of one experiment's table inside a result file.
class TableWriter {
public:
  TableWriter(std::shared_ptr<File> file, std::string group, std::vector<Column> columns);
  ~TableWriter();
  TableWriter(TableWriter&&) noexcept;
  TableWriter& operator=(TableWriter&&) noexcept;

  /// True when a row with this configuration key is already in the table (for --resume).
  bool has(std::string const& key) const { return keys_.count(key) != 0; }
  std::size_t rows() const { return rows_; }

  /// Appends one row and its raw samples, then flushes the file to disk, so that a run killed
  /// afterwards keeps it. Throws std::invalid_argument on a duplicate key or a missing column.
  void append(std::string const& key, Row const& row, std::vector<double> const& samples = {});

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::set<std::string> keys_;
  std::size_t rows_ = 0;
};

/// A result file open for writing.
class ResultWriter {
public:
  /// Creates `path` with `prov` as root attributes. Refuses to overwrite unless asked.
  static ResultWriter create(std::string const& path, Provenance const& prov,
                             bool overwrite = false);
  /// Opens an existing moefin file to continue it (throws FileError when foreign or damaged).
  /// The command line of the resuming run is recorded in the attribute `resumed_by`.
  static ResultWriter resume(std::string const& path);
  /// `--out` / `--resume` as every experiment takes them: resume when `resume_path` is set.
  static ResultWriter open(std::string const& out_path, std::string const& resume_path,
                           std::uint64_t seed);

  /// Opens (or creates) the table of `experiment` with these columns. On a resumed file the
  /// columns must match the ones already there. Columns `key`, `sample_offset` and `sample_count`
  /// are added by the store.
  TableWriter table(std::string const& experiment, std::vector<Column> const& columns,
                    std::string const& description = "");

  /// Plain arrays in a group (routing layouts, outputs, timelines): row-major with `dims`.
  void write_array(std::string const& group, std::string const& name,
                   std::vector<std::int32_t> const& data, std::vector<std::size_t> const& dims);
  void write_array(std::string const& group, std::string const& name,
                   std::vector<std::int64_t> const& data, std::vector<std::size_t> const& dims);
  void write_array(std::string const& group, std::string const& name,
                   std::vector<float> const& data, std::vector<std::size_t> const& dims);
  void write_array(std::string const& group, std::string const& name,
                   std::vector<double> const& data, std::vector<std::size_t> const& dims);
  void write_array(std::string const& group, std::string const& name,
                   std::vector<std::uint16_t> const& data, std::vector<std::size_t> const& dims);
  void write_array(std::string const& group, std::string const& name,
                   std::vector<std::uint8_t> const& data, std::vector<std::size_t> const& dims);

  /// String attribute on a group (created with kind "arrays" if missing) or on "/" for the root.
  void set_attr(std::string const& group, std::string const& name, std::string const& value);

  std::string const& path() const { return path_; }
  /// Root attributes as written (on a resumed file: as the first run wrote them, so an experiment
  /// can take its seed from there and regenerate the same configurations).
  Provenance const& provenance() const { return prov_; }
  std::uint64_t seed() const;
  void flush();

private:
  ResultWriter(std::shared_ptr<File> f, std::string path, Provenance prov)
      : file_(std::move(f)), path_(std::move(path)), prov_(std::move(prov)) {}
  std::shared_ptr<File> file_;
  std::string path_;
  Provenance prov_;
};

/// An experiment table read back into columns.
struct Table {
  std::vector<Column> columns;
  std::size_t rows = 0;
  std::map<std::string, std::vector<std::int64_t>> ints;
  std::map<std::string, std::vector<double>> reals;
  std::map<std::string, std::vector<std::string>> strings;
  std::vector<double> samples; // the group's flat sample array

  bool has_column(std::string const& name) const;
  std::vector<std::string> const& keys() const { return strings.at("key"); }
  /// Raw samples of row i.
  std::vector<double> row_samples(std::size_t i) const;
  /// Index of the row with this key; throws std::out_of_range.
  std::size_t find(std::string const& key) const;
};

/// Reader of a result file; every failure is a FileError naming the file.
class ResultReader {
public:
  explicit ResultReader(std::string const& path);
  ~ResultReader();
  ResultReader(ResultReader&&) noexcept;

  Provenance const& provenance() const { return prov_; }
  std::vector<std::string> groups() const;
  bool has_group(std::string const& group) const;
  Table read_table(std::string const& experiment) const;
  std::map<std::string, std::string> group_attrs(std::string const& group) const;

  /// A plain array and its dimensions; converted to the requested element type.
  std::vector<std::int64_t> read_ints(std::string const& group, std::string const& name,
                                      std::vector<std::size_t>* dims = nullptr) const;
  std::vector<double> read_reals(std::string const& group, std::string const& name,
                                 std::vector<std::size_t>* dims = nullptr) const;

  std::string const& path() const { return path_; }

private:
  std::shared_ptr<File> file_;
  std::string path_;
  Provenance prov_;
};

} // namespace moefin::h5
