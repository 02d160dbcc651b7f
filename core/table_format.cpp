#include "core/table_format.hpp"

#include "core/ops/errors.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <stdexcept>

namespace moefin::table {

Cell Cell::text(std::string s) {
  Cell c;
  c.kind_ = Kind::kText;
  c.text_ = std::move(s);
  return c;
}

Cell Cell::integer(std::int64_t v) {
  Cell c;
  c.kind_ = Kind::kInt;
  c.int_ = v;
  return c;
}

Cell Cell::real(double v) {
  Cell c;
  c.kind_ = Kind::kReal;
  c.real_ = v;
  return c;
}

Cell Cell::shown(std::string display) && {
  shown_ = std::move(display);
  return std::move(*this);
}

namespace {

std::string shortest(double v) {
  char buf[64];
  auto const r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

} // namespace

std::string Cell::display() const {
  if (!shown_.empty())
    return shown_;
  if (kind_ != Kind::kReal)
    return machine();
  if (std::isnan(real_))
    return "nan";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", real_);
  return buf;
}

std::string Cell::machine() const {
  switch (kind_) {
  case Kind::kEmpty:
    return "";
  case Kind::kText:
    return text_;
  case Kind::kInt:
    return std::to_string(int_);
  case Kind::kReal:
    break;
  }
  if (std::isnan(real_))
    return "";
  if (std::isinf(real_))
    return real_ > 0 ? "inf" : "-inf";
  return shortest(real_);
}

nlohmann::json Cell::json() const {
  switch (kind_) {
  case Kind::kEmpty:
    return nullptr;
  case Kind::kText:
    return text_;
  case Kind::kInt:
    return int_;
  case Kind::kReal:
    break;
  }
  if (!std::isfinite(real_))
    return nullptr;
  return real_;
}

void Table::add_row(std::vector<Cell> row) {
  if (row.size() != columns.size())
    throw std::invalid_argument("table " + name + ": a row of " + std::to_string(row.size()) +
                                " cells for " + std::to_string(columns.size()) + " columns");
  rows.push_back(std::move(row));
}

Format parse_format(std::string const& flag, std::string const& text) {
  if (text == "md" || text == "markdown")
    return Format::kMarkdown;
  if (text == "csv")
    return Format::kCsv;
  if (text == "json")
    return Format::kJson;
  if (text == "text")
    return Format::kText;
  throw InputError(flag + ": value '" + text + "' not one of {md, csv, json, text}");
}

char const* format_name(Format f) {
  switch (f) {
  case Format::kMarkdown:
    return "md";
  case Format::kCsv:
    return "csv";
  case Format::kJson:
    return "json";
  case Format::kText:
    return "text";
  }
  return "?";
}

std::string csv_field(std::string const& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos)
    return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"')
      out += '"';
    out += c;
  }
  return out + "\"";
}

namespace {

/// A column is right-aligned when every non-empty cell in it is a number.
std::vector<bool> numeric_columns(Table const& t) {
  std::vector<bool> num(t.columns.size(), true);
  std::vector<bool> any(t.columns.size(), false);
  for (auto const& row : t.rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (row[c].kind() == Cell::Kind::kEmpty)
        continue;
      any[c] = true;
      num[c] = num[c] && row[c].numeric();
    }
  for (std::size_t c = 0; c < num.size(); ++c)
    num[c] = num[c] && any[c];
  return num;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

std::string md_escape(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n' || c == '\r')
      out += ' ';
    else
      out += c;
  }
  return out;
}

} // namespace

void write_markdown(Table const& t, std::ostream& os) {
  if (!t.title.empty())
    os << "**" << md_escape(t.title) << "**\n\n";
  auto const num = numeric_columns(t);
  os << "|";
  for (auto const& c : t.columns)
    os << " " << md_escape(c) << " |";
  os << "\n|";
  for (std::size_t c = 0; c < t.columns.size(); ++c)
    os << (num[c] ? " ---: |" : " --- |");
  os << "\n";
  for (auto const& row : t.rows) {
    os << "|";
    for (auto const& cell : row)
      os << " " << md_escape(cell.display()) << " |";
    os << "\n";
  }
  if (!t.notes.empty()) {
    os << "\n";
    for (auto const& n : t.notes)
      os << "- " << md_escape(n) << "\n";
  }
}

void write_csv(Table const& t, std::ostream& os) {
  for (std::size_t c = 0; c < t.columns.size(); ++c)
    os << (c ? "," : "") << csv_field(t.columns[c]);
  os << "\n";
  for (auto const& row : t.rows) {
    for (std::size_t c = 0; c < row.size(); ++c)
      os << (c ? "," : "") << csv_field(row[c].machine());
    os << "\n";
  }
}

nlohmann::json to_json(Table const& t) {
  nlohmann::json rows = nlohmann::json::array();
  for (auto const& row : t.rows) {
    nlohmann::json r = nlohmann::json::object();
    for (std::size_t c = 0; c < row.size(); ++c)
      r[t.columns[c]] = row[c].json();
    rows.push_back(std::move(r));
  }
  return {{"name", t.name},
          {"title", t.title},
          {"columns", t.columns},
          {"rows", std::move(rows)},
          {"notes", t.notes}};
}

void write_json(Table const& t, std::ostream& os) {
  // Invalid UTF-8 in a string (a damaged file) is replaced, not thrown: the table still loads.
  os << to_json(t).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void write_text(Table const& t, std::ostream& os) {
  if (!t.title.empty())
    os << t.title << "\n";
  auto const num = numeric_columns(t);
  std::vector<std::size_t> width(t.columns.size());
  for (std::size_t c = 0; c < t.columns.size(); ++c)
    width[c] = t.columns[c].size();
  for (auto const& row : t.rows)
    for (std::size_t c = 0; c < row.size(); ++c)
      width[c] = std::max(width[c], row[c].display().size());
  auto line = [&](auto const& text_of) {
    std::string out;
    for (std::size_t c = 0; c < t.columns.size(); ++c) {
      std::string const s = one_line(text_of(c));
      std::string const fill(width[c] - std::min(width[c], s.size()), ' ');
      out += (c ? "  " : "") + (num[c] ? fill + s : s + fill);
    }
    while (!out.empty() && out.back() == ' ')
      out.pop_back();
    os << out << "\n";
  };
  line([&](std::size_t c) { return t.columns[c]; });
  for (auto const& row : t.rows)
    line([&](std::size_t c) { return row[c].display(); });
  for (auto const& n : t.notes)
    os << n << "\n";
}

void write(Table const& t, Format f, std::ostream& os) {
  switch (f) {
  case Format::kMarkdown:
    write_markdown(t, os);
    return;
  case Format::kCsv:
    write_csv(t, os);
    return;
  case Format::kJson:
    write_json(t, os);
    return;
  case Format::kText:
    write_text(t, os);
    return;
  }
}

} // namespace moefin::table
