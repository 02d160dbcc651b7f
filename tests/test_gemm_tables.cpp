#define BOOST_TEST_MODULE gemm_tables
#include <boost/test/unit_test.hpp>

#include "core/h5store.hpp"
#include "experiments/results/gemm_tables.hpp"
#include "kernels/gemm/decode.hpp"

#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

// The string columns of the GEMM sweep's tables hold every value the sweep writes: the longest
// variant name (splitk_loads) once made the first GPU run stop at its first row.

using namespace moefin;
namespace fs = std::filesystem;

namespace {

/// A row setting every column of `columns` (strings "x"), with `variant` in the variant column.
h5::Row row_of(std::vector<h5::Column> const& columns, std::string const& variant) {
  h5::Row r;
  for (h5::Column const& c : columns) {
    if (c.type == h5::ColType::kInt64)
      r.set(c.name, std::int64_t{1});
    else if (c.type == h5::ColType::kFloat64)
      r.set(c.name, 1.0);
    else
      r.set(c.name, c.name == "variant" ? variant : std::string("x"));
  }
  return r;
}

} // namespace

BOOST_AUTO_TEST_CASE(the_variant_columns_hold_every_variant_name_the_sweep_writes) {
  fs::path const path =
      fs::temp_directory_path() / ("moefin_gemm_tables_" + std::to_string(::getpid()) + ".h5");
  std::vector<std::string> const names{gemm::variant_name(gemm::Variant::kTiled),
                                       gemm::variant_name(gemm::Variant::kSplitK),
                                       gemm_tables::kSplitkLoads};
  {
    auto f = h5::ResultWriter::create(path.string(), h5::collect_provenance(1));
    auto sweep = f.table("gemm_sweep", gemm_tables::gemm_sweep_columns());
    auto check = f.table("gemm_check", gemm_tables::gemm_check_columns());
    for (std::string const& v : names) {
      BOOST_REQUIRE_NO_THROW(sweep.append(v, row_of(gemm_tables::gemm_sweep_columns(), v)));
      BOOST_REQUIRE_NO_THROW(check.append(v, row_of(gemm_tables::gemm_check_columns(), v)));
    }
    f.commit();
  }
  h5::ResultReader const reader(path.string());
  for (char const* table : {"gemm_sweep", "gemm_check"})
    BOOST_TEST(reader.read_table(table).strings.at("variant") == names, table);
  std::ostringstream os;
  gemm_tables::print_gemm_tables(reader, os);
  BOOST_TEST(os.str().find(gemm_tables::kSplitkLoads) != std::string::npos);
  fs::remove(path);
}
