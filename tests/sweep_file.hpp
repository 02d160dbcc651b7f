#pragma once
// Synthetic /finalize_sweep files for the table tests: rows of made-up times and speedups in the
// schema the sweep writes (experiments/report/finalize_tables.hpp).

#include "core/store/h5store.hpp"
#include "experiments/finalize/grid.hpp"
#include "experiments/report/finalize_tables.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace moefin::test {

/// The provenance a sweep of today writes: mode b with the PDL-waiting producer. `producer` ""
/// leaves the attribute out, as files before it (their mode b is tabulated as b0).
inline h5::Provenance provenance(std::string const& gpu, std::string const& arch,
                                 std::string const& producer = "pdl-wait") {
  auto p = h5::collect_provenance(1);
  p["gpu_name"] = gpu;
  p["arch"] = arch;
  if (!producer.empty())
    p["mode_b_producer"] = producer;
  return p;
}

struct RowSpec {
  std::int64_t h, t, k;
  std::string mode, variant, dispatch;
  double median_us, speedup;
};

inline void write_sweep(std::string const& path, h5::Provenance const& prov,
                        std::vector<RowSpec> const& rows, std::vector<RowSpec> const& repeat = {}) {
  auto file = h5::ResultWriter::create(path, prov);
  for (auto const* group : {"finalize_sweep", "finalize_repeat"}) {
    auto const& list = std::string(group) == "finalize_sweep" ? rows : repeat;
    if (list.empty())
      continue;
    auto table = file.table(group, fin::finalize_sweep_columns());
    for (auto const& r : list) {
      h5::Row row;
      row.set("H", r.h).set("T", r.t).set("K", r.k).set("weights", "bf16").set("mode", r.mode);
      row.set("l2", "hot").set("variant", r.variant).set("dispatch", r.dispatch);
      row.set("dispatch_device", r.dispatch).set("in_regime", 1).set("median_us", r.median_us);
      row.set("min_us", r.median_us).set("q1_us", r.median_us).set("q3_us", r.median_us);
      row.set("max_us", r.median_us).set("rounds", 5).set("launches", 100);
      row.set("speedup_vs_scalar", r.speedup).set("speedup_lo", r.speedup);
      row.set("speedup_hi", r.speedup).set("bytes", std::int64_t(1000)).set("gbps", 1.0);
      double const none = std::numeric_limits<double>::quiet_NaN();
      row.set("ablation_ratio", none).set("ablation_lo", none).set("ablation_hi", none);
      row.set("copy_fraction", 0.001).set("ctas", std::int64_t(16));
      fin::Shape const s{r.h, r.t, r.k, finalize::WeightType::kBf16};
      table.append(fin::shape_key(s) + ",mode=" + r.mode + ",l2=hot,variant=" + r.variant, row,
                   {r.median_us, r.median_us, r.median_us});
    }
  }
}

} // namespace moefin::test
