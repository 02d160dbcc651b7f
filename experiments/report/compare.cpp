#include "experiments/report/compare.hpp"

#include "core/ops/errors.hpp"
#include "core/stats.hpp"
#include "experiments/report/finalize_tables.hpp"
#include "experiments/report/store_table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <ostream>
#include <set>
#include <sstream>
#include <utility>

namespace moefin::compare {

using results::store_cell;

std::vector<TimedTable> const& timed_tables() {
  static std::vector<TimedTable> const list{
      {"finalize_sweep",
       {"H", "T", "K", "weights", "mode", "l2", "variant"},
       "finalize_repeat",
       true},
      {"finalize_repeat",
       {"H", "T", "K", "weights", "mode", "l2", "variant"},
       "finalize_sweep",
       false},
      {"launch_floor", {"mode"}, "", true},
      {"copy_bandwidth", {"bytes"}, "", true},
      {"layer_sweep", {"shape", "T", "finalize", "placement"}, "", true},
  };
  return list;
}

char const* verdict_name(Verdict v) {
  switch (v) {
  case Verdict::kFaster:
    return "faster";
  case Verdict::kSlower:
    return "slower";
  case Verdict::kSame:
    return "same";
  case Verdict::kNoisy:
    return "noisy";
  case Verdict::kNotJudged:
    break;
  }
  return "-";
}

std::map<Verdict, std::size_t> TableResult::counts() const {
  std::map<Verdict, std::size_t> c;
  for (auto const& r : rows)
    ++c[r.verdict];
  return c;
}

std::size_t Result::matched() const {
  std::size_t n = 0;
  for (auto const& t : tables)
    n += t.rows.size();
  return n;
}

std::size_t Result::slower() const {
  std::size_t n = 0;
  for (auto const& t : tables)
    for (auto const& r : t.rows)
      n += r.verdict == Verdict::kSlower;
  return n;
}

namespace {

constexpr char const* kNotRecorded = "not recorded";
double const kNaN = std::numeric_limits<double>::quiet_NaN();

std::string attr(h5::Provenance const& p, std::string const& name) {
  auto const it = p.find(name);
  return it == p.end() ? kNotRecorded : it->second;
}

} // namespace

std::vector<std::string> condition_differences(h5::Provenance const& a, h5::Provenance const& b) {
  std::vector<std::string> out;
  for (char const* name : kConditionAttrs)
    if (attr(a, name) != attr(b, name))
      out.push_back(std::string(name) + ": " + attr(a, name) + " vs " + attr(b, name));
  return out;
}

Verdict verdict_of(double ratio, double noise, double threshold, bool judged) {
  if (!judged)
    return Verdict::kNotJudged;
  if (!(ratio > 0) || !std::isfinite(ratio))
    return Verdict::kNoisy;
  double const change = std::fabs(std::log(ratio));
  if (change <= std::log1p(threshold))
    return Verdict::kSame;
  // An unknown noise (no raw samples) cannot tell a change from chance.
  if (!(noise >= 0) || change <= std::log1p(noise))
    return Verdict::kNoisy;
  return ratio > 1 ? Verdict::kFaster : Verdict::kSlower;
}

namespace {

bool has_timing(h5::Table const& t) {
  return std::any_of(t.columns.begin(), t.columns.end(), [](h5::Column const& c) {
    return c.name == "median_us" && c.type == h5::ColType::kFloat64;
  });
}

/// One file's side of a timing table: the rows by configuration, and the noise sources.
struct Side {
  h5::Table table;
  std::map<std::string, std::size_t> index; // identity -> row
  std::map<std::string, double> repeat;     // identity -> |repeat / first - 1|
  double repeat_median = -1;
};

/// The text identity of row i (axis values joined by a separator no value holds).
std::string identity(h5::Table const& t, std::vector<h5::Column const*> const& cols,
                     std::size_t i) {
  std::string id;
  for (auto const* c : cols) {
    id += store_cell(t, *c, i).machine();
    id += '\x1f';
  }
  return id;
}

std::vector<h5::Column const*> axis_columns(h5::Table const& t,
                                            std::vector<std::string> const& axes,
                                            std::string const& path, std::string const& group) {
  std::vector<h5::Column const*> cols;
  for (auto const& a : axes) {
    auto const it = std::find_if(t.columns.begin(), t.columns.end(),
                                 [&](h5::Column const& c) { return c.name == a; });
    if (a == "key" && it == t.columns.end())
      continue;
    if (it == t.columns.end())
      throw FileError(path, "table /" + group + " lacks its axis column '" + a + "'");
    cols.push_back(&*it);
  }
  return cols;
}

std::map<std::string, std::size_t> index_rows(h5::Table const& t,
                                              std::vector<h5::Column const*> const& cols,
                                              std::string const& path, std::string const& group) {
  if (!has_timing(t))
    throw FileError(path, "table /" + group + " has no float column median_us");
  auto const& off = t.ints.at("sample_offset");
  auto const& cnt = t.ints.at("sample_count");
  for (std::size_t i = 0; i < t.rows; ++i)
    if (off[i] < 0 || cnt[i] < 0 ||
        static_cast<std::size_t>(off[i]) + static_cast<std::size_t>(cnt[i]) > t.samples.size())
      throw FileError(path, "table /" + group + ": row " + std::to_string(i) + " points past the " +
                                std::to_string(t.samples.size()) + " raw samples (truncated?)");
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < t.rows; ++i)
    if (!index.emplace(identity(t, cols, i), i).second)
      throw FileError(path, "table /" + group + " holds the configuration of row " +
                                std::to_string(i) + " twice (same axis values)");
  return index;
}

/// The median of a row: of its raw samples when it has them (they are what median_us was
/// computed from), else the stored median_us.
double row_median(h5::Table const& t, std::size_t i, std::vector<double> const& samples) {
  if (!samples.empty()) {
    try {
      return stats::median(samples);
    } catch (std::invalid_argument const&) {
      return kNaN;
    }
  }
  return t.reals.at("median_us")[i];
}

/// (q3 - q1) / median of the rounds: the spread of one row, robust to one outlying round.
double spread_of(std::vector<double> const& samples) {
  if (samples.size() < 2)
    return kNaN;
  try {
    auto const s = stats::summarize(samples);
    return s.median > 0 ? (s.q3 - s.q1) / s.median : kNaN;
  } catch (std::invalid_argument const&) {
    return kNaN;
  }
}

/// The run-to-run noise of `group` in one file: the relative difference between its rows and
/// those of `repeat` with the same axes (the same configurations measured again in the run).
void add_repeat_noise(h5::ResultReader const& reader, TimedTable const& spec, Side& side) {
  if (spec.repeat.empty() || !reader.has_group(spec.repeat))
    return;
  h5::Table const other = fin::read_tabulated(reader, spec.repeat);
  if (!has_timing(other))
    return;
  auto const cols = axis_columns(other, spec.axes, reader.path(), spec.repeat);
  auto const other_index = index_rows(other, cols, reader.path(), spec.repeat);
  std::vector<double> diffs;
  for (auto const& [id, i] : side.index) {
    auto const it = other_index.find(id);
    if (it == other_index.end())
      continue;
    double const a = row_median(side.table, i, side.table.row_samples(i));
    double const b = row_median(other, it->second, other.row_samples(it->second));
    if (!(a > 0) || !(b > 0))
      continue;
    // relative to the first measurement, as the report's noise table
    double const d = spec.first ? std::fabs(b / a - 1) : std::fabs(a / b - 1);
    side.repeat[id] = d;
    diffs.push_back(d);
  }
  if (!diffs.empty())
    side.repeat_median = stats::median(diffs);
}

TimedTable spec_of(std::string const& group) {
  for (auto const& t : timed_tables())
    if (t.group == group)
      return t;
  return {group, {"key"}, "", true};
}

Side read_side(h5::ResultReader const& reader, TimedTable const& spec) {
  Side s;
  s.table = fin::read_tabulated(reader, spec.group);
  auto const cols = axis_columns(s.table, spec.axes, reader.path(), spec.group);
  s.index = index_rows(s.table, cols, reader.path(), spec.group);
  add_repeat_noise(reader, spec, s);
  return s;
}

/// The largest of the noise sources of one configuration; NaN when no source was measured.
double noise_of(Side const& a, Side const& b, std::string const& id, double spread_a,
                double spread_b) {
  double n = kNaN;
  auto take = [&](double v) {
    if (v >= 0 && std::isfinite(v))
      n = std::isnan(n) ? v : std::max(n, v);
  };
  take(spread_a);
  take(spread_b);
  for (Side const* s : {&a, &b}) {
    auto const it = s->repeat.find(id);
    if (it != s->repeat.end())
      take(it->second);
    take(s->repeat_median);
  }
  // Without raw samples the spread of the rounds is unknown: the run-to-run noise alone would
  // understate it, so such a row stays unknown.
  if (std::isnan(spread_a) || std::isnan(spread_b))
    return kNaN;
  return n;
}

TableResult compare_table(h5::ResultReader const& base, h5::ResultReader const& next,
                          TimedTable const& spec, Options const& o, bool judged) {
  Side const a = read_side(base, spec);
  Side const b = read_side(next, spec);
  TableResult t;
  t.group = spec.group;
  t.axes.clear();
  auto const cols = axis_columns(a.table, spec.axes, base.path(), spec.group);
  for (auto const* c : cols)
    t.axes.push_back(c->name);
  t.repeat_base = a.repeat_median;
  t.repeat_new = b.repeat_median;
  t.repeat_group = spec.repeat;
  std::map<std::pair<std::size_t, std::size_t>, std::unique_ptr<stats::MedianRatioBootstrap>> plans;
  // Rows in the base file's order; the index maps identities, so the new file's order is free.
  std::vector<std::pair<std::size_t, std::string>> order;
  for (auto const& [id, i] : a.index)
    order.emplace_back(i, id);
  std::sort(order.begin(), order.end());
  for (auto const& [i, id] : order) {
    auto const it = b.index.find(id);
    if (it == b.index.end()) {
      ++t.only_base;
      continue;
    }
    std::size_t const j = it->second;
    auto const sa = a.table.row_samples(i);
    auto const sb = b.table.row_samples(j);
    Row r;
    for (auto const* c : cols)
      r.axes.push_back(store_cell(a.table, *c, i));
    r.base_us = row_median(a.table, i, sa);
    r.new_us = row_median(b.table, j, sb);
    r.base_rounds = sa.size();
    r.new_rounds = sb.size();
    r.ratio = r.base_us > 0 && r.new_us > 0 ? r.base_us / r.new_us : kNaN;
    r.lo = r.hi = kNaN;
    if (!sa.empty() && !sb.empty() && std::isfinite(r.ratio)) {
      auto& plan = plans[{sa.size(), sb.size()}];
      if (!plan)
        plan = std::make_unique<stats::MedianRatioBootstrap>(sa.size(), sb.size());
      try {
        auto const est = (*plan)(sa, sb);
        r.lo = est.lo;
        r.hi = est.hi;
      } catch (std::invalid_argument const&) {
        // a NaN or a non-positive round: the interval stays unknown
      }
    }
    r.noise = noise_of(a, b, id, spread_of(sa), spread_of(sb));
    r.verdict = verdict_of(r.ratio, r.noise, o.threshold, judged);
    t.rows.push_back(std::move(r));
  }
  for (auto const& kv : b.index)
    t.only_new += a.index.count(kv.first) == 0;
  return t;
}

} // namespace

Result compare_files(h5::ResultReader const& base, h5::ResultReader const& next,
                     Options const& options) {
  Result r;
  r.base_path = base.path();
  r.new_path = next.path();
  r.base_prov = base.provenance();
  r.new_prov = next.provenance();
  r.options = options;
  r.condition_differences = condition_differences(r.base_prov, r.new_prov);
  if (!r.judged() && !options.side_by_side) {
    std::string what;
    for (auto const& d : r.condition_differences)
      what += (what.empty() ? "" : "; ") + d;
    throw InputError("compare: " + base.path() + " and " + next.path() +
                     " were measured under different conditions (" + what +
                     "); refusing to pool them (--side-by-side shows them beside each other "
                     "without verdicts)");
  }
  auto const ga = base.groups();
  auto const gb = next.groups();
  std::set<std::string> const in_a(ga.begin(), ga.end()), in_b(gb.begin(), gb.end());
  std::set<std::string> const wanted(options.tables.begin(), options.tables.end());
  for (auto const& w : wanted)
    if (!in_a.count(w) && !in_b.count(w))
      throw InputError("--table: neither file holds /" + w);
  std::set<std::string> all = in_a;
  all.insert(in_b.begin(), in_b.end());
  for (auto const& g : all) {
    if (!wanted.empty() && !wanted.count(g))
      continue;
    auto const& reader = in_a.count(g) ? base : next;
    auto const attrs = reader.group_attrs(g);
    if (!attrs.count("kind") || attrs.at("kind") != "table")
      continue; // arrays (timelines, routings) hold no configurations to compare
    if (!in_a.count(g) || !in_b.count(g)) {
      r.not_compared.push_back("/" + g + ": only in " + (in_a.count(g) ? "base" : "new"));
      continue;
    }
    h5::Table const probe = reader.read_table(g);
    if (!has_timing(probe)) {
      r.not_compared.push_back("/" + g + ": no timing column (median_us)");
      continue;
    }
    r.tables.push_back(compare_table(base, next, spec_of(g), options, r.judged()));
  }
  return r;
}

namespace {

std::string fmt(char const* f, double v) {
  if (std::isnan(v))
    return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

table::Cell real_cell(double v, char const* display) {
  return table::Cell::real(v).shown(fmt(display, v));
}

std::string percent(double v) {
  return std::isnan(v) ? "-" : fmt("%.2f%%", 100 * v);
}

std::vector<std::string> metric_columns() {
  return {"base_us", "new_us",  "ratio",       "ratio_lo",  "ratio_hi",
          "noise",   "verdict", "base_rounds", "new_rounds"};
}

std::vector<table::Cell> metric_cells(Row const& r) {
  return {real_cell(r.base_us, "%.4g"),
          real_cell(r.new_us, "%.4g"),
          real_cell(r.ratio, "%.3fx"),
          real_cell(r.lo, "%.3fx"),
          real_cell(r.hi, "%.3fx"),
          table::Cell::real(r.noise).shown(percent(r.noise)),
          table::Cell::text(verdict_name(r.verdict)),
          table::Cell::integer(static_cast<std::int64_t>(r.base_rounds)),
          table::Cell::integer(static_cast<std::int64_t>(r.new_rounds))};
}

bool shown(Row const& r, bool changed_only) {
  return !changed_only || r.verdict != Verdict::kSame;
}

double geomean(std::vector<Row> const& rows) {
  double sum = 0;
  std::size_t n = 0;
  for (auto const& r : rows)
    if (r.ratio > 0 && std::isfinite(r.ratio)) {
      sum += std::log(r.ratio);
      ++n;
    }
  return n ? std::exp(sum / static_cast<double>(n)) : kNaN;
}

} // namespace

table::Table rows_table(TableResult const& t, bool changed_only) {
  table::Table out;
  out.name = t.group;
  out.title = "/" + t.group;
  out.columns = t.axes;
  for (auto const& c : metric_columns())
    out.columns.push_back(c);
  for (auto const& r : t.rows) {
    if (!shown(r, changed_only))
      continue;
    auto cells = r.axes;
    for (auto& c : metric_cells(r))
      cells.push_back(std::move(c));
    out.add_row(std::move(cells));
  }
  return out;
}

table::Table combined_table(Result const& r, bool changed_only) {
  table::Table out;
  out.name = "compare";
  out.columns = {"table"};
  std::vector<std::string> axes;
  for (auto const& t : r.tables)
    for (auto const& a : t.axes)
      if (std::find(axes.begin(), axes.end(), a) == axes.end())
        axes.push_back(a);
  out.columns.insert(out.columns.end(), axes.begin(), axes.end());
  for (auto const& c : metric_columns())
    out.columns.push_back(c);
  for (auto const& t : r.tables)
    for (auto const& row : t.rows) {
      if (!shown(row, changed_only))
        continue;
      std::vector<table::Cell> cells{table::Cell::text(t.group)};
      for (auto const& a : axes) {
        auto const it = std::find(t.axes.begin(), t.axes.end(), a);
        cells.push_back(it == t.axes.end()
                            ? table::Cell()
                            : row.axes[static_cast<std::size_t>(it - t.axes.begin())]);
      }
      for (auto& c : metric_cells(row))
        cells.push_back(std::move(c));
      out.add_row(std::move(cells));
    }
  return out;
}

std::string summary_line(TableResult const& t, Options const& o, bool judged) {
  auto const c = t.counts();
  auto n = [&](Verdict v) {
    auto const it = c.find(v);
    return it == c.end() ? std::size_t(0) : it->second;
  };
  std::ostringstream os;
  os << "/" << t.group << ": " << t.rows.size() << " configurations in both files";
  if (judged)
    os << ": " << n(Verdict::kSlower) << " slower, " << n(Verdict::kFaster) << " faster, "
       << n(Verdict::kSame) << " same, " << n(Verdict::kNoisy) << " noisy (threshold "
       << fmt("%g", 100 * o.threshold) << "%)";
  else
    os << ", not judged (different conditions)";
  os << "; geometric-mean ratio " << fmt("%.3fx", geomean(t.rows));
  if (!t.repeat_group.empty())
    os << "; run-to-run noise (median difference to /" << t.repeat_group << ") "
       << (t.repeat_base >= 0 ? percent(t.repeat_base) : "not measured") << " base, "
       << (t.repeat_new >= 0 ? percent(t.repeat_new) : "not measured") << " new";
  os << "; " << t.only_base << " only in base, " << t.only_new << " only in new";
  return os.str();
}

namespace {

char const* const kMethod[] = {
    "ratio = median of the base file's rounds / median of the new file's (> 1: the new file is "
    "faster); configurations matched by their axis values.",
    "interval: 95% percentile bootstrap of that ratio, 2000 resamples, each file's rounds "
    "resampled on their own (two runs have no rounds to pair); with a handful of rounds one "
    "outlying round can stretch it.",
    "noise of a configuration: the largest of the relative spread (q3 - q1) / median of each "
    "file's rounds, its own run-to-run difference where the file measured it again "
    "(/finalize_repeat), and the median run-to-run difference of that table in each file.",
    "verdict: same when the ratio is within a factor 1 + threshold either way; beyond it, noisy "
    "when the change is within the noise, else faster or slower. Exit 1 when any "
    "configuration is slower."};

} // namespace

void write_markdown(Result const& r, bool changed_only, std::ostream& os) {
  os << "# moefin compare\n\n";
  table::Table files;
  files.columns = {"", "base", "new"};
  files.add_row(
      {table::Cell::text("file"), table::Cell::text(r.base_path), table::Cell::text(r.new_path)});
  for (char const* a : {"gpu_name", "arch", "carveout", "ctas_per_sm", "launch", "git_commit",
                        "date_utc", "driver_version", "command_line"})
    files.add_row({table::Cell::text(a), table::Cell::text(attr(r.base_prov, a)),
                   table::Cell::text(attr(r.new_prov, a))});
  table::write_markdown(files, os);
  os << "\n";
  if (!r.judged()) {
    os << "**Different conditions, shown side by side without verdicts:** ";
    for (std::size_t i = 0; i < r.condition_differences.size(); ++i)
      os << (i ? "; " : "") << r.condition_differences[i];
    os << ".\n\n";
  }
  for (char const* m : kMethod)
    os << "- " << m << "\n";
  os << "- threshold: " << fmt("%g", 100 * r.options.threshold) << "%"
     << (changed_only ? "; rows: those not \"same\"" : "") << ".\n\n";
  for (auto const& t : r.tables) {
    os << "## /" << t.group << "\n\n" << summary_line(t, r.options, r.judged()) << "\n\n";
    auto rows = rows_table(t, changed_only);
    rows.title.clear();
    table::write_markdown(rows, os);
    os << "\n";
  }
  if (!r.not_compared.empty()) {
    os << "## Not compared\n\n";
    for (auto const& n : r.not_compared)
      os << "- " << n << "\n";
    os << "\n";
  }
  os << (r.matched() == 0 ? std::string("nothing compared: no configuration is in both files")
         : r.judged() ? std::to_string(r.slower()) + " configuration(s) slower beyond the threshold"
                      : std::string("not judged: different conditions"))
     << "\n";
}

void write_json(Result const& r, bool changed_only, std::ostream& os) {
  nlohmann::json doc;
  doc["base"] = {{"file", r.base_path}, {"provenance", r.base_prov}};
  doc["new"] = {{"file", r.new_path}, {"provenance", r.new_prov}};
  doc["threshold"] = r.options.threshold;
  doc["judged"] = r.judged();
  doc["condition_differences"] = r.condition_differences;
  doc["method"] = std::vector<std::string>(std::begin(kMethod), std::end(kMethod));
  doc["tables"] = nlohmann::json::array();
  for (auto const& t : r.tables) {
    auto const c = t.counts();
    nlohmann::json counts = nlohmann::json::object();
    for (Verdict v : {Verdict::kSlower, Verdict::kFaster, Verdict::kSame, Verdict::kNoisy,
                      Verdict::kNotJudged}) {
      auto const it = c.find(v);
      counts[verdict_name(v)] = it == c.end() ? 0 : it->second;
    }
    auto rows = table::to_json(rows_table(t, changed_only));
    doc["tables"].push_back(
        {{"table", t.group},
         {"axes", t.axes},
         {"configurations", t.rows.size()},
         {"verdicts", counts},
         {"only_base", t.only_base},
         {"only_new", t.only_new},
         {"repeat_noise_base", t.repeat_base >= 0 ? nlohmann::json(t.repeat_base) : nullptr},
         {"repeat_noise_new", t.repeat_new >= 0 ? nlohmann::json(t.repeat_new) : nullptr},
         {"summary", summary_line(t, r.options, r.judged())},
         {"columns", rows["columns"]},
         {"rows", rows["rows"]}});
  }
  doc["not_compared"] = r.not_compared;
  doc["slower"] = r.slower();
  os << doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

} // namespace moefin::compare
