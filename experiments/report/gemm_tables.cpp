#include "experiments/report/gemm_tables.hpp"

#include "core/ops/errors.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <tuple>

namespace moefin::gemm_tables {

using h5::int_col;
using h5::real_col;
using h5::str_col;

std::vector<h5::Column> gemm_sweep_columns() {
  return {str_col("shape", 40),
          int_col("H"),
          int_col("I"),
          int_col("E"),
          int_col("K"),
          int_col("T"),
          str_col("gemm", 8),
          int_col("n"),
          int_col("k"),
          str_col("format", 8),
          str_col("variant", 16),
          str_col("mode", 12),
          int_col("tile_m"),
          int_col("ctas"),
          int_col("ks"),
          int_col("units"),
          int_col("waves"),
          int_col("launches"),
          real_col("experts"),
          int_col("bytes"),
          real_col("median_us"),
          real_col("min_us"),
          real_col("q1_us"),
          real_col("q3_us"),
          real_col("max_us"),
          int_col("rounds"),
          real_col("gbps"),
          real_col("gbps_best"),
          real_col("copy_fraction"),
          real_col("read_fraction"),
          real_col("speedup_vs_tiled"),
          real_col("speedup_lo"),
          real_col("speedup_hi"),
          str_col("check", 8)};
}

std::vector<h5::Column> gemm_check_columns() {
  return {str_col("shape", 40),  int_col("T"),          str_col("gemm", 8),    str_col("format", 8),
          str_col("variant", 16), int_col("tile_m"),     int_col("ks"),         int_col("checked"),
          real_col("max_err"),   real_col("naive_err"), real_col("tolerance"), real_col("peak"),
          int_col("worst"),      int_col("pass")};
}

std::vector<h5::Column> bandwidth_columns() {
  return {str_col("at", 8),   int_col("bytes"),  real_col("gbps"),   real_col("median_us"),
          real_col("min_us"), int_col("rounds"), int_col("launches")};
}

std::vector<h5::Column> routing_sweep_columns() {
  return {str_col("shape", 40), int_col("E"),        int_col("K"),
          int_col("T"),         int_col("tile"),     str_col("impl", 16),
          int_col("threads"),   int_col("launches"), real_col("median_us"),
          real_col("min_us"),   real_col("q1_us"),   real_col("q3_us"),
          real_col("max_us"),   int_col("rounds"),   real_col("ratio_vs_block"),
          real_col("ratio_lo"), real_col("ratio_hi"), real_col("ratio_vs_released"),
          real_col("released_lo"), real_col("released_hi")};
}

std::vector<h5::Column> routing_check_columns() {
  return {str_col("shape", 40),    int_col("T"),
          int_col("tile"),         str_col("impl", 16),
          int_col("routings"),     int_col("layout_mismatches"),
          int_col("weight_steps"), int_col("bitwise_block"),
          int_col("pass")};
}

namespace {

std::string fmt(char const* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string pad(std::string s, std::size_t w) {
  if (s.size() < w)
    s.resize(w, ' ');
  return s;
}

} // namespace

void print_gemm_tables(h5::ResultReader const& file, std::ostream& os) {
  if (file.has_group("copy_bandwidth")) {
    h5::Table const c = file.read_table("copy_bandwidth");
    for (std::size_t i = 0; i < c.rows; ++i)
      os << "copy bandwidth (" << c.strings.at("at")[i]
         << "): " << fmt("%.0f", c.reals.at("gbps")[i])
         << " GB/s (device-to-device, read + write)\n";
  }
  if (file.has_group("read_bandwidth")) {
    h5::Table const c = file.read_table("read_bandwidth");
    for (std::size_t i = 0; i < c.rows; ++i)
      os << "read bandwidth (" << c.strings.at("at")[i]
         << "): " << fmt("%.0f", c.reals.at("gbps")[i]) << " GB/s (streaming 128-bit loads)\n";
  }
  if (file.has_group("gemm_sweep")) {
    h5::Table const t = file.read_table("gemm_sweep");
    os << "\n"
       << pad("shape", 24) << pad("gemm", 7) << pad("T", 4) << pad("weights", 8)
       << pad("variant", 17) << pad("mode", 10) << pad("ks", 4) << pad("experts", 9)
       << pad("MB/launch", 11) << pad("median us", 11) << pad("min us", 9) << pad("GB/s", 7)
       << pad("of copy", 9) << pad("vs tiled", 9) << "check\n";
    for (std::size_t i = 0; i < t.rows; ++i) {
      double const sp = t.reals.at("speedup_vs_tiled")[i];
      os << pad(t.strings.at("shape")[i], 24) << pad(t.strings.at("gemm")[i], 7)
         << pad(std::to_string(t.ints.at("T")[i]), 4) << pad(t.strings.at("format")[i], 8)
         << pad(t.strings.at("variant")[i], 17) << pad(t.strings.at("mode")[i], 10)
         << pad(std::to_string(t.ints.at("ks")[i]), 4)
         << pad(fmt("%.1f", t.reals.at("experts")[i]), 9)
         << pad(fmt("%.1f", static_cast<double>(t.ints.at("bytes")[i]) / 1e6), 11)
         << pad(fmt("%.2f", t.reals.at("median_us")[i]), 11)
         << pad(fmt("%.2f", t.reals.at("min_us")[i]), 9)
         << pad(fmt("%.0f", t.reals.at("gbps")[i]), 7)
         << pad(fmt("%.1f%%", 100.0 * t.reals.at("copy_fraction")[i]), 9)
         << pad(std::isnan(sp) ? "-" : fmt("%.2fx", sp), 9) << t.strings.at("check")[i] << "\n";
    }
  }
  if (file.has_group("gemm_check")) {
    h5::Table const c = file.read_table("gemm_check");
    os << "\nchecks against the Kokkos reference (tolerance 2 x the naive fp32 GEMM's error):\n";
    std::int64_t fails = 0;
    for (std::size_t i = 0; i < c.rows; ++i) {
      bool const pass = c.ints.at("pass")[i] != 0;
      fails += !pass;
      os << "  " << pad(c.strings.at("shape")[i], 24) << pad(c.strings.at("gemm")[i], 7)
         << "T=" << pad(std::to_string(c.ints.at("T")[i]), 4) << pad(c.strings.at("format")[i], 6)
         << pad(c.strings.at("variant")[i], 17)
         << "ks=" << pad(std::to_string(c.ints.at("ks")[i]), 3) << "max err "
         << fmt("%.3g", c.reals.at("max_err")[i])
         << " <= " << fmt("%.3g", c.reals.at("tolerance")[i]) << " (peak "
         << fmt("%.3g", c.reals.at("peak")[i]) << ", " << c.ints.at("checked")[i] << " outputs) "
         << (pass ? "pass" : "FAIL") << "\n";
    }
    os << "  " << c.rows << " checks, " << fails << " failed\n";
  }
}

bool is_gemm_row(std::string const& variant) {
  return variant != kSplitkLoads && variant != kReadFloor &&
         variant.rfind(kLoadsCandidatePrefix, 0) != 0;
}

void print_copy_fraction_tables(h5::ResultReader const& file, std::ostream& os) {
  if (!file.has_group("gemm_sweep"))
    return;
  h5::Table const t = file.read_table("gemm_sweep");
  // Blocks (shape, gemm, format) in file order; in each, labels (variant, mode) and T in order.
  struct Block {
    std::vector<std::string> labels;
    std::vector<std::int64_t> tokens;
    std::map<std::pair<std::string, std::int64_t>, double> fraction;
  };
  std::vector<std::tuple<std::string, std::string, std::string>> order;
  std::map<std::tuple<std::string, std::string, std::string>, Block> blocks;
  for (std::size_t i = 0; i < t.rows; ++i) {
    auto const key = std::make_tuple(t.strings.at("shape")[i], t.strings.at("gemm")[i],
                                     t.strings.at("format")[i]);
    if (!blocks.count(key))
      order.push_back(key);
    Block& b = blocks[key];
    std::string const label =
        t.strings.at("variant")[i] + (t.strings.at("mode")[i] == "pdl" ? std::string("/pdl") : "");
    std::int64_t const T = t.ints.at("T")[i];
    if (std::find(b.labels.begin(), b.labels.end(), label) == b.labels.end())
      b.labels.push_back(label);
    if (std::find(b.tokens.begin(), b.tokens.end(), T) == b.tokens.end())
      b.tokens.push_back(T);
    b.fraction[{label, T}] = t.reals.at("copy_fraction")[i];
  }
  os << "\nweight-stream bandwidth as % of the copy bandwidth at the start of the run (GEMM "
        "rows; splitk_loads, sk+loads* and read are diagnostics and never 'best'; target 85%):\n";
  for (auto const& key : order) {
    Block const& b = blocks.at(key);
    os << "\n"
       << std::get<0>(key) << " " << std::get<1>(key) << " " << std::get<2>(key) << "\n  "
       << pad("variant", 20);
    for (std::int64_t T : b.tokens)
      os << pad("T=" + std::to_string(T), 8);
    os << "\n";
    for (std::string const& label : b.labels) {
      os << "  " << pad(label, 20);
      for (std::int64_t T : b.tokens) {
        auto const it = b.fraction.find({label, T});
        os << pad(it == b.fraction.end() ? std::string("-") : fmt("%.1f", 100.0 * it->second), 8);
      }
      os << "\n";
    }
    os << "  best:";
    for (std::int64_t T : b.tokens) {
      std::string best;
      double frac = -1;
      for (std::string const& label : b.labels) {
        auto const it = b.fraction.find({label, T});
        if (it != b.fraction.end() && is_gemm_row(label.substr(0, label.find('/'))) &&
            it->second > frac) {
          best = label;
          frac = it->second;
        }
      }
      if (frac >= 0)
        os << " T=" << T << " " << best << " " << fmt("%.1f%%", 100.0 * frac)
           << (frac >= 0.85 ? " (>= 85%)" : "") << ";";
    }
    os << "\n";
  }
}

void print_routing_tables(h5::ResultReader const& file, std::ostream& os) {
  if (file.has_group("routing_sweep")) {
    h5::Table const t = file.read_table("routing_sweep");
    os << pad("shape", 24) << pad("T", 4) << pad("impl", 12) << pad("threads", 9)
       << pad("median us", 11) << pad("min us", 9) << pad("vs block (median ratio, 95% CI)", 34)
       << "vs released\n";
    // Files written before the released rows have no ratio_vs_released column.
    bool const has_released = t.reals.count("ratio_vs_released") > 0;
    auto ratio = [](double r, double lo, double hi) {
      return std::isnan(r)
                 ? std::string("-")
                 : fmt("%.2fx", r) + " [" + fmt("%.2f", lo) + ", " + fmt("%.2f", hi) + "]";
    };
    for (std::size_t i = 0; i < t.rows; ++i) {
      os << pad(t.strings.at("shape")[i], 24) << pad(std::to_string(t.ints.at("T")[i]), 4)
         << pad(t.strings.at("impl")[i], 12) << pad(std::to_string(t.ints.at("threads")[i]), 9)
         << pad(fmt("%.2f", t.reals.at("median_us")[i]), 11)
         << pad(fmt("%.2f", t.reals.at("min_us")[i]), 9)
         << pad(ratio(t.reals.at("ratio_vs_block")[i], t.reals.at("ratio_lo")[i],
                      t.reals.at("ratio_hi")[i]),
                34)
         << (has_released ? ratio(t.reals.at("ratio_vs_released")[i], t.reals.at("released_lo")[i],
                                  t.reals.at("released_hi")[i])
                          : std::string("-"))
         << "\n";
    }
  }
  if (file.has_group("routing_check")) {
    h5::Table const c = file.read_table("routing_check");
    os << "\nchecks (layout arrays exactly the Kokkos reference's, weights within one bf16 step, "
          "bitwise the block kernel's where it runs):\n";
    for (std::size_t i = 0; i < c.rows; ++i)
      os << "  " << pad(c.strings.at("shape")[i], 24)
         << "T=" << pad(std::to_string(c.ints.at("T")[i]), 4) << pad(c.strings.at("impl")[i], 12)
         << c.ints.at("routings")[i] << " routings, " << c.ints.at("layout_mismatches")[i]
         << " layout mismatches, weights off by at most " << c.ints.at("weight_steps")[i]
         << " bf16 step(s), bitwise block: " << (c.ints.at("bitwise_block")[i] ? "yes" : "no")
         << "  " << (c.ints.at("pass")[i] ? "pass" : "FAIL") << "\n";
  }
}

namespace {

void require(h5::ResultReader const& file, std::string const& group, char const* command) {
  if (!file.has_group(group))
    throw FileError(file.path(),
                    "no table for experiment '" + group + "' (not a file of " + command + ")");
}

} // namespace

std::string gemm_print(h5::ResultReader const& file) {
  require(file, "gemm_sweep", "sweep gemm");
  std::ostringstream os;
  print_gemm_tables(file, os);
  print_copy_fraction_tables(file, os);
  return os.str();
}

std::string routing_print(h5::ResultReader const& file) {
  require(file, "routing_sweep", "sweep routing");
  std::ostringstream os;
  print_routing_tables(file, os);
  return os.str();
}

} // namespace moefin::gemm_tables
