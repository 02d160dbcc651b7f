#include "experiments/report/finalize_tables.hpp"

#include "core/ops/errors.hpp"
#include "core/ops/finalize_variants.hpp"
#include "core/stats.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace moefin::fin {

std::vector<h5::Column> finalize_sweep_columns() {
  return {h5::int_col("H"),
          h5::int_col("T"),
          h5::int_col("K"),
          h5::str_col("weights", 8),
          h5::str_col("mode", 4),
          h5::str_col("l2", 8),
          h5::str_col("variant", 28),
          h5::str_col("dispatch", 16),
          h5::str_col("dispatch_device", 16),
          h5::int_col("in_regime"),
          h5::real_col("median_us"),
          h5::real_col("min_us"),
          h5::real_col("q1_us"),
          h5::real_col("q3_us"),
          h5::real_col("max_us"),
          h5::int_col("rounds"),
          h5::int_col("launches"),
          h5::real_col("speedup_vs_scalar"),
          h5::real_col("speedup_lo"),
          h5::real_col("speedup_hi"),
          h5::real_col("ablation_ratio"),
          h5::real_col("ablation_lo"),
          h5::real_col("ablation_hi"),
          h5::int_col("bytes"),
          h5::real_col("gbps"),
          h5::real_col("copy_fraction"),
          h5::int_col("ctas")};
}

std::vector<h5::Column> launch_floor_columns() {
  return {h5::str_col("mode", 4), h5::real_col("median_us"), h5::real_col("min_us"),
          h5::real_col("q1_us"),  h5::real_col("q3_us"),     h5::real_col("max_us"),
          h5::int_col("rounds"),  h5::int_col("launches")};
}

std::vector<h5::Column> copy_bandwidth_columns() {
  return {h5::int_col("bytes"),   h5::real_col("gbps"),  h5::real_col("median_us"),
          h5::real_col("min_us"), h5::int_col("rounds"), h5::int_col("launches")};
}

std::string default_published_csv() {
  std::string const rel = "data/published/finalize_only_speedup.csv";
#ifdef MOEFIN_SOURCE_DIR
  std::string const in_tree = std::string(MOEFIN_SOURCE_DIR) + "/" + rel;
  if (std::ifstream(in_tree).good())
    return in_tree;
#endif
  return rel;
}

std::string mode_b_producer(h5::Provenance const& root) {
  auto const it = root.find("mode_b_producer");
  return it == root.end() ? std::string("plain") : it->second;
}

std::string tabulated_mode(std::string const& mode, std::string const& producer) {
  return mode == "b" && producer != "pdl-wait" ? std::string("b0") : mode;
}

h5::Table read_tabulated(h5::ResultReader const& reader, std::string const& group) {
  h5::Table t = reader.read_table(group);
  auto const it = t.strings.find("mode");
  if (it != t.strings.end()) {
    std::string const producer = mode_b_producer(reader.provenance());
    for (auto& m : it->second)
      m = tabulated_mode(m, producer);
  }
  return t;
}

void record_mode_b_producer(h5::ResultWriter& file, std::string const& producer) {
  file.keep_root_attr("mode_b_producer", producer, "plain", "--producer", "mode b producer");
}

namespace {

struct SweepRow {
  std::string arch, key;
  std::int64_t hidden = 0, tokens = 0, top_k = 0;
  std::string weights, mode, l2, variant, dispatch;
  bool in_regime = false;
  double median_us = 0, speedup = 0;
  std::int64_t ctas = 0;

  std::string shape() const {
    return std::to_string(hidden) + "/" + std::to_string(tokens) + "/" + std::to_string(top_k) +
           "/" + weights;
  }
};

std::string arch_label(h5::Provenance const& p) {
  auto get = [&](char const* k) {
    auto it = p.find(k);
    return it == p.end() ? std::string("none") : it->second;
  };
  std::string gpu = get("gpu_name");
  if (gpu.rfind("NVIDIA ", 0) == 0)
    gpu = gpu.substr(7);
  return gpu + " (" + get("arch") + ")";
}

std::vector<SweepRow> read_rows(h5::ResultReader const& r, std::string const& group,
                                std::string const& arch) {
  h5::Table const t = read_tabulated(r, group);
  for (char const* c : {"H", "T", "K", "weights", "mode", "l2", "variant", "in_regime", "median_us",
                        "speedup_vs_scalar"})
    if (!t.has_column(c))
      throw FileError(r.path(), "table " + group + " lacks the column " + c);
  std::vector<SweepRow> rows(t.rows);
  for (std::size_t i = 0; i < t.rows; ++i) {
    SweepRow& s = rows[i];
    s.arch = arch;
    s.key = t.keys()[i];
    s.hidden = t.ints.at("H")[i];
    s.tokens = t.ints.at("T")[i];
    s.top_k = t.ints.at("K")[i];
    s.weights = t.strings.at("weights")[i];
    s.mode = t.strings.at("mode")[i];
    s.l2 = t.strings.at("l2")[i];
    s.variant = t.strings.at("variant")[i];
    s.dispatch = t.has_column("dispatch") ? t.strings.at("dispatch")[i] : "";
    s.in_regime = t.ints.at("in_regime")[i] != 0;
    s.median_us = t.reals.at("median_us")[i];
    s.speedup = t.reals.at("speedup_vs_scalar")[i];
    s.ctas = t.has_column("ctas") ? t.ints.at("ctas")[i] : 0;
  }
  return rows;
}

/// Plain aligned text table: the first column left-aligned, the others right-aligned.
class TextTable {
public:
  explicit TextTable(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::size_t size() const { return rows_.size() - 1; }
  std::string render() const {
    std::vector<std::size_t> w;
    for (auto const& r : rows_)
      for (std::size_t c = 0; c < r.size(); ++c) {
        if (w.size() <= c)
          w.push_back(0);
        w[c] = std::max(w[c], r[c].size());
      }
    std::ostringstream os;
    for (auto const& r : rows_) {
      std::string line;
      for (std::size_t c = 0; c < r.size(); ++c) {
        std::string const pad(w[c] - r[c].size(), ' ');
        line += c == 0 ? r[c] + pad : "  " + pad + r[c];
      }
      while (!line.empty() && line.back() == ' ')
        line.pop_back();
      os << line << "\n";
    }
    return os.str();
  }

private:
  std::vector<std::vector<std::string>> rows_;
};

std::string fmt(char const* f, double v) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

/// "1.23x (1.05)": median and minimum.
std::string median_min(std::vector<double> const& v) {
  if (v.empty())
    return "-";
  return fmt("%.2fx", stats::median(v)) + " (" +
         fmt("%.2f", *std::min_element(v.begin(), v.end())) + ")";
}

struct Published {
  std::vector<std::string> archs;                                  // in file order
  std::map<std::int64_t, std::map<std::string, std::string>> cell; // K -> arch -> "1.26x (1.17)"
  std::set<std::int64_t> kept;                                     // K kept on the previous kernel
  std::string note;
  /// The published cell of top-K k for `arch`: "kept" where the seed keeps the previous kernel,
  /// "-" where nothing is published.
  std::string at(std::int64_t k, std::string const& arch) const {
    auto it = cell.find(k);
    if (it != cell.end() && it->second.count(arch))
      return it->second.at(arch);
    return kept.count(k) ? "kept" : "-";
  }
};

Published read_published(std::string const& csv) {
  Published pub;
  std::ifstream in(csv);
  if (!in) {
    pub.note = "published columns unavailable: cannot read " + csv;
    return pub;
  }
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    if (header) {
      header = false; // topk,arch,sm,median_speedup,min_speedup,note
      continue;
    }
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string item;
    while (std::getline(ss, item, ','))
      f.push_back(item);
    if (f.size() < 5)
      continue;
    std::string const arch = f[1] + " (SM" + f[2] + ")*";
    if (std::find(pub.archs.begin(), pub.archs.end(), arch) == pub.archs.end())
      pub.archs.push_back(arch);
    pub.cell[std::stoll(f[0])][arch] =
        fmt("%.2fx", std::stod(f[3])) + " (" + fmt("%.2f", std::stod(f[4])) + ")";
  }
  // The notes beside it name the top-K values the seed kept on the previous kernel.
  std::string notes = csv;
  auto const pos = notes.rfind("finalize_only_speedup.csv");
  if (pos != std::string::npos) {
    notes.replace(pos, std::string("finalize_only_speedup.csv").size(), "finalize_only_notes.csv");
    std::ifstream nin(notes);
    while (std::getline(nin, line)) {
      if (line.empty() || line[0] == '#' || !std::isdigit(static_cast<unsigned char>(line[0])))
        continue;
      pub.kept.insert(std::stoll(line.substr(0, line.find(','))));
    }
  }
  // The note names a file of the source tree by its path in the tree, so the table reads the
  // same wherever the checkout is.
  std::string shown = csv;
#ifdef MOEFIN_SOURCE_DIR
  std::string const root = std::string(MOEFIN_SOURCE_DIR) + "/";
  if (shown.rfind(root, 0) == 0)
    shown.erase(0, root.size());
#endif
  pub.note = "* published with the seed (" + shown +
             "), measured on Blackwell parts by the change's authors; kept: the seed keeps the "
             "previous kernel for this top-K";
  return pub;
}

char const* mode_text(std::string const& m) {
  if (m == "a")
    return "back-to-back launches, PDL on: the seed's protocol";
  if (m == "b")
    return "producer kernel then finalize in each step, PDL on, producer time subtracted; the "
           "producer PDL-launched, waiting at entry";
  if (m == "b0")
    return "as b, but the producer launched without PDL and without a wait (files before "
           "2026-12-04): finalize's trigger cannot start it early";
  if (m == "c")
    return "back-to-back launches, PDL off";
  return "?";
}

// Every mode a table may show, in print order; b0 (mode b of a plain-producer file) beside b.
std::vector<std::string> const kModes{"a", "b", "b0", "c"};
// The modes with a producer or back-to-back launches under PDL (the released and ablation views).
std::vector<std::string> const kPdlModes{"a", "b", "b0"};

/// The modes of `candidates` that some row has.
std::vector<std::string> present_modes(std::vector<SweepRow> const& rows,
                                       std::vector<std::string> const& candidates) {
  std::vector<std::string> out;
  for (auto const& m : candidates)
    if (std::any_of(rows.begin(), rows.end(), [&](SweepRow const& r) { return r.mode == m; }))
      out.push_back(m);
  return out;
}

bool is_peer(std::string const& v) {
  return v.rfind("torch_", 0) == 0;
}

struct Index {
  // (arch, mode, l2, variant, shape) -> row
  std::map<std::string, SweepRow const*> by_key;
  static std::string key(std::string const& arch, std::string const& mode, std::string const& l2,
                         std::string const& variant, std::string const& shape) {
    return arch + "|" + mode + "|" + l2 + "|" + variant + "|" + shape;
  }
  SweepRow const* find(std::string const& arch, std::string const& mode, std::string const& l2,
                       std::string const& variant, std::string const& shape) const {
    auto it = by_key.find(key(arch, mode, l2, variant, shape));
    return it == by_key.end() ? nullptr : it->second;
  }
};

/// The variant a row's speedup_vs_scalar is computed against: the registry's baseline, or, for a
/// variant this build does not register, the released previous kernel for a released one (fi_*)
/// and scalar otherwise.
std::string baseline_name(std::string const& variant) {
  if (auto const* v = finalize::find_variant(variant))
    return finalize::baseline_of(*v).name;
  return variant.rfind("fi_", 0) == 0 ? "fi_scalar" : "scalar";
}

/// The seed's table for `variant` (small_batch, or the released fi_small_batch): its speedup over
/// its baseline per top-K. moefin's also shows what its dispatcher picks and the peers.
void mode_table(std::ostringstream& os, std::vector<SweepRow> const& rows, Index const& idx,
                std::vector<std::string> const& archs, std::string const& mode,
                Published const* pub, std::string const& variant = "small_batch") {
  bool const moefin_table = variant == "small_batch";
  std::set<std::int64_t> ks;
  std::map<std::string, std::map<std::int64_t, std::vector<double>>> speed; // arch -> K
  std::map<std::int64_t, std::set<std::string>> dispatch;
  std::set<std::string> peers;
  for (auto const& r : rows) {
    if (r.mode != mode || r.l2 != "hot" || !r.in_regime)
      continue;
    if (is_peer(r.variant) && moefin_table)
      peers.insert(r.variant);
    if (r.variant != variant)
      continue;
    ks.insert(r.top_k);
    speed[r.arch][r.top_k].push_back(r.speedup);
    if (!r.dispatch.empty() && moefin_table)
      dispatch[r.top_k].insert(r.dispatch);
  }
  if (ks.empty() && peers.empty())
    return;
  os << "\n"
     << variant << " vs " << baseline_name(variant) << ", mode " << mode << " (" << mode_text(mode)
     << "), L2 hot: median speedup over the in-regime shapes (minimum)\n";
  std::vector<std::string> header{"topK"};
  if (moefin_table)
    header.push_back("dispatch");
  for (auto const& a : archs)
    header.push_back(a);
  if (pub)
    for (auto const& a : pub->archs)
      header.push_back(a);
  // Peers: small_batch's speedup over them, per shape measured in the same mode.
  std::vector<std::pair<std::string, std::string>> peer_cols; // (arch, peer)
  std::map<std::string, std::map<std::int64_t, std::vector<double>>> over;
  for (auto const& a : archs)
    for (auto const& p : peers) {
      bool any = false;
      for (auto const& r : rows) {
        if (r.arch != a || r.variant != p || r.mode != mode || r.l2 != "hot" || !r.in_regime)
          continue;
        auto const* sb = idx.find(a, mode, "hot", "small_batch", r.shape());
        if (sb && sb->median_us > 0) {
          over[a + "|" + p][r.top_k].push_back(r.median_us / sb->median_us);
          ks.insert(r.top_k);
          any = true;
        }
      }
      if (any) {
        peer_cols.emplace_back(a, p);
        header.push_back(a + " vs " + p);
      }
    }
  TextTable t(header);
  std::size_t cells = 0;
  for (auto k : ks) {
    std::vector<std::string> row{std::to_string(k)};
    auto const& d = dispatch[k];
    if (moefin_table)
      row.push_back(d.empty() ? "-" : d.size() == 1 ? *d.begin() : "mixed");
    for (auto const& a : archs) {
      auto const& v = speed[a][k];
      cells = std::max(cells, v.size());
      row.push_back(median_min(v));
    }
    if (pub)
      for (auto const& a : pub->archs)
        row.push_back(pub->at(k, a));
    for (auto const& pc : peer_cols)
      row.push_back(median_min(over[pc.first + "|" + pc.second][k]));
    t.add(row);
  }
  os << t.render();
  os << "(up to " << cells << " shapes per cell: H x T x weights inside ceil(H/256)*T < 1184";
  if (!peer_cols.empty())
    os << "; 'vs torch_*': the peer's time over small_batch's, same shape and mode";
  os << ")\n";
  if (pub)
    os << pub->note << "\n";
  if (!moefin_table)
    return;
  // The benchmark "never slower where the dispatcher picks it".
  SweepRow const* worst = nullptr;
  for (auto const& r : rows)
    if (r.mode == mode && r.l2 == "hot" && r.in_regime && r.variant == "small_batch" &&
        r.dispatch == "small_batch" && (!worst || r.speedup < worst->speedup))
      worst = &r;
  if (worst)
    os << "where the dispatcher picks small_batch, the lowest speedup is "
       << fmt("%.3f", worst->speedup) << "x (" << worst->arch << ", H=" << worst->hidden
       << " T=" << worst->tokens << " K=" << worst->top_k << " w=" << worst->weights << ")\n";
}

void t1_table(std::ostringstream& os, std::vector<SweepRow> const& rows,
              std::vector<std::string> const& archs) {
  std::map<std::string, std::map<std::int64_t, std::vector<double>>> us, sp;
  std::set<std::int64_t> ks;
  for (auto const& r : rows)
    if (r.mode == "a" && r.l2 == "hot" && r.tokens == 1 && r.variant == "small_batch") {
      us[r.arch][r.top_k].push_back(r.median_us);
      sp[r.arch][r.top_k].push_back(r.speedup);
      ks.insert(r.top_k);
    }
  if (ks.empty())
    return;
  os << "\nT = 1, mode a: small_batch per-launch time (max over H and weights) and speedup over "
        "scalar (min over H and weights)\n"
        "targets: <= 1.6 us for H <= 7168 and K <= 32; >= 2.0x / 3.0x / 4.0x at K = 8 / 16 / 32\n";
  std::vector<std::string> header{"topK"};
  for (auto const& a : archs) {
    header.push_back(a + " max us");
    header.push_back(a + " min speedup");
  }
  TextTable t(header);
  for (auto k : ks) {
    std::vector<std::string> row{std::to_string(k)};
    for (auto const& a : archs) {
      auto const& u = us[a][k];
      auto const& s = sp[a][k];
      row.push_back(u.empty() ? "-" : fmt("%.2f", *std::max_element(u.begin(), u.end())));
      row.push_back(s.empty() ? "-" : fmt("%.2fx", *std::min_element(s.begin(), s.end())));
    }
    t.add(row);
  }
  os << t.render();
}

/// The columns of the ablation tables: every variant of the rows that has a baseline (so a
/// speedup over it), in registry order, then names the registry does not know; not the
/// baselines themselves and not the peers.
std::vector<std::string> ablation_variants(std::vector<SweepRow> const& rows) {
  std::set<std::string> names;
  for (auto const& r : rows)
    if (!is_peer(r.variant))
      names.insert(r.variant);
  std::vector<std::string> out;
  for (auto const* v : finalize::variants())
    if (names.count(v->name) && !v->baseline.empty())
      out.push_back(v->name);
  for (auto const& n : names)
    if (!finalize::find_variant(n))
      out.push_back(n);
  return out;
}

void ablation_tables(std::ostringstream& os, std::vector<SweepRow> const& rows,
                     std::vector<std::string> const& archs) {
  std::vector<std::string> const variants = ablation_variants(rows);
  for (auto const& a : archs)
    for (auto const& mode : present_modes(rows, kModes)) {
      std::map<std::string, std::map<std::int64_t, std::vector<double>>> sp;
      std::set<std::int64_t> ks;
      std::set<std::string> present;
      for (auto const& r : rows)
        if (r.arch == a && r.mode == mode && r.l2 == "hot" && r.in_regime &&
            std::find(variants.begin(), variants.end(), r.variant) != variants.end()) {
          sp[r.variant][r.top_k].push_back(r.speedup);
          ks.insert(r.top_k);
          present.insert(r.variant);
        }
      if (present.size() < 2)
        continue;
      os << "\nablation, " << a << ", mode " << mode
         << ": median speedup over scalar (minimum) of each variant\n";
      std::vector<std::string> header{"topK"};
      for (auto const& v : variants)
        if (present.count(v))
          header.push_back(v);
      TextTable t(header);
      for (auto k : ks) {
        std::vector<std::string> row{std::to_string(k)};
        for (auto const& v : variants)
          if (present.count(v))
            row.push_back(median_min(sp[v][k]));
        t.add(row);
      }
      os << t.render();
      if (std::any_of(present.begin(), present.end(),
                      [](auto const& v) { return baseline_name(v) != "scalar"; }))
        os << "(released fi_* variants: speedup over fi_scalar, the released previous kernel)\n";
    }
}

/// Faithfulness: moefin's variant's time over the released kernel of the same role (X / fi_X),
/// measured in the same rounds, per architecture, mode and top-K over the shapes where both ran
/// (L2 hot): median and [min, max]. Below 1: moefin's is faster.
void faithfulness_tables(std::ostringstream& os, std::vector<SweepRow> const& rows,
                         Index const& idx, std::vector<std::string> const& archs) {
  std::vector<std::string> const roles{"scalar", "small_batch", "vecload"};
  for (auto const& a : archs)
    for (auto const& mode : present_modes(rows, kModes)) {
      std::map<std::string, std::map<std::int64_t, std::vector<double>>> ratio;
      std::set<std::int64_t> ks;
      for (auto const& r : rows) {
        if (r.arch != a || r.mode != mode || r.l2 != "hot" ||
            std::find(roles.begin(), roles.end(), r.variant) == roles.end())
          continue;
        auto const* fi = idx.find(a, mode, "hot", "fi_" + r.variant, r.shape());
        if (fi == nullptr || fi->median_us <= 0 || r.median_us <= 0)
          continue;
        ratio[r.variant][r.top_k].push_back(r.median_us / fi->median_us);
        ks.insert(r.top_k);
      }
      if (ks.empty())
        continue;
      os << "\nfaithfulness, " << a << ", mode " << mode
         << ": moefin's time / the released kernel's of the same role, median [min, max] over "
            "the shapes where both ran (below 1: moefin's is faster)\n";
      std::vector<std::string> header{"topK"};
      for (auto const& v : roles)
        if (ratio.count(v))
          header.push_back(v + " / fi_" + v);
      TextTable t(header);
      std::size_t cells = 0;
      for (auto k : ks) {
        std::vector<std::string> row{std::to_string(k)};
        for (auto const& v : roles) {
          if (!ratio.count(v))
            continue;
          auto const& x = ratio[v][k];
          cells = std::max(cells, x.size());
          row.push_back(x.empty() ? "-"
                                  : fmt("%.3f", stats::median(x)) + " [" +
                                        fmt("%.3f", *std::min_element(x.begin(), x.end())) + ", " +
                                        fmt("%.3f", *std::max_element(x.begin(), x.end())) + "]");
        }
        t.add(row);
      }
      os << t.render();
      os << "(up to " << cells << " shapes per cell: H x T x weights)\n";
    }
}

/// small_batch_v2 (only for files that have it): against the released small-batch kernel
/// (fi_small_batch) where the run timed it, else against moefin's small_batch, per top-K, for
/// T <= 4 and over the whole regime; its T = 1 time above the run's launch floor; what each of
/// its ingredients buys (the ablation: time without it over time with it); and moefin's
/// small_batch against the released kernel where their geometries agree (same CTAs, and
/// ceil(K / 4) groups a power of two, as the released kSplit).
void v2_tables(std::ostringstream& os, std::vector<SweepRow> const& rows, Index const& idx,
               std::vector<std::string> const& archs,
               std::map<std::string, std::map<std::string, double>> const& floors) {
  auto has = [&](std::string const& a, std::string const& v) {
    return std::any_of(rows.begin(), rows.end(),
                       [&](SweepRow const& r) { return r.arch == a && r.variant == v; });
  };
  std::vector<std::string> const modes = present_modes(rows, kModes);
  for (auto const& a : archs) {
    if (!has(a, "small_batch_v2"))
      continue;
    bool const released = has(a, "fi_small_batch");
    std::string const base = released ? "fi_small_batch" : "small_batch";
    // ratio[mode][K] over T <= 4 and over the regime; the worst shape per mode.
    std::map<std::string, std::map<std::int64_t, std::vector<double>>> low, all;
    std::map<std::string, std::pair<double, SweepRow const*>> worst;
    std::set<std::int64_t> ks;
    for (auto const& r : rows) {
      if (r.arch != a || r.variant != "small_batch_v2" || r.l2 != "hot" || !r.in_regime)
        continue;
      auto const* b = idx.find(a, r.mode, "hot", base, r.shape());
      if (!b || r.median_us <= 0)
        continue;
      double const x = b->median_us / r.median_us;
      ks.insert(r.top_k);
      all[r.mode][r.top_k].push_back(x);
      if (r.tokens <= 4)
        low[r.mode][r.top_k].push_back(x);
      auto& w = worst[r.mode];
      if (!w.second || x < w.first)
        w = {x, &r};
    }
    if (ks.empty())
      continue;
    os << "\nsmall_batch_v2 vs " << base
       << (released ? " (the released kernel)" : " (moefin's: the run has no released kernel)")
       << ", " << a << ", L2 hot, same rounds: median of " << base
       << " time / small_batch_v2 time (minimum)\n";
    if (released)
      os << "targets: median >= 1.25x in mode a and >= 1.15x in mode b at T <= 4 for every "
            "K >= 6; minimum >= 1.00x in the whole regime, modes a, b and c\n";
    std::vector<std::string> header{"topK"};
    for (auto const& m : modes)
      header.push_back(m + ", T <= 4");
    for (auto const& m : modes)
      header.push_back(m + ", regime");
    TextTable t(header);
    for (auto k : ks) {
      std::vector<std::string> row{std::to_string(k)};
      for (auto const& m : modes)
        row.push_back(median_min(low[m][k]));
      for (auto const& m : modes)
        row.push_back(median_min(all[m][k]));
      t.add(row);
    }
    os << t.render();
    for (auto const& m : modes)
      if (worst[m].second) {
        auto const* r = worst[m].second;
        os << "mode " << m << ": lowest " << fmt("%.3f", worst[m].first) << "x at H=" << r->hidden
           << " T=" << r->tokens << " K=" << r->top_k << " w=" << r->weights << "\n";
      }

    auto const fl = floors.find(a);
    if (fl != floors.end()) {
      os << "\nT = 1, " << a
         << ": small_batch_v2 per-launch time minus the run's launch floor (max over H, us); "
            "target <= 0.45 us for H <= 7168 and K <= 32\n";
      std::vector<std::string> h{"topK"};
      for (auto const& m : modes)
        if (fl->second.count(m))
          h.push_back(m + " (floor " + fmt("%.2f", fl->second.at(m)) + ")");
      TextTable t1(h);
      for (auto k : ks) {
        std::vector<std::string> row{std::to_string(k)};
        for (auto const& m : modes) {
          if (!fl->second.count(m))
            continue;
          bool found = false;
          double worst_us = 0;
          for (auto const& r : rows)
            if (r.arch == a && r.variant == "small_batch_v2" && r.mode == m && r.l2 == "hot" &&
                r.tokens == 1 && r.top_k == k && r.hidden <= 7168) {
              double const above = r.median_us - fl->second.at(m);
              worst_us = found ? std::max(worst_us, above) : above;
              found = true;
            }
          row.push_back(found ? fmt("%.2f", worst_us) : "-");
        }
        t1.add(row);
      }
      os << t1.render();
    }

    std::vector<std::pair<std::string, std::string>> const ablations{
        {"small_batch_v2_late_trigger", "trigger at entry"},
        {"small_batch_v2_no_shuffle", "shuffle combine"},
        {"small_batch_v2_no_broadcast", "metadata broadcast"},
        {"small_batch_v2_late_address", "addresses before the wait"}, // files before the anchor left v2
        {"small_batch_v2_anchor", "compiler-placed addresses"},
        {"small_batch_v2_fi_geometry", "measured geometry"}};
    for (auto const& m : present_modes(rows, kPdlModes)) {
      std::map<std::string, std::map<std::int64_t, std::vector<double>>> buy;
      for (auto const& r : rows) {
        if (r.arch != a || r.mode != m || r.l2 != "hot" || !r.in_regime)
          continue;
        for (auto const& ab : ablations)
          if (r.variant == ab.first) {
            auto const* v = idx.find(a, m, "hot", "small_batch_v2", r.shape());
            if (v && v->median_us > 0)
              buy[ab.first][r.top_k].push_back(r.median_us / v->median_us);
          }
      }
      if (buy.empty())
        continue;
      os << "\nsmall_batch_v2 ablation, " << a << ", mode " << m
         << ": time without the ingredient / time with it, median (minimum) over the regime\n";
      std::vector<std::string> h{"topK"};
      for (auto const& ab : ablations)
        if (buy.count(ab.first))
          h.push_back(ab.second);
      TextTable ta(h);
      for (auto k : ks) {
        std::vector<std::string> row{std::to_string(k)};
        for (auto const& ab : ablations)
          if (buy.count(ab.first))
            row.push_back(median_min(buy[ab.first][k]));
        ta.add(row);
      }
      os << ta.render();
    }

    if (!released)
      continue;
    std::map<std::string, std::map<std::int64_t, std::vector<double>>> agree;
    for (auto const& r : rows) {
      if (r.arch != a || r.variant != "small_batch" || r.l2 != "hot" || !r.in_regime)
        continue;
      std::int64_t const groups = (r.top_k + 3) / 4;
      if ((groups & (groups - 1)) != 0)
        continue;
      auto const* f = idx.find(a, r.mode, "hot", "fi_small_batch", r.shape());
      if (f && f->ctas == r.ctas && r.ctas > 0 && r.median_us > 0)
        agree[r.mode][r.top_k].push_back(f->median_us / r.median_us);
    }
    if (agree.empty())
      continue;
    os << "\nmoefin small_batch vs the released kernel where their geometries agree, " << a
       << ": fi_small_batch time / small_batch time, median (minimum); target >= 0.95x\n";
    std::vector<std::string> gh{"topK"};
    for (auto const& m : modes)
      gh.push_back(m);
    TextTable tg(gh);
    std::set<std::int64_t> gk;
    for (auto const& m : agree)
      for (auto const& kv : m.second)
        gk.insert(kv.first);
    for (auto k : gk) {
      std::vector<std::string> row{std::to_string(k)};
      for (auto const& m : modes)
        row.push_back(median_min(agree[m][k]));
      tg.add(row);
    }
    os << tg.render();
  }
}

/// The seed's table with moefin's new kernel in it: small_batch_v2 and the released
/// fi_small_batch, each over the released previous kernel (fi_scalar) of the same rounds, per
/// top-K, median over the in-regime shapes (minimum); the published columns beside in mode a.
void v2_seed_table(std::ostringstream& os, std::vector<SweepRow> const& rows, Index const& idx,
                   std::vector<std::string> const& archs, std::string const& mode,
                   Published const* pub) {
  for (auto const& a : archs) {
    std::map<std::int64_t, std::vector<double>> v2, fi;
    for (auto const& r : rows) {
      if (r.arch != a || r.mode != mode || r.l2 != "hot" || !r.in_regime || r.median_us <= 0 ||
          (r.variant != "small_batch_v2" && r.variant != "fi_small_batch"))
        continue;
      auto const* base = idx.find(a, mode, "hot", "fi_scalar", r.shape());
      if (!base)
        continue;
      (r.variant == "small_batch_v2" ? v2 : fi)[r.top_k].push_back(base->median_us / r.median_us);
    }
    if (v2.empty() || fi.empty())
      continue;
    os << "\nsmall_batch_v2 and fi_small_batch vs fi_scalar (the released previous kernel), "
       << a << ", mode " << mode << " (" << mode_text(mode)
       << "), L2 hot, same rounds: median speedup over the in-regime shapes (minimum)\n";
    std::vector<std::string> header{"topK", "small_batch_v2", "fi_small_batch"};
    if (pub)
      for (auto const& p : pub->archs)
        header.push_back(p);
    TextTable t(header);
    for (auto const& [k, x] : v2) {
      std::vector<std::string> row{std::to_string(k), median_min(x), median_min(fi[k])};
      if (pub)
        for (auto const& p : pub->archs)
          row.push_back(pub->at(k, p));
      t.add(row);
    }
    os << t.render();
    if (pub)
      os << pub->note << "\n";
  }
}

void repeat_spread(std::ostringstream& os, std::string const& arch,
                   std::vector<SweepRow> const& main_rows, std::vector<SweepRow> const& rep) {
  std::map<std::string, SweepRow const*> by_key;
  for (auto const& r : main_rows)
    if (r.arch == arch)
      by_key[r.key] = &r;
  std::vector<double> dt, ds;
  for (auto const& r : rep) {
    auto it = by_key.find(r.key);
    if (it == by_key.end() || it->second->median_us <= 0 || it->second->speedup <= 0)
      continue;
    dt.push_back(std::fabs(r.median_us - it->second->median_us) / it->second->median_us);
    ds.push_back(std::fabs(r.speedup - it->second->speedup) / it->second->speedup);
  }
  if (dt.empty())
    return;
  os << "\nnoise, " << arch << ": " << dt.size()
     << " configurations measured twice in the same run; |difference| relative to the first: "
        "per-launch time median "
     << fmt("%.2f%%", 100 * stats::median(dt)) << ", max "
     << fmt("%.2f%%", 100 * *std::max_element(dt.begin(), dt.end())) << "; speedup median "
     << fmt("%.2f%%", 100 * stats::median(ds)) << ", max "
     << fmt("%.2f%%", 100 * *std::max_element(ds.begin(), ds.end())) << "\n";
}

} // namespace

std::string render_finalize_tables(std::vector<std::string> const& files,
                                   std::string const& published_csv) {
  std::vector<SweepRow> rows;
  std::map<std::string, std::vector<SweepRow>> repeats;        // arch -> rows of /finalize_repeat
  std::map<std::string, std::map<std::string, double>> floors; // arch -> mode -> launch floor
  std::vector<std::string> archs;
  std::ostringstream os;
  for (auto const& f : files) {
    h5::ResultReader r(f);
    std::string const arch = arch_label(r.provenance());
    if (!r.has_group("finalize_sweep")) {
      os << "note: " << f << " has no /finalize_sweep table\n";
      continue;
    }
    auto const more = read_rows(r, "finalize_sweep", arch);
    rows.insert(rows.end(), more.begin(), more.end());
    if (r.has_group("launch_floor")) {
      h5::Table const lf = read_tabulated(r, "launch_floor");
      if (lf.has_column("mode") && lf.has_column("median_us"))
        for (std::size_t i = 0; i < lf.rows; ++i)
          floors[arch][lf.strings.at("mode")[i]] = lf.reals.at("median_us")[i];
    }
    if (r.has_group("finalize_repeat")) {
      auto const rep = read_rows(r, "finalize_repeat", arch);
      repeats[arch].insert(repeats[arch].end(), rep.begin(), rep.end());
    }
    if (std::find(archs.begin(), archs.end(), arch) == archs.end())
      archs.push_back(arch);
  }
  if (rows.empty()) {
    std::string names;
    for (auto const& f : files)
      names += (names.empty() ? "" : ", ") + f;
    throw FileError(names, "no /finalize_sweep rows to tabulate");
  }
  Index idx;
  for (auto const& r : rows)
    idx.by_key[Index::key(r.arch, r.mode, r.l2, r.variant, r.shape())] = &r;
  Published const pub = read_published(published_csv);
  for (auto const& mode : present_modes(rows, kModes))
    mode_table(os, rows, idx, archs, mode, mode == "a" ? &pub : nullptr);
  // The same table on the released kernels (modes a and b), the published columns beside.
  for (auto const& mode : present_modes(rows, kPdlModes))
    mode_table(os, rows, idx, archs, mode, mode == "a" ? &pub : nullptr, "fi_small_batch");
  t1_table(os, rows, archs);
  ablation_tables(os, rows, archs);
  v2_tables(os, rows, idx, archs, floors);
  for (auto const& mode : present_modes(rows, kPdlModes))
    v2_seed_table(os, rows, idx, archs, mode, mode == "a" ? &pub : nullptr);
  faithfulness_tables(os, rows, idx, archs);
  for (auto const& a : archs)
    repeat_spread(os, a, rows, repeats[a]);
  return os.str();
}

} // namespace moefin::fin
