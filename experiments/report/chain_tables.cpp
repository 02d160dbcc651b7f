#include "experiments/report/chain_tables.hpp"

#include "core/ops/errors.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <tuple>

namespace moefin::chain_tables {

using h5::int_col;
using h5::real_col;
using h5::str_col;

std::vector<h5::Column> equivalence_columns() {
  return {str_col("shape", 40),        int_col("T"),
          str_col("preset", 16),       str_col("overrides", 120),
          int_col("delay_ns"),         str_col("delayed_kernel", 12),
          str_col("finalize", 16),     int_col("tile_m"),
          int_col("routings"),         int_col("mismatches"),
          str_col("first_buffer", 24), int_col("first_index"),
          str_col("first_seed", 24),   int_col("stale_reads"),
          int_col("recorded_reads"),   int_col("ref_checks"),
          real_col("max_rel_err"),     real_col("tolerance"),
          real_col("routings_per_s"),  str_col("weights_format", 12)};
}

std::vector<h5::Column> race_columns() {
  return {str_col("shape", 40),
          int_col("T"),
          str_col("preset", 16),
          str_col("triggers", 96),
          str_col("meta", 8),
          int_col("delay_ns"),
          str_col("delayed_kernel", 12),
          str_col("finalize", 16),
          int_col("iterations"),
          int_col("mismatches"),
          int_col("stale_reads"),
          int_col("stale_iterations"),
          int_col("recorded_reads"),
          str_col("first_buffer", 24),
          str_col("verifier", 12)};
}

std::vector<h5::Column> layer_columns() {
  return {str_col("shape", 40),
          int_col("H"),
          int_col("I"),
          int_col("E"),
          int_col("K"),
          str_col("activation", 8),
          int_col("T"),
          str_col("finalize", 12),
          str_col("placement", 16),
          str_col("finalize_kernel", 16),
          int_col("tile_m"),
          int_col("layers"),
          real_col("median_us"),
          real_col("min_us"),
          real_col("q1_us"),
          real_col("q3_us"),
          real_col("max_us"),
          int_col("rounds"),
          real_col("speedup_finalize"),
          real_col("speedup_finalize_lo"),
          real_col("speedup_finalize_hi"),
          real_col("speedup_placement"),
          real_col("speedup_placement_lo"),
          real_col("speedup_placement_hi"),
          str_col("weights_format", 12)};
}

namespace {

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

std::string pad(std::string s, std::size_t w) {
  if (s.size() < w)
    s.resize(w, ' ');
  return s;
}

} // namespace

void print_equivalence(h5::Table const& t, std::ostream& os) {
  bool const has_format = t.has_column("weights_format"); // files before it: bf16-tiled
  os << pad("shape", 26);
  if (has_format)
    os << pad("weights", 12);
  os << pad("T", 5) << pad("preset", 13) << pad("delay", 16) << pad("finalize", 13)
     << pad("routings", 10) << pad("mismatch", 10) << pad("stale", 8) << pad("max_rel_err", 13)
     << "routings/s\n";
  for (std::size_t i = 0; i < t.rows; ++i) {
    std::int64_t const delay = t.ints.at("delay_ns")[i];
    std::string const d =
        delay ? std::to_string(delay) + "ns@" + t.strings.at("delayed_kernel")[i] : "0";
    std::string preset = t.strings.at("preset")[i];
    if (!t.strings.at("overrides")[i].empty())
      preset += "*";
    double const err = t.reals.at("max_rel_err")[i];
    os << pad(t.strings.at("shape")[i], 26);
    if (has_format)
      os << pad(t.strings.at("weights_format")[i], 12);
    os << pad(std::to_string(t.ints.at("T")[i]), 5) << pad(preset, 13) << pad(d, 16)
       << pad(t.strings.at("finalize")[i], 13) << pad(std::to_string(t.ints.at("routings")[i]), 10)
       << pad(std::to_string(t.ints.at("mismatches")[i]), 10)
       << pad(std::to_string(t.ints.at("stale_reads")[i]), 8)
       << pad(err < 0 ? "-" : fixed(err, 5), 13) << fixed(t.reals.at("routings_per_s")[i], 0);
    if (t.ints.at("mismatches")[i] > 0)
      os << "  first: " << t.strings.at("first_buffer")[i] << "[" << t.ints.at("first_index")[i]
         << "] seed " << t.strings.at("first_seed")[i];
    os << "\n";
  }
  os << "(* = preset with --set overrides; max_rel_err: output vs the Kokkos reference, relative "
        "to the output's peak, '-' = not checked)\n";
}

void print_race_matrix(h5::Table const& t, std::ostream& os) {
  // Columns: every (meta, delay) present, in order of appearance.
  std::vector<std::string> cols;
  std::map<std::string, std::map<std::string, std::string>> cells; // row -> col -> text
  std::vector<std::string> rows;
  for (std::size_t i = 0; i < t.rows; ++i) {
    std::string const col =
        "meta=" + t.strings.at("meta")[i] + " d=" + std::to_string(t.ints.at("delay_ns")[i]);
    std::string const row = t.strings.at("shape")[i] + " T=" + std::to_string(t.ints.at("T")[i]) +
                            " " + t.strings.at("preset")[i] + " " + t.strings.at("triggers")[i];
    if (std::find(cols.begin(), cols.end(), col) == cols.end())
      cols.push_back(col);
    if (!cells.count(row))
      rows.push_back(row);
    std::string const& verdict = t.strings.at("verifier")[i];
    bool const seen = t.ints.at("mismatches")[i] > 0 || t.ints.at("stale_iterations")[i] > 0;
    cells[row][col] = std::to_string(t.ints.at("mismatches")[i]) + "/" +
                      std::to_string(t.ints.at("iterations")[i]) + " s" +
                      std::to_string(t.ints.at("stale_iterations")[i]) +
                      (verdict == "race" ? " R" : "") + (seen && verdict == "ordered" ? " !" : "");
  }
  std::size_t wrow = 20;
  for (auto const& r : rows)
    wrow = std::max(wrow, r.size() + 2);
  // Each column as wide as its widest header or cell plus two spaces, so headers never touch.
  std::map<std::string, std::size_t> wcol;
  for (auto const& c : cols) {
    wcol[c] = c.size() + 2;
    for (auto const& r : rows)
      if (cells[r].count(c))
        wcol[c] = std::max(wcol[c], cells[r][c].size() + 2);
  }
  os << pad("configuration (triggers of permute, gemm1, act, gemm2)", wrow);
  for (auto const& c : cols)
    os << pad(c, wcol[c]);
  os << "\n";
  for (auto const& r : rows) {
    os << pad(r, wrow);
    for (auto const& c : cols) {
      auto const it = cells[r].find(c);
      os << pad(it == cells[r].end() ? "." : it->second, wcol[c]);
    }
    os << "\n";
  }
  os << "(cell: iterations with a bitwise mismatch vs PDL off / iterations, s = iterations with a "
        "stale pre-wait read; delay d in ns, injected into the delayed_kernel column's kernel; "
        "R = the verifier calls the cell's chain a race; ! = a race seen in a chain the verifier "
        "orders)\n";
}

std::vector<Published> read_published(std::string const& path) {
  std::ifstream in(path);
  if (!in)
    throw FileError(path, "cannot open the published table");
  std::string line;
  std::vector<std::string> header;
  std::vector<Published> out;
  auto split = [](std::string const& s) {
    std::vector<std::string> f;
    std::stringstream ss(s);
    std::string x;
    while (std::getline(ss, x, ','))
      f.push_back(x);
    if (!s.empty() && s.back() == ',')
      f.emplace_back();
    return f;
  };
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    auto const f = split(line);
    if (header.empty()) {
      header = f;
      continue;
    }
    auto col = [&](char const* name) -> std::string {
      for (std::size_t i = 0; i < header.size(); ++i)
        if (header[i] == name)
          return i < f.size() ? f[i] : std::string();
      throw FileError(path, std::string("no column '") + name + "' in the header");
    };
    try {
      Published p;
      p.hidden = std::stoll(col("hidden"));
      p.experts = std::stoll(col("experts"));
      p.topk = std::stoll(col("topk"));
      p.tokens = std::stoll(col("tokens"));
      p.arch = col("arch");
      std::string const s = col("speedup");
      p.speedup = s.empty() ? 0.0 : std::stod(s);
      out.push_back(p);
    } catch (std::invalid_argument const&) {
      throw FileError(path, "malformed row '" + line + "'");
    }
  }
  if (header.empty())
    throw FileError(path, "no header line");
  return out;
}

namespace {

struct LayerKey {
  std::string shape;
  std::int64_t T;
  bool operator<(LayerKey const& o) const { return std::tie(shape, T) < std::tie(o.shape, o.T); }
};

/// Row i's weights format: bf16-tiled in files written before the column existed.
std::string format_of(h5::Table const& t, std::size_t i) {
  std::string const f = t.has_column("weights_format") ? t.strings.at("weights_format")[i] : "";
  return f.empty() ? std::string("bf16-tiled") : f;
}

void print_one(h5::Table const& t, std::vector<Published> const& pub, std::string const& title,
               std::string const& format, std::string const& finalize, std::string const& placement,
               std::string const& ratio_col, std::string const& published_name,
               std::string const& gpu, std::ostream& os) {
  os << title << "\n";
  std::set<std::string> archs;
  for (auto const& p : pub)
    archs.insert(p.arch);
  std::string const measured = gpu + " (measured)";
  std::size_t const wm = std::max<std::size_t>(26, measured.size() + 2);
  os << pad("shape", 26) << pad("tokens", 8) << pad(measured, wm);
  for (auto const& a : archs)
    os << pad(a + " (pub.)", 14);
  os << "\n";
  for (std::size_t i = 0; i < t.rows; ++i) {
    if (t.strings.at("finalize")[i] != finalize || t.strings.at("placement")[i] != placement ||
        format_of(t, i) != format)
      continue;
    std::int64_t const T = t.ints.at("T")[i];
    double const r = t.reals.at(ratio_col)[i];
    std::string m = fixed(r, 3) + "x [" + fixed(t.reals.at(ratio_col + "_lo")[i], 3) + ", " +
                    fixed(t.reals.at(ratio_col + "_hi")[i], 3) + "]";
    os << pad(t.strings.at("shape")[i], 26) << pad(std::to_string(T), 8) << pad(m, wm);
    for (auto const& a : archs) {
      std::string cell = "-";
      for (auto const& p : pub)
        if (p.arch == a && p.hidden == t.ints.at("H")[i] && p.experts == t.ints.at("E")[i] &&
            p.topk == t.ints.at("K")[i] && p.tokens == T && p.speedup > 0)
          cell = fixed(p.speedup, 3) + "x";
      os << pad(cell, 14);
    }
    os << "\n";
  }
  os << "(measured: paired median ratio over interleaved rounds with its 95% bootstrap interval; "
        "published: "
     << published_name << ", '-' = not published)\n\n";
}

/// Per (shape, T), in the order the rows come: the median per layer of each format (seed-after,
/// new finalize) and of each PyTorch peer variant.
void print_formats(h5::Table const& t, std::vector<std::string> const& formats,
                   h5::Table const* peers, std::ostream& os) {
  std::vector<std::string> variants;
  std::map<std::pair<LayerKey, std::string>, double> us; // (shape, T), column -> median
  std::vector<LayerKey> order;
  std::map<LayerKey, std::string> shown; // the layer rows' own shape names
  // Rows match on the shape name less a trailing "/<activation>": peer files written before the
  // peer took the chain's names call top-22 "H2048/I1280/E512/top-22/relu2".
  auto same_shape = [](h5::Table const& x, std::size_t i) {
    std::string shape = x.strings.at("shape")[i];
    std::string const act = "/" + x.strings.at("activation")[i];
    if (shape.size() > act.size() &&
        shape.compare(shape.size() - act.size(), act.size(), act) == 0)
      shape.resize(shape.size() - act.size());
    return shape;
  };
  auto note = [&](LayerKey const& k) {
    if (std::find_if(order.begin(), order.end(), [&](LayerKey const& o) {
          return o.shape == k.shape && o.T == k.T;
        }) == order.end())
      order.push_back(k);
  };
  auto add_torch = [&](h5::Table const& x) {
    for (std::size_t i = 0; i < x.rows; ++i) {
      if (x.strings.at("finalize")[i] != "torch")
        continue;
      std::string const v = "torch " + x.strings.at("finalize_kernel")[i];
      if (std::find(variants.begin(), variants.end(), v) == variants.end())
        variants.push_back(v);
      us[{LayerKey{same_shape(x, i), x.ints.at("T")[i]}, v}] = x.reals.at("median_us")[i];
    }
  };
  for (std::size_t i = 0; i < t.rows; ++i) {
    if (t.strings.at("finalize")[i] != "new" || t.strings.at("placement")[i] != "seed-after")
      continue;
    LayerKey const k{same_shape(t, i), t.ints.at("T")[i]};
    note(k);
    shown.emplace(k, t.strings.at("shape")[i]);
    us[{k, format_of(t, i)}] = t.reals.at("median_us")[i];
  }
  add_torch(t);
  if (peers)
    add_torch(*peers);
  os << "Whole layer time per layer (us, median; seed-after placement, new finalize) by weights "
        "format";
  os << (variants.empty() ? "" : ", and the PyTorch peer") << "\n";
  os << pad("shape", 26) << pad("tokens", 8);
  std::vector<std::string> cols = formats;
  cols.insert(cols.end(), variants.begin(), variants.end());
  for (auto const& c : cols)
    os << pad(c, std::max<std::size_t>(12, c.size() + 2));
  os << "\n";
  for (LayerKey const& k : order) {
    os << pad(shown.at(k), 26) << pad(std::to_string(k.T), 8);
    for (auto const& c : cols) {
      auto const it = us.find({k, c});
      os << pad(it == us.end() ? "-" : fixed(it->second, 2),
                std::max<std::size_t>(12, c.size() + 2));
    }
    os << "\n";
  }
  os << "(bf16-tiled: the tiled grouped GEMM; bf16, fp4: the split-K decode GEMM on bf16 or "
        "4-bit weights; torch: experiments/chain/peers_layer_torch.py, PDL off; '-' = not "
        "measured)\n\n";
}

} // namespace

void print_layer_tables(h5::Table const& t, std::string const& published_dir,
                        std::string const& gpu, std::ostream& os, h5::Table const* peers) {
  auto const whole = read_published(published_dir + "/whole_op_speedup.csv");
  auto const order = read_published(published_dir + "/pdl_ordering_speedup.csv");
  bool has_format = false; // a file written before the column: no format named
  if (t.has_column("weights_format"))
    for (auto const& f : t.strings.at("weights_format"))
      has_format = has_format || !f.empty();
  std::vector<std::string> formats;
  for (std::size_t i = 0; i < t.rows; ++i)
    if (t.strings.at("finalize")[i] != "torch" &&
        std::find(formats.begin(), formats.end(), format_of(t, i)) == formats.end())
      formats.push_back(format_of(t, i));
  if (formats.empty())
    formats.push_back("bf16-tiled");
  for (auto const& f : formats) {
    std::string const of = has_format ? ", " + f + " weights" : "";
    print_one(t, whole,
              "Whole layer, new finalize vs previous (seed-after placement, PDL on" + of + ")", f,
              "new", "seed-after", "speedup_finalize", "whole_op_speedup.csv", gpu, os);
    print_one(t, order,
              "Whole layer, PDL ordering seed-after vs seed-before (new finalize, PDL on" + of +
                  ")",
              f, "new", "seed-after", "speedup_placement", "pdl_ordering_speedup.csv", gpu, os);
  }
  bool torch = peers != nullptr;
  for (std::size_t i = 0; i < t.rows; ++i)
    torch = torch || t.strings.at("finalize")[i] == "torch";
  if (formats.size() > 1 || torch)
    print_formats(t, formats, peers, os);
  os << pad("shape", 26) << pad("tokens", 8);
  if (has_format)
    os << pad("weights", 12);
  os << pad("finalize", 10) << pad("placement", 13) << pad("kernel", 13) << pad("median_us", 11)
     << "min_us\n";
  for (std::size_t i = 0; i < t.rows; ++i) {
    os << pad(t.strings.at("shape")[i], 26) << pad(std::to_string(t.ints.at("T")[i]), 8);
    if (has_format)
      os << pad(format_of(t, i), 12);
    os << pad(t.strings.at("finalize")[i], 10) << pad(t.strings.at("placement")[i], 13)
       << pad(t.strings.at("finalize_kernel")[i], 13)
       << pad(fixed(t.reals.at("median_us")[i], 2), 11) << fixed(t.reals.at("min_us")[i], 2)
       << "\n";
  }
}

std::string default_published_dir() {
#ifdef MOEFIN_SOURCE_DIR
  std::string const src = std::string(MOEFIN_SOURCE_DIR) + "/data/published";
  if (std::filesystem::exists(src + "/whole_op_speedup.csv"))
    return src;
#endif
  return "data/published";
}

} // namespace moefin::chain_tables
