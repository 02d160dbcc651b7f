#include "experiments/harness/bench_state.hpp"

#include "core/stats.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <ostream>
#include <set>
#include <stdexcept>

namespace moefin::bench {

std::string text(Value const& v) {
  if (auto const* i = std::get_if<std::int64_t>(&v))
    return std::to_string(*i);
  return std::get<std::string>(v);
}

Config& Config::set(std::string const& axis, Value v) {
  for (auto& kv : values_)
    if (kv.first == axis) {
      kv.second = std::move(v);
      return *this;
    }
  values_.emplace_back(axis, std::move(v));
  return *this;
}

bool Config::has(std::string const& axis) const {
  for (auto const& kv : values_)
    if (kv.first == axis)
      return true;
  return false;
}

Value const& Config::at(std::string const& axis) const {
  for (auto const& kv : values_)
    if (kv.first == axis)
      return kv.second;
  throw std::out_of_range("benchmark configuration has no axis '" + axis + "'");
}

std::int64_t Config::num(std::string const& axis) const {
  return std::get<std::int64_t>(at(axis));
}

std::string const& Config::str(std::string const& axis) const {
  return std::get<std::string>(at(axis));
}

Axis int_axis(std::string name, std::vector<std::int64_t> const& values, Scope scope) {
  Axis a;
  a.name = std::move(name);
  a.scope = scope;
  for (auto v : values)
    a.values.emplace_back(v);
  return a;
}

Axis string_axis(std::string name, std::vector<std::string> const& values, Scope scope) {
  Axis a;
  a.name = std::move(name);
  a.scope = scope;
  for (auto const& v : values)
    a.values.emplace_back(v);
  return a;
}

std::vector<h5::Column> stats_columns() {
  return {h5::real_col("median_us"), h5::real_col("min_us"), h5::real_col("q1_us"),
          h5::real_col("q3_us"), h5::real_col("max_us")};
}

std::vector<h5::Column> skip_columns() {
  return {h5::str_col("experiment", 32), h5::str_col("row_key", 160), h5::str_col("reason", 240)};
}

void Recorder::add(Config const& row, Measurement m) {
  rows_.emplace_back(row, std::move(m));
}

void Recorder::skip(Config const& row, std::string reason) {
  skips_.emplace_back(row, std::move(reason));
}

Benchmark::Benchmark(std::string table, std::vector<h5::Column> columns, std::string description)
    : table_(std::move(table)), description_(std::move(description)), columns_(std::move(columns)) {
}

Benchmark& Benchmark::axis(Axis a) {
  axes_.push_back(std::move(a));
  return *this;
}

Benchmark& Benchmark::key_order(std::vector<std::string> axes) {
  key_order_ = std::move(axes);
  return *this;
}

Benchmark& Benchmark::key(std::function<std::string(Config const&)> f) {
  key_ = std::move(f);
  return *this;
}

Benchmark& Benchmark::units(std::vector<Config> list) {
  unit_list_ = std::move(list);
  has_unit_list_ = true;
  return *this;
}

Benchmark& Benchmark::skip_if(std::function<std::string(Config const&)> f) {
  skip_ = std::move(f);
  return *this;
}

Benchmark& Benchmark::cost(std::function<double(Config const&, std::size_t)> f) {
  cost_ = std::move(f);
  return *this;
}

Benchmark& Benchmark::timed() {
  timed_ = true;
  return *this;
}

Benchmark& Benchmark::ratio(Ratio r) {
  ratios_.push_back(std::move(r));
  return *this;
}

namespace {

/// Every combination of the axes of `scope`, each extending `outer`, in declaration order (the
/// last axis varies fastest).
std::vector<Config> product(std::vector<Axis> const& axes, Scope scope, Config const& outer) {
  std::vector<Config> out{outer};
  for (auto const& a : axes) {
    if (a.scope != scope)
      continue;
    std::vector<Config> next;
    for (auto const& c : out)
      for (auto const& v : a.from ? a.from(c) : a.values)
        next.push_back(Config(c).set(a.name, v));
    out = std::move(next);
  }
  return out;
}

std::string fnv_hex(std::string const& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ULL;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

} // namespace

std::string Benchmark::row_key(Config const& row) const {
  if (key_)
    return key_(row);
  std::vector<std::string> order = key_order_;
  if (order.empty())
    for (auto const& a : axes_)
      if (a.in_key)
        order.push_back(a.name);
  std::string k;
  for (auto const& name : order) {
    std::string label = name;
    for (auto const& a : axes_)
      if (a.name == name && !a.key_label.empty())
        label = a.key_label;
    k += (k.empty() ? "" : ",") + label + "=" + text(row.at(name));
  }
  return k;
}

std::vector<Unit> Benchmark::enumerate() const {
  std::vector<Config> const units = has_unit_list_ ? unit_list_ : product(axes_, Scope::kUnit, {});
  std::vector<Unit> out;
  for (auto const& u : units) {
    Unit unit;
    unit.index = out.size();
    unit.config = u;
    for (auto const& kv : u.values())
      for (auto const& a : axes_)
        if (a.name == kv.first && a.scope == Scope::kUnit)
          unit.label += (unit.label.empty() ? "" : ",") +
                        (a.key_label.empty() ? a.name : a.key_label) + "=" + text(kv.second);
    if (unit.label.empty() && key_)
      unit.label = key_(u);
    for (auto const& row : product(axes_, Scope::kRow, u)) {
      std::string const why = skip_ ? skip_(row) : std::string();
      if (why.empty())
        unit.rows.push_back(row);
      else
        unit.skipped.emplace_back(row, why);
    }
    unit.cost_s = cost_ ? cost_(u, unit.rows.size()) : static_cast<double>(unit.rows.size());
    out.push_back(std::move(unit));
  }
  return out;
}

void Benchmark::list(std::ostream& os, std::function<bool(std::size_t)> const& mine) const {
  auto units = enumerate();
  std::size_t const all = units.size();
  if (mine)
    units.erase(
        std::remove_if(units.begin(), units.end(), [&](Unit const& u) { return !mine(u.index); }),
        units.end());
  double total = 0;
  std::size_t rows = 0, skipped = 0;
  for (auto const& u : units) {
    total += u.cost_s;
    rows += u.rows.size();
    skipped += u.skipped.size();
  }
  std::string const of = mine ? " of " + std::to_string(all) : std::string();
  char head[200];
  std::snprintf(head, sizeof(head), "%s: %zu%s units, %zu rows, %zu skipped; ~%.1f s estimated\n",
                table_.c_str(), units.size(), of.c_str(), rows, skipped, total);
  os << head;
  for (auto const& u : units) {
    char line[64];
    std::snprintf(line, sizeof(line), "[%zu] ~%.2f s ", u.index, u.cost_s);
    os << line << u.label << "\n";
    for (auto const& r : u.rows)
      os << "    " << row_key(r) << "\n";
    for (auto const& s : u.skipped)
      os << "    skip " << row_key(s.first) << ": " << s.second << "\n";
  }
}

h5::Row Benchmark::row_of(Config const& row, Measurement const& m,
                          std::map<std::string, std::vector<double>> const& unit_samples) const {
  h5::Row out = m.columns;
  auto is_column = [&](std::string const& name) {
    for (auto const& c : columns_)
      if (c.name == name)
        return true;
    return false;
  };
  for (auto const& kv : row.values())
    if (is_column(kv.first))
      std::visit([&](auto const& v) { out.set(kv.first, v); }, kv.second);
  if (timed_) {
    auto const s = stats::summarize(m.samples);
    out.set("median_us", s.median)
        .set("min_us", s.min)
        .set("q1_us", s.q1)
        .set("q3_us", s.q3)
        .set("max_us", s.max);
  }
  for (auto const& r : ratios_) {
    std::string const partner = r.partner(row);
    double v = r.none, lo = r.none, hi = r.none;
    if (!partner.empty()) {
      auto const it = unit_samples.find(row_key(Config(row).set(r.axis, partner)));
      if (it == unit_samples.end())
        throw std::logic_error("ratio " + r.column + " of " + row_key(row) + ": partner " +
                               partner + " not measured");
      auto const e = r.partner_over_row ? stats::paired_ratio(it->second, m.samples)
                                        : stats::paired_ratio(m.samples, it->second);
      v = e.ratio;
      lo = e.lo;
      hi = e.hi;
    }
    out.set(r.column, v).set(r.lo, lo).set(r.hi, hi);
  }
  return out;
}

std::string
Benchmark::missing_partner(Config const& row,
                           std::map<std::string, std::vector<double>> const& unit_samples) const {
  for (auto const& r : ratios_) {
    std::string const partner = r.partner(row);
    if (!partner.empty() && !unit_samples.count(row_key(Config(row).set(r.axis, partner))))
      return r.axis + "=" + partner;
  }
  return "";
}

RunResult Benchmark::run(h5::ResultWriter& file, RunOptions const& o, Body const& body) const {
  auto table = file.table(table_, columns_, description_);
  return run(file, table, enumerate(), o, body);
}

RunResult Benchmark::run(h5::ResultWriter& file, h5::TableWriter& table,
                         std::vector<Unit> const& units, RunOptions const& o,
                         Body const& body) const {
  RunResult res;
  std::vector<Unit const*> selected;
  for (auto const& u : units)
    if (!o.runs || o.runs(u))
      selected.push_back(&u);
  res.units = selected.size();
  std::unique_ptr<h5::TableWriter> skips;
  std::set<std::string> noted;
  // Skip rows are keyed by experiment and a hash of the row key (which may be long); the row key
  // itself is a column.
  auto skip_key = [&](std::string const& row_key) { return table_ + "#" + fnv_hex(row_key); };
  auto skipped = [&](std::string const& row_key) {
    if (!skips)
      skips = std::make_unique<h5::TableWriter>(
          file.table("skipped", skip_columns(),
                     "configurations an experiment left out, with the reason "
                     "(docs/reference/result-files.md)"));
    return skips->has(skip_key(row_key));
  };
  auto record_skip = [&](Config const& row, std::string const& why) {
    std::string const k = row_key(row);
    if (skipped(k))
      return;
    h5::Row r;
    r.set("experiment", table_).set("row_key", k).set("reason", why.substr(0, 239));
    skips->append(skip_key(k), r);
    ++res.skips;
    if (noted.insert(why).second)
      std::fprintf(stderr, "[%s] skipped: %s (%s)\n", table_.c_str(), why.c_str(), k.c_str());
  };
  auto missing = [&](Unit const& u) {
    std::vector<Config> todo;
    for (auto const& r : u.rows) {
      std::string const k = row_key(r);
      if (!table.has(k) && !skipped(k))
        todo.push_back(r);
    }
    return todo;
  };
  Progress progress(table_, selected.size());
  RunLimit const limit(o.max_minutes);
  double model_done = 0, real_done = 0;
  for (std::size_t i = 0; i < selected.size(); ++i) {
    Unit const& u = *selected[i];
    for (auto const& s : u.skipped)
      record_skip(s.first, s.second);
    std::vector<Config> const todo = missing(u);
    if (todo.empty()) {
      progress.step(u.label, /*skipped=*/true);
      ++res.resumed;
      if (o.finished)
        o.finished(u, 0, 0.0);
      continue;
    }
    double const pace = model_done > 0 ? real_done / model_done : 1.0;
    if (!limit.allows(u.cost_s * pace)) {
      res.left = selected.size() - i;
      break;
    }
    double const t0 = limit.elapsed_s();
    Recorder rec;
    body(u, todo, rec);
    double const seconds = limit.elapsed_s() - t0;
    real_done += seconds;
    model_done += u.cost_s;
    ++res.measured;
    std::size_t written = 0;
    std::map<std::string, std::vector<double>> samples;
    for (auto const& [row, m] : rec.rows_)
      samples[row_key(row)] = m.samples;
    for (auto const& [row, why] : rec.skips_)
      record_skip(row, why);
    for (auto const& [row, m] : rec.rows_) {
      std::string const k = row_key(row);
      if (table.has(k))
        continue; // re-measured for a ratio partner: already in the file
      std::string const missing = missing_partner(row, samples);
      if (!missing.empty()) {
        record_skip(row, "its ratio partner " + missing + " was not measured");
        continue;
      }
      table.append(k, row_of(row, m, samples), m.samples);
      ++res.rows;
      ++written;
    }
    if (o.finished && missing(u).empty())
      o.finished(u, written, seconds);
    progress.step(u.label + (rec.summary_.empty() ? "" : ": " + rec.summary_));
  }
  progress.finish();
  return res;
}

} // namespace moefin::bench
