#pragma once
// A small table model and its writers, so that every table the CLI prints can be read by any
// tool: Markdown (for people and reports), CSV (RFC 4180 quoting: a field holding a comma, a
// double quote or a line break is quoted, quotes doubled), JSON (typed values, NaN as null) and
// aligned plain text (the terminal). No HDF5, CUDA or Boost: the printers of every experiment
// can build a Table and let the user pick the format.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace moefin::table {

/// One value: text, an integer, a real number or nothing. `shown` overrides how Markdown and
/// plain text render it (e.g. "1.23x"); CSV and JSON always carry the value itself.
class Cell {
public:
  enum class Kind { kEmpty, kText, kInt, kReal };

  Cell() = default;
  static Cell text(std::string s);
  static Cell integer(std::int64_t v);
  static Cell real(double v);
  /// The same cell rendered as `display` for people (Markdown, plain text).
  Cell shown(std::string display) &&;

  Kind kind() const { return kind_; }
  bool numeric() const { return kind_ == Kind::kInt || kind_ == Kind::kReal; }
  std::string const& text_value() const { return text_; }
  std::int64_t int_value() const { return int_; }
  double real_value() const { return real_; }

  /// For people: `shown` when set, else integers in full, reals with 6 significant digits.
  std::string display() const;
  /// For machines: integers in full, reals in the shortest text that reads back to the same
  /// double, "" for NaN and empty cells (pandas reads both as missing), "inf"/"-inf".
  std::string machine() const;
  /// JSON value: string, integer, number; null for empty cells and non-finite reals.
  nlohmann::json json() const;

private:
  Kind kind_ = Kind::kEmpty;
  std::string text_;
  std::string shown_;
  std::int64_t int_ = 0;
  double real_ = 0;
};

/// A titled table: named columns and rows of cells (every row as long as `columns`).
struct Table {
  std::string name;  // identifier (e.g. the experiment group), the JSON "name"
  std::string title; // one line for people; Markdown prints it in bold above the table
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
  std::vector<std::string> notes; // lines printed below the table (Markdown, plain text)

  /// Appends a row; throws std::invalid_argument when its length differs from `columns`.
  void add_row(std::vector<Cell> row);
};

enum class Format { kMarkdown, kCsv, kJson, kText };

/// "md", "csv", "json", "text" (as the --format flags take them); throws InputError naming
/// `flag` and the allowed values otherwise.
Format parse_format(std::string const& flag, std::string const& text);
char const* format_name(Format f);

/// One field quoted as RFC 4180 asks: unchanged unless it holds ',', '"', CR or LF; then in
/// double quotes with each '"' doubled.
std::string csv_field(std::string const& s);

void write_markdown(Table const& t, std::ostream& os);
/// Header line of column names, then one line per row (LF line ends); no title or notes, so
/// that the output is exactly the table.
void write_csv(Table const& t, std::ostream& os);
/// {"name", "title", "columns", "rows": [{column: value, ...}], "notes"}.
nlohmann::json to_json(Table const& t);
void write_json(Table const& t, std::ostream& os);
/// Columns padded to their widest cell (at least two spaces apart), numbers right-aligned.
void write_text(Table const& t, std::ostream& os);

/// Writes `t` in format `f`.
void write(Table const& t, Format f, std::ostream& os);

} // namespace moefin::table
