#define BOOST_TEST_MODULE gemm_tables
#include <boost/test/unit_test.hpp>

#include "core/store/h5store.hpp"
#include "experiments/report/gemm_tables.hpp"
#include "kernels/gemm/decode.hpp"
#include "kernels/gemm/decode_candidates.hpp"

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
  std::vector<std::string> names{gemm::variant_name(gemm::Variant::kTiled),
                                 gemm::variant_name(gemm::Variant::kSplitK),
                                 gemm_tables::kSplitkLoads, gemm_tables::kReadFloor};
  for (auto const& c : gemm::parse_candidates(gemm::kDefaultCandidates, "--candidates"))
    names.push_back(c.name);
  names.push_back(std::string(gemm::kMaxCandidateName, 'x')); // the longest name a spec gives
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

BOOST_AUTO_TEST_CASE(the_best_row_per_token_count_is_a_gemm_and_never_a_diagnostic) {
  fs::path const path =
      fs::temp_directory_path() / ("moefin_gemm_best_" + std::to_string(::getpid()) + ".h5");
  struct R {
    char const* variant;
    char const* mode;
    std::int64_t T;
    double fraction;
  };
  // At T = 1 the read floor and the loads-only rows are fastest, but the best GEMM is
  // splitk in pdl mode; at T = 4 a candidate wins and reaches the target.
  std::vector<R> const rows{
      {"splitk", "isolated", 1, 0.30},      {"splitk", "pdl", 1, 0.33},
      {"sk+cta2", "isolated", 1, 0.32},     {"read", "isolated", 1, 0.70},
      {"splitk_loads", "isolated", 1, 0.5}, {"sk+loads+cta2", "isolated", 1, 0.6},
      {"splitk", "isolated", 4, 0.40},      {"sk+cta2", "isolated", 4, 0.86}};
  {
    auto f = h5::ResultWriter::create(path.string(), h5::collect_provenance(1));
    auto sweep = f.table("gemm_sweep", gemm_tables::gemm_sweep_columns());
    for (R const& r : rows) {
      h5::Row row = row_of(gemm_tables::gemm_sweep_columns(), r.variant);
      row.set("mode", std::string(r.mode)).set("T", r.T).set("copy_fraction", r.fraction);
      sweep.append(std::string(r.variant) + r.mode + std::to_string(r.T), row);
    }
    f.commit();
  }
  h5::ResultReader const reader(path.string());
  std::ostringstream os;
  gemm_tables::print_copy_fraction_tables(reader, os);
  std::string const out = os.str();
  BOOST_TEST(out.find("best: T=1 splitk/pdl 33.0%; T=4 sk+cta2 86.0% (>= 85%);") !=
                 std::string::npos,
             out);
  // Every (variant, mode) has its row, the diagnostics included.
  for (char const* label : {"splitk/pdl", "read", "sk+loads+cta2", "splitk_loads"})
    BOOST_TEST(out.find(std::string("\n  ") + label) != std::string::npos, label);
  BOOST_TEST(!gemm_tables::is_gemm_row("sk+loads+cta2"));
  BOOST_TEST(!gemm_tables::is_gemm_row("read"));
  BOOST_TEST(gemm_tables::is_gemm_row("sk+cta2+ks8"));
  fs::remove(path);
}
