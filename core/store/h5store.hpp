#pragma once
// The HDF5 result store: one file per run, provenance in root attributes, one group per
// experiment, one table row per configuration appended and flushed as soon as it finishes.
// The schema is the contract with analysis/ and is documented in docs/reference/result-files.md.
// Its sources in core/store/ are split by concept: hdf5_file (handles and checked helpers), probe
// (the hostile-input probe and the checked open), lifecycle (create, resume, commit), provenance,
// writer (rows, arrays, attributes), reader, merge (shards into one file).

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

/// Root attribute `moefin_state`: `incomplete` while a run appends rows (written before anything
/// else, so a killed run never leaves a file that reads as finished), `complete` written last by
/// ResultWriter::commit(). Readers accept only `complete`; `--resume` (ResultWriter::resume) also
/// takes `incomplete`. Files written before the attribute existed carry the schema and no state:
/// they were only ever written by runs that closed them, and read as complete.
inline constexpr char const* kStateAttr = "moefin_state";
inline constexpr char const* kStateIncomplete = "incomplete";
inline constexpr char const* kStateComplete = "complete";

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

class File;        // RAII handle of an open HDF5 file (hdf5_file.hpp)
struct WriteState; // how a ResultWriter finishes its file (lifecycle.cpp)

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

/// A result file open for writing. Under its final name a file is complete or absent:
/// - create(): a file written whole (a routing, a timeline) goes to a temporary name beside the
///   final one (`.NAME.PID.N.partial`) and is renamed onto it by commit(), so a killed run leaves
///   no file, and with `overwrite` the old file stays until the new one is complete;
/// - create_resumable() / resume(): a file that experiments append rows to lives under its final
///   name with `moefin_state = incomplete` (see kStateAttr) until commit() writes `complete`.
/// A writer that goes out of scope normally commits; one destroyed while an exception propagates
/// does not (the temporary of create() is removed, a resumable file stays incomplete).
class ResultWriter {
public:
  /// Creates `path` with `prov` as root attributes, committed whole. Refuses an existing file
  /// unless `overwrite`.
  static ResultWriter create(std::string const& path, Provenance const& prov,
                             bool overwrite = false);
  /// Creates `path` for rows appended one by one: it appears under its final name only once its
  /// provenance and the state `incomplete` are on disk, and refuses an existing file.
  static ResultWriter create_resumable(std::string const& path, Provenance const& prov);
  /// Opens an existing moefin file to continue it (complete or incomplete; throws FileError when
  /// foreign or damaged) and marks it incomplete until commit(). The command line of the resuming
  /// run is recorded in the attribute `resumed_by`.
  static ResultWriter resume(std::string const& path);
  /// `--out` / `--resume` as every experiment takes them: resume when `resume_path` is set, else
  /// create_resumable(out_path).
  static ResultWriter open(std::string const& out_path, std::string const& resume_path,
                           std::uint64_t seed);

  ~ResultWriter();
  ResultWriter(ResultWriter&&) noexcept;
  ResultWriter& operator=(ResultWriter&&) noexcept;

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

  /// Root attribute `name` = `value` for a setting every row of the file shares (and its keys do
  /// not name): a new file takes `value`; a resumed one keeps its own, `legacy` when it predates
  /// the attribute, and a different `value` is an InputError naming `flag` (`what`: the setting).
  void keep_root_attr(std::string const& name, std::string const& value, std::string const& legacy,
                      std::string const& flag, std::string const& what);

  /// True when the file being written holds this group (e.g. timelines a resumed file has).
  bool has_group(std::string const& group) const;

  /// Marks the file complete and, for create(), renames it onto its final name. Nothing may be
  /// written afterwards. Throws FileError when the file cannot be finished (it then stays
  /// incomplete, or absent under its final name).
  void commit();
  bool committed() const;
  /// True for a writer made by resume(): the file may hold rows of an earlier run.
  bool resumed() const;

  /// The final name of the file (what messages and readers use).
  std::string const& path() const { return path_; }
  /// Root attributes as written (on a resumed file: as the first run wrote them, so an experiment
  /// can take its seed from there and regenerate the same configurations).
  Provenance const& provenance() const { return prov_; }
  std::uint64_t seed() const;
  void flush();

private:
  ResultWriter(std::shared_ptr<File> f, std::string path, Provenance prov,
               std::unique_ptr<WriteState> state);
  void end_of_scope() noexcept; // commit, or abandon while an exception propagates
  std::shared_ptr<File> file_;
  std::string path_;
  Provenance prov_;
  std::unique_ptr<WriteState> state_;
};

/// Columns of one type by name. at() of a column the table lacks, or holds with another type,
/// throws FileError naming the file, the table and the column (instead of std::out_of_range).
template <class T> class ColumnMap : public std::map<std::string, std::vector<T>> {
public:
  std::string file;  // the file the table was read from ("" for a table built in memory)
  std::string table; // "/group/table"
  char const* kind = "matching"; // "integer", "float", "string"
  std::vector<T> const& at(std::string const& name) const {
    auto it = this->find(name);
    if (it == this->end())
      missing(name);
    return it->second;
  }
  std::vector<T>& at(std::string const& name) {
    auto it = this->find(name);
    if (it == this->end())
      missing(name);
    return it->second;
  }

private:
  [[noreturn]] void missing(std::string const& name) const;
};

/// An experiment table read back into columns.
struct Table {
  std::vector<Column> columns;
  std::size_t rows = 0;
  ColumnMap<std::int64_t> ints;
  ColumnMap<double> reals;
  ColumnMap<std::string> strings;
  std::vector<double> samples; // the group's flat sample array

  bool has_column(std::string const& name) const;
  /// The configuration keys (present, possibly empty, in every table read back).
  std::vector<std::string> const& keys() const { return strings.at("key"); }
  /// Raw samples of row i.
  std::vector<double> row_samples(std::size_t i) const;
  /// Index of the row with this key; throws std::out_of_range.
  std::size_t find(std::string const& key) const;
};

/// Reader of a result file; every failure is a FileError naming the file, the object and what is
/// wrong. Everything is validated before it is allocated or indexed: attributes are scalars of a
/// string or numeric type, links are plain (no soft or external links), groups have a known
/// `kind`, datasets have the rank and type the schema gives and no more elements than the file can
/// hold, rows point inside their samples and keys are unique. Only complete files are read
/// (kStateAttr).
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
