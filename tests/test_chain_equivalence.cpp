// The layer chain end to end on a small shape (gpu label): PDL on and off bitwise equal for the
// race-free presets, the output within tolerance of the Kokkos reference, the benchmark race
// visible, replays deterministic, and stamps in the order the knobs ask for.
#include "tests/gpu_main.hpp"

#include "core/fp4.hpp"
#include "core/ops/errors.hpp"
#include "core/rng.hpp"
#include "experiments/chain/reference_chain.hpp"
#include "experiments/chain/run.hpp"
#include "kernels/chain/chain.hpp"
#include "kernels/common/cuda_check.hpp"
#include "reference/kokkos_env.hpp"

using namespace moefin;
using namespace moefin::chain;

namespace {

struct Kokkos {
  reference::KokkosSession session;
};
BOOST_TEST_GLOBAL_FIXTURE(Kokkos);

LayerShape small_shape() {
  return parse_shape("H512/I256/E32/top-6");
}

std::vector<std::uint64_t> seeds_for(LayerShape const& s, std::int64_t T, int n, int offset = 0) {
  std::vector<std::uint64_t> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = routing_seed(2026, s, T, offset + i);
  return v;
}

chain_run::Series series(ChainRunner& r, ChainConfig const& cfg) {
  chain_run::Series s;
  auto const off = r.run_batch(cfg, false);
  auto const on = r.run_batch(cfg, true);
  chain_run::add_batch(s, on, off, r.routings());
  return s;
}

} // namespace

BOOST_AUTO_TEST_CASE(race_free_presets_are_bitwise_equal_with_and_without_pdl) {
  LayerShape const s = small_shape();
  LayerWeights const w(s, 7);
  for (std::int64_t T : {1, 4, 17}) {
    RunnerOptions o;
    o.tokens = T;
    o.iterations = 64;
    ChainRunner r(w, o);
    r.set_routings(seeds_for(s, T, 64));
    for (Preset p : {Preset::kSeedBefore, Preset::kSeedAfter, Preset::kSafe}) {
      for (std::int64_t delay : {0, 25000}) {
        ChainConfig cfg = preset_config(p);
        cfg.at(Kernel::kRouting).delay_ns = delay;
        auto const x = series(r, cfg);
        BOOST_TEST(x.mismatches == 0, preset_name(p) << " T=" << T << " delay " << delay
                                                     << ": first buffer " << x.first_buffer);
        BOOST_TEST(x.stale == 0, preset_name(p) << " T=" << T);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(output_matches_the_kokkos_reference) {
  for (std::string name : {"H512/I256/E32/top-6", "H256/I128/E40/top-8/relu2"}) {
    LayerShape const s = parse_shape(name);
    LayerWeights const w(s, 8);
    for (std::int64_t T : {1, 5, 20}) {
      RunnerOptions o;
      o.tokens = T;
      o.iterations = 3;
      o.hidden_seed = 9;
      ChainRunner r(w, o);
      r.set_routings(seeds_for(s, T, 3));
      ChainConfig const cfg = preset_config(Preset::kSeedAfter);
      r.run_batch(cfg, true);
      auto const bytes = r.download(Buffer::kOut);
      auto const ref =
          chain_run::reference_output(r.plan(cfg), w, T, r.routings().back(), r.hidden_states());
      double const err = chain_run::max_rel_err(
          reinterpret_cast<std::uint16_t const*>(bytes.data()), ref.data(), ref.size());
      BOOST_TEST(err <= 1e-2, name << " T=" << T << ": max error " << err << " of the peak");
    }
  }
}

namespace {

/// The race benchmark cell (permute, GEMM1, activation and GEMM2 triggering at entry, 25 us in
/// routing between its trigger and its writes, finalize reading metadata before its wait) on
/// `w`: at least half of 100 iterations mismatch and read stale metadata; with the metadata read
/// after the wait, none mismatches.
void check_benchmark_cell(LayerShape const& s, LayerWeights const& w) {
  RunnerOptions o;
  o.tokens = 4;
  o.iterations = 100;
  // Every kernel of the chain resident at once, and no SM left in a carveout that keeps
  // finalize (shared memory) off it: only then do the entry triggers let finalize start early.
  o.ctas_per_sm = 1;
  o.max_shared_carveout = true;
  ChainRunner r(w, o);
  r.set_routings(seeds_for(s, 4, 100));
  ChainConfig cfg = preset_config(Preset::kSeedAfter);
  for (Kernel k : kBetweenKernels)
    cfg.at(k).trigger = Trigger::kEntry;
  cfg.at(Kernel::kRouting).delay_ns = 25000;
  auto const x = series(r, cfg);
  BOOST_TEST_MESSAGE(s.name << " " << w.flavour().kernels[2].name << ": benchmark cell "
                            << x.mismatches << "/100 mismatches, " << x.stale_iterations
                            << " iterations with stale reads");
  BOOST_TEST(x.mismatches >= 50, s.name << ": " << x.mismatches << "/100 mismatches");
  BOOST_TEST(x.stale_iterations >= 50, s.name << ": " << x.stale_iterations << "/100 stale");
  BOOST_TEST(x.first_buffer == static_cast<int>(Buffer::kOut),
             s.name << ": first mismatching buffer " << x.first_buffer);
  // The same cell with metadata read after the wait is race-free.
  cfg.metadata_before_wait = false;
  BOOST_TEST(series(r, cfg).mismatches == 0, s.name);
}

} // namespace

BOOST_AUTO_TEST_CASE(benchmark_cell_makes_the_race_visible) {
  LayerShape const s = small_shape();
  LayerWeights const w(s, 7);
  check_benchmark_cell(s, w);
}

BOOST_AUTO_TEST_CASE(benchmark_cell_makes_the_race_visible_on_fp4_weights) {
  // `moefin race --weights-format fp4`'s cell: the seed's top-8 shape on 4-bit weights, whose
  // one-CTA GEMM kernels must leave room for the rest of the chain (with 158 registers a thread
  // GEMM2 waited for permute to end, and the cell read 0/200 on an H100:
  // studies/one_cta_register_cap/).
  LayerShape const s = parse_shape("top-8");
  LayerWeights const w(s, 7, "fp4");
  check_benchmark_cell(s, w);
}

BOOST_AUTO_TEST_CASE(same_routings_give_the_same_hashes_and_new_routings_change_them) {
  LayerShape const s = small_shape();
  LayerWeights const w(s, 7);
  RunnerOptions o;
  o.tokens = 4;
  o.iterations = 8;
  ChainRunner r(w, o);
  r.set_routings(seeds_for(s, 4, 8));
  ChainConfig const cfg = preset_config(Preset::kSafe);
  auto const a = r.run_batch(cfg, false);
  auto const b = r.run_batch(cfg, false);
  BOOST_TEST(a.slots == b.slots, boost::test_tools::per_element());
  for (int it = 1; it < 8; ++it) // consecutive iterations have different routings
    BOOST_TEST(a.slot(it, Buffer::kExpandedToPermuted) !=
               a.slot(it - 1, Buffer::kExpandedToPermuted));
  r.set_routings(seeds_for(s, 4, 8, 8));
  auto const c = r.run_batch(cfg, false);
  BOOST_TEST(c.slot(0, Buffer::kOut) != a.slot(0, Buffer::kOut));
  auto const rep = chain_run::replay(w, o, cfg, seeds_for(s, 4, 1)[0], 2);
  BOOST_TEST(!rep.reproduced, rep.detail);
}

namespace {

// Every kernel stamped, each CTA's events in order, and the trigger stamp where the knob puts it
// (-1 for kExit: the stamps were poisoned before the replay).
void check_stamps(Timeline const& t, ChainConfig const& cfg) {
  BOOST_TEST(t.kernels.size() == 6u);
  std::vector<int> ctas(6, 0);
  for (std::size_t i = 0; i < t.kernel.size(); ++i) {
    int const k = static_cast<int>(t.kernel[i]);
    ++ctas[static_cast<std::size_t>(k)];
    BOOST_TEST(t.start_ns[i] <= t.wait_ns[i]);
    BOOST_TEST(t.wait_ns[i] <= t.end_ns[i]);
    Trigger const trig = cfg.trigger(static_cast<Kernel>(k));
    if (trig == Trigger::kExit)
      BOOST_TEST(t.trigger_ns[i] == -1, t.kernels[static_cast<std::size_t>(k)]);
    else if (trig == Trigger::kEntry)
      BOOST_TEST(t.trigger_ns[i] <= t.wait_ns[i]);
    else if (trig == Trigger::kAfterWait || trig == Trigger::kAfterWrites)
      BOOST_TEST(t.trigger_ns[i] >= t.wait_ns[i]);
  }
  for (int k = 0; k < 6; ++k)
    BOOST_TEST(ctas[static_cast<std::size_t>(k)] > 0, t.kernels[static_cast<std::size_t>(k)]);
}

} // namespace

BOOST_AUTO_TEST_CASE(stamps_follow_the_trigger_placements) {
  LayerShape const s = small_shape();
  LayerWeights const w(s, 7);
  RunnerOptions o;
  o.tokens = 4;
  o.iterations = 2;
  o.stamps = true;
  ChainRunner r(w, o);
  r.set_routings(seeds_for(s, 4, 2));
  ChainConfig cfg = preset_config(Preset::kSeedAfter);
  cfg.at(Kernel::kGemm1).trigger = Trigger::kAfterWrites;
  r.run_batch(cfg, true);
  check_stamps(r.timeline(), cfg);
  // The timing graph's stamped replay, after a checked one that stamped every trigger.
  ChainConfig const early = preset_config(Preset::kAllEarly);
  r.run_batch(early, true);
  ChainConfig const after = preset_config(Preset::kSeedAfter);
  check_stamps(r.stamp_layers(after, true), after);
}

BOOST_AUTO_TEST_CASE(fp4_chain_with_tiled_scales_gives_the_row_major_bits_and_the_reference) {
  // The decode-fp4 chain reads its scales in 16 x 128 tiles and its values as packed words in
  // warp-stage tiles by default (LayerWeights' layouts, decode_gemm_tiles_kernel, launched wide);
  // row-major packed values take the wide or the wpack kernel, the same weights with nibbles the
  // tiled-scale kernel (decode_gemm_tscale_kernel), and with row-major scales the row-major one.
  // Every buffer of every layer must hash the same, PDL on and off, and the output stay within
  // the reference's tolerance.
  LayerShape const s = small_shape();
  LayerWeights const tiled(s, 12, "fp4", fp4::ScaleLayout::kTiled, fp4::ValueLayout::kNibbles);
  LayerWeights const rowmajor(s, 12, "fp4", fp4::ScaleLayout::kRowMajor);
  LayerWeights const packed(s, 12, "fp4", fp4::ScaleLayout::kTiled, fp4::ValueLayout::kPacked);
  LayerWeights const tiles(s, 12, "fp4"); // the default layouts
  BOOST_TEST_REQUIRE((tiles.value_layout() == fp4::ValueLayout::kTiles));
  BOOST_TEST_REQUIRE((tiles.scale_layout() == fp4::ScaleLayout::kTiled));
  BOOST_TEST_REQUIRE((tiled.scale_layout() == fp4::ScaleLayout::kTiled));
  BOOST_TEST_REQUIRE((rowmajor.scale_layout() == fp4::ScaleLayout::kRowMajor));
  BOOST_TEST_REQUIRE((packed.scale_layout() == fp4::ScaleLayout::kTiled));
  BOOST_TEST_REQUIRE((tiled.value_layout() == fp4::ValueLayout::kNibbles));
  BOOST_TEST_REQUIRE((rowmajor.value_layout() == fp4::ValueLayout::kNibbles));
  BOOST_TEST_REQUIRE((packed.value_layout() == fp4::ValueLayout::kPacked));
  for (fp4::ValueLayout vl : {fp4::ValueLayout::kPacked, fp4::ValueLayout::kTiles})
    BOOST_CHECK_THROW(LayerWeights(s, 12, "fp4", fp4::ScaleLayout::kRowMajor, vl), InputError);
  // download() gives the row-major scales whatever the layout (the reference reads them); the
  // GEMMs' copy holds the same bytes where fp4::scale_offset puts them, in another order.
  for (int g : {1, 2}) {
    auto const rm = rowmajor.download(g, 0).scales; // expert 0: the first rows and tiles
    BOOST_TEST_REQUIRE((tiled.download(g, 0).scales == rm));
    std::int64_t const k = g == 1 ? s.hidden : s.inter;
    std::vector<std::uint8_t> dev(rm.size());
    MOEFIN_CUDA_CHECK(cudaMemcpy(dev.data(), tiled.scales(g), dev.size(), cudaMemcpyDeviceToHost));
    BOOST_TEST((dev != rm));
    std::int64_t const row_blocks = k / fp4::kBlock;
    for (std::size_t b = 0; b < rm.size(); ++b)
      BOOST_REQUIRE_EQUAL(dev[static_cast<std::size_t>(fp4::scale_offset(
                              fp4::ScaleLayout::kTiled, static_cast<std::int64_t>(b) / row_blocks,
                              static_cast<std::int64_t>(b) % row_blocks, k))],
                          rm[b]);
    // The packed copy of the values: each word of download()'s nibbles, bit-permuted.
    auto const nib = packed.download(g, 0).values;
    BOOST_TEST_REQUIRE((nib == tiled.download(g, 0).values));
    std::vector<std::uint8_t> words(nib.size()), want(nib.size());
    MOEFIN_CUDA_CHECK(cudaMemcpy(words.data(), g == 1 ? packed.w1() : packed.w2(), words.size(),
                                 cudaMemcpyDeviceToHost));
    fp4::pack_words(nib.data(), want.data(), want.size());
    BOOST_REQUIRE((words == want));
    // The tiled copy: those words with their chunks in warp-stage tiles (expert 0's rows are
    // the first bands).
    std::vector<std::uint8_t> tiled_words(nib.size()), want_tiles(nib.size());
    MOEFIN_CUDA_CHECK(cudaMemcpy(tiled_words.data(), g == 1 ? tiles.w1() : tiles.w2(),
                                 tiled_words.size(), cudaMemcpyDeviceToHost));
    fp4::tile_chunks(want.data(), want_tiles.data(), static_cast<std::int64_t>(nib.size()) * 2 / k,
                     k);
    BOOST_REQUIRE((tiled_words == want_tiles));
  }
  for (std::int64_t tile_m : {8, 16})
    for (std::int64_t T : {1, 4, 16}) {
      RunnerOptions o;
      o.tokens = T;
      o.tile_m = tile_m;
      o.iterations = 8;
      o.hidden_seed = 5;
      // c: packed values, GEMMs launched wide by the rule (fp4::chain_wide_gemms).
      // The packed chain launched single and wide (RunnerOptions::wide_gemms) at one CTA per SM
      // (tile 16) and two (tile 8): the wide kernel's 3- and 2-stage pipelines, each against the
      // other at the same residency (the split, so the sum order, follows the grid); and the
      // chain's default, tiled values, at that residency with the launch left to the rule (wide:
      // the only launch that reads them, refused otherwise).
      RunnerOptions single = o;
      single.ctas_per_sm = tile_m == 8 ? 2 : 0;
      single.wide_gemms = false;
      RunnerOptions wide = single;
      wide.wide_gemms = true;
      RunnerOptions by_rule = single;
      by_rule.wide_gemms.reset();
      ChainRunner a(tiled, o), b(rowmajor, o), c(packed, o), c2(packed, single), w(packed, wide),
          t(tiles, by_rule);
      t.set_routings(seeds_for(s, T, 8));
      c2.set_routings(seeds_for(s, T, 8));
      a.set_routings(seeds_for(s, T, 8));
      b.set_routings(seeds_for(s, T, 8));
      c.set_routings(seeds_for(s, T, 8));
      w.set_routings(seeds_for(s, T, 8));
      for (Preset p : {Preset::kSeedAfter, Preset::kSafe})
        for (bool pdl : {false, true}) {
          ChainConfig const cfg = preset_config(p);
          auto const x = a.run_batch(cfg, pdl);
          auto const y = b.run_batch(cfg, pdl);
          auto const z = c.run_batch(cfg, pdl);
          auto const v = w.run_batch(cfg, pdl);
          auto const v0 = c2.run_batch(cfg, pdl);
          auto const vt = t.run_batch(cfg, pdl);
          BOOST_TEST(x.slots == y.slots, preset_name(p)
                                             << " T=" << T << " tile " << tile_m << " pdl " << pdl);
          BOOST_TEST(z.slots == y.slots, "packed values, " << preset_name(p) << " T=" << T
                                                           << " tile " << tile_m << " pdl " << pdl);
          BOOST_TEST(v.slots == v0.slots, "packed values, wide GEMMs, "
                                              << preset_name(p) << " T=" << T << " tile " << tile_m
                                              << " pdl " << pdl);
          BOOST_TEST(vt.slots == v0.slots, "tiled values, wide GEMMs, "
                                               << preset_name(p) << " T=" << T << " tile " << tile_m
                                               << " pdl " << pdl);
        }
      ChainConfig const cfg = preset_config(Preset::kSeedAfter);
      a.run_batch(cfg, true);
      auto const bytes = a.download(Buffer::kOut);
      auto const ref = chain_run::reference_output(a.plan(cfg), tiled, T, a.routings().back(),
                                                   a.hidden_states());
      double const err = chain_run::max_rel_err(
          reinterpret_cast<std::uint16_t const*>(bytes.data()), ref.data(), ref.size());
      BOOST_TEST(err <= 1e-2, "fp4 T=" << T << " tile " << tile_m << ": max error " << err);
    }
}
