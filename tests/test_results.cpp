#define BOOST_TEST_MODULE results
#include <boost/test/unit_test.hpp>

#include "core/ops/errors.hpp"
#include "core/stats.hpp"
#include "core/table_format.hpp"
#include "experiments/report/compare.hpp"

#include <cmath>
#include <limits>
#include <sstream>

namespace {

using moefin::table::Cell;
using moefin::table::Table;

Table sample_table() {
  Table t;
  t.name = "demo";
  t.title = "a | title";
  t.columns = {"key", "n", "x"};
  t.add_row({Cell::text("H=1024,T=1,w=\"bf16\""), Cell::integer(3), Cell::real(0.1)});
  t.add_row({Cell::text("line\nbreak"), Cell::integer(-2),
             Cell::real(std::numeric_limits<double>::quiet_NaN())});
  t.add_row({Cell::text("a|b"), Cell(), Cell::real(1.0 / 3).shown("0.33x")});
  return t;
}

} // namespace

BOOST_AUTO_TEST_CASE(csv_quotes_commas_quotes_and_line_breaks_only) {
  using moefin::table::csv_field;
  BOOST_TEST(csv_field("plain") == "plain");
  BOOST_TEST(csv_field("a,b") == "\"a,b\"");
  BOOST_TEST(csv_field("say \"x\"") == "\"say \"\"x\"\"\"");
  BOOST_TEST(csv_field("two\nlines") == "\"two\nlines\"");
  BOOST_TEST(csv_field("") == "");
  std::ostringstream os;
  moefin::table::write_csv(sample_table(), os);
  BOOST_TEST(os.str() == "key,n,x\n"
                         "\"H=1024,T=1,w=\"\"bf16\"\"\",3,0.1\n"
                         "\"line\nbreak\",-2,\n"
                         "a|b,,0.3333333333333333\n");
}

BOOST_AUTO_TEST_CASE(markdown_escapes_pipes_and_aligns_numbers_right) {
  std::ostringstream os;
  moefin::table::write_markdown(sample_table(), os);
  BOOST_TEST(os.str() == "**a \\| title**\n\n"
                         "| key | n | x |\n"
                         "| --- | ---: | ---: |\n"
                         "| H=1024,T=1,w=\"bf16\" | 3 | 0.1 |\n"
                         "| line break | -2 | nan |\n"
                         "| a\\|b |  | 0.33x |\n");
}

BOOST_AUTO_TEST_CASE(json_keeps_types_and_writes_nan_as_null) {
  auto const j = moefin::table::to_json(sample_table());
  BOOST_TEST(j["columns"].size() == 3u);
  BOOST_TEST(j["rows"][0]["n"].get<std::int64_t>() == 3);
  BOOST_TEST(j["rows"][0]["key"].get<std::string>() == "H=1024,T=1,w=\"bf16\"");
  BOOST_TEST(j["rows"][1]["x"].is_null());
  BOOST_TEST(j["rows"][2]["n"].is_null());
  BOOST_TEST(j["rows"][2]["x"].get<double>() == 1.0 / 3); // the value, not the shown text
}

BOOST_AUTO_TEST_CASE(text_pads_every_column_and_rows_must_fit) {
  std::ostringstream os;
  moefin::table::write_text(sample_table(), os);
  BOOST_TEST(os.str() == "a | title\n"
                         "key                   n      x\n"
                         "H=1024,T=1,w=\"bf16\"   3    0.1\n"
                         "line break           -2    nan\n"
                         "a|b                      0.33x\n",
             os.str());
  Table t;
  t.columns = {"a"};
  BOOST_CHECK_THROW(t.add_row({Cell::integer(1), Cell::integer(2)}), std::invalid_argument);
  BOOST_CHECK_THROW(moefin::table::parse_format("--format", "xml"), moefin::InputError);
  BOOST_TEST((moefin::table::parse_format("--format", "md") == moefin::table::Format::kMarkdown));
}

BOOST_AUTO_TEST_CASE(ratio_of_medians_interval_brackets_the_ratio_and_scales) {
  std::vector<double> const a{2.13, 2.135, 2.143, 2.154, 3.448};
  std::vector<double> b;
  for (double x : a)
    b.push_back(1.2 * x);
  moefin::stats::MedianRatioBootstrap const plan(5, 5);
  auto const same = plan(a, a);
  BOOST_TEST(same.ratio == 1.0);
  BOOST_TEST(same.lo < 1.0);
  BOOST_TEST(same.hi > 1.0);
  auto const slower = plan(a, b);
  BOOST_TEST(slower.ratio == 1 / 1.2, boost::test_tools::tolerance(1e-12));
  // the same draws: the interval of a scaled sample is the unscaled one over the scale
  BOOST_TEST(slower.lo == same.lo / 1.2, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(slower.hi == same.hi / 1.2, boost::test_tools::tolerance(1e-12));
  // one outlying round of five stretches the percentile interval up to it
  BOOST_TEST(same.hi > 1.3);
  BOOST_CHECK_THROW(plan(a, std::vector<double>{1, 2}), std::invalid_argument);
  moefin::stats::MedianRatioBootstrap const even(4, 6);
  auto const e = even({1, 2, 3, 4}, {2, 2, 3, 3, 4, 4});
  BOOST_TEST(e.ratio == 2.5 / 3.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(e.lo <= e.ratio);
  BOOST_TEST(e.hi >= e.ratio);
}

BOOST_AUTO_TEST_CASE(verdicts_set_the_change_against_threshold_and_noise) {
  using moefin::compare::Verdict;
  using moefin::compare::verdict_of;
  BOOST_TEST((verdict_of(1.04, 0.01, 0.05, true) == Verdict::kSame));
  BOOST_TEST((verdict_of(1 / 1.04, 0.01, 0.05, true) == Verdict::kSame));
  BOOST_TEST((verdict_of(1 / 1.2, 0.01, 0.05, true) == Verdict::kSlower));
  BOOST_TEST((verdict_of(1.2, 0.01, 0.05, true) == Verdict::kFaster));
  BOOST_TEST((verdict_of(1 / 1.2, 0.25, 0.05, true) == Verdict::kNoisy));
  BOOST_TEST((verdict_of(1 / 1.2, std::nan(""), 0.05, true) == Verdict::kNoisy));
  BOOST_TEST((verdict_of(1 / 1.2, 0.01, 0.05, false) == Verdict::kNotJudged));
  moefin::h5::Provenance a{{"arch", "sm_90"}, {"gpu_name", "NVIDIA H200"}},
      b{{"arch", "sm_90"}, {"gpu_name", "NVIDIA H200"}, {"carveout", "default"}};
  auto const d = moefin::compare::condition_differences(a, b);
  BOOST_TEST(d.size() == 1u);
  BOOST_TEST(d[0] == "carveout: not recorded vs default");
}
