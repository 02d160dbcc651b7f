#include "experiments/report/store_table.hpp"

namespace moefin::results {

table::Cell store_cell(h5::Table const& t, h5::Column const& col, std::size_t row) {
  switch (col.type) {
  case h5::ColType::kInt64:
    return table::Cell::integer(t.ints.at(col.name)[row]);
  case h5::ColType::kFloat64:
    return table::Cell::real(t.reals.at(col.name)[row]);
  case h5::ColType::kString:
    break;
  }
  return table::Cell::text(t.strings.at(col.name)[row]);
}

table::Table store_table(h5::Table const& t, std::string const& group, std::string const& file) {
  table::Table out;
  out.name = group;
  out.title = "/" + group + " of " + file;
  for (auto const& c : t.columns)
    out.columns.push_back(c.name);
  out.rows.reserve(t.rows);
  for (std::size_t r = 0; r < t.rows; ++r) {
    std::vector<table::Cell> row;
    row.reserve(t.columns.size());
    for (auto const& c : t.columns)
      row.push_back(store_cell(t, c, r));
    out.rows.push_back(std::move(row));
  }
  return out;
}

} // namespace moefin::results
