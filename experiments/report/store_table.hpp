#pragma once
// A result file's experiment table as a table::Table (core/table_format.hpp), so that `moefin
// show --table GROUP --format md|csv|json|text` writes it in any format with the columns as
// stored: ints as integers, floats in full precision, strings as text.

#include "core/store/h5store.hpp"
#include "core/table_format.hpp"

namespace moefin::results {

/// Every column and row of `t`, named `group`; the title names the file.
table::Table store_table(h5::Table const& t, std::string const& group, std::string const& file);

/// The value of column `col` in row `row` as a cell of its type.
table::Cell store_cell(h5::Table const& t, h5::Column const& col, std::size_t row);

} // namespace moefin::results
