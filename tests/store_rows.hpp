#pragma once
// The rows moefin_store_writer appends, as functions of the row index, shared with the test
// that reads them back (test_interrupt).

#include "core/store/h5store.hpp"

#include <string>
#include <vector>

namespace moefin::test {

inline constexpr char const* kStoreTable = "store_rows";

inline std::vector<h5::Column> store_columns() {
  return {h5::int_col("index"), h5::real_col("value"), h5::str_col("label", 24)};
}

inline std::string store_key(long i) {
  return "row=" + std::to_string(i);
}

inline h5::Row store_row(long i) {
  h5::Row r;
  r.set("index", static_cast<std::int64_t>(i))
      .set("value", 0.5 * static_cast<double>(i) + 0.25)
      .set("label", "r" + std::to_string(i));
  return r;
}

/// 0..4 samples per row, so that offsets and counts differ from row to row.
inline std::vector<double> store_samples(long i) {
  std::vector<double> s;
  for (long k = 0; k < i % 5; ++k)
    s.push_back(static_cast<double>(i) + 0.125 * static_cast<double>(k));
  return s;
}

} // namespace moefin::test
