// The split-K decode GEMM (bf16 and fp4 weights), the device fp4 generator and the decode
// routing kernel against their references and host twins (gpu label).
#include "tests/gpu_main.hpp"

#include "core/bf16.hpp"
#include "core/chain/shape.hpp"
#include "core/fp4.hpp"
#include "core/ops/errors.hpp"
#include "core/rng.hpp"
#include "experiments/gemm/decode_problem.hpp"
#include "experiments/routing/arrays.hpp"
#include "kernels/gemm/decode.hpp"
#include "kernels/gemm/gemm.hpp"
#include "kernels/routing/fast_routing.hpp"
#include "kernels/routing/routing.hpp"
#include "reference/decode_gemm.hpp"
#include "reference/kokkos_env.hpp"
#include "reference/routing.hpp"
#include "tests/chain_device.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>

using namespace moefin;
using gemm::WeightFormat;
using test::DeviceBuffer;

namespace {

struct Kokkos {
  reference::KokkosSession session;
};
BOOST_TEST_GLOBAL_FIXTURE(Kokkos);

/// Runs `p` and returns the output, poisoned before the launch.
std::vector<std::uint16_t> run_on(gemm::DecodeGemmParams const& p, gemm::Variant v,
                                  gemm::DecodeOptions const& o, DeviceBuffer& c) {
  c.poison();
  gemm::run_decode(p, v, o, nullptr);
  MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
  return c.download<std::uint16_t>();
}

/// The bits of one bf16 of a poisoned DeviceBuffer (0xff bytes), which a kernel never writes;
/// not kBf16Poison, the host references' poison.
constexpr std::uint16_t kDevicePoison = 0xffff;

gemm::DecodeOptions plain(int split_k = 0) {
  gemm::DecodeOptions o;
  o.pdl.pdl = false;
  o.split_k = split_k;
  return o;
}

} // namespace

BOOST_AUTO_TEST_CASE(the_device_quantizer_writes_the_host_twins_bits) {
  for (auto [experts, n, k] : {std::tuple<int, int, int>{3, 64, 512}, {2, 1024, 6144}}) {
    std::uint64_t const seed = 1000 + static_cast<std::uint64_t>(k);
    decode_bench::ExpertWeights const w(WeightFormat::kFp4, experts, n, k, seed);
    std::vector<std::int32_t> all;
    for (int e = 0; e < experts; ++e)
      all.push_back(e);
    decode_bench::HostWeights const h = w.download(all);
    float const scale = 1.0f / std::sqrt(static_cast<float>(k));
    float const g = fp4::global_scale(scale);
    for (float got : h.global)
      BOOST_REQUIRE_EQUAL(got, g);
    std::int64_t const blocks = static_cast<std::int64_t>(experts) * n * k / fp4::kBlock;
    // Every block of the small tensor, 20000 random ones of the large.
    Rng rng(seed);
    std::int64_t const checks = blocks <= 20000 ? blocks : 20000;
    for (std::int64_t i = 0; i < checks; ++i) {
      std::uint64_t const b = blocks <= 20000 ? static_cast<std::uint64_t>(i)
                                              : rng.below(static_cast<std::uint64_t>(blocks));
      std::uint8_t v[8], s = 0;
      fp4::quantize_block(seed, b, scale, g, v, &s);
      BOOST_REQUIRE_EQUAL(s, h.scales[b]);
      BOOST_REQUIRE(std::memcmp(v, h.values.data() + b * 8, 8) == 0);
    }
    // The tiled copy of the scales holds the same bytes where fp4::scale_offset puts them.
    std::vector<std::uint8_t> tiled(h.scales.size());
    MOEFIN_CUDA_CHECK(cudaMemcpy(tiled.data(), w.scales(fp4::ScaleLayout::kTiled), tiled.size(),
                                 cudaMemcpyDeviceToHost));
    // The packed copy of the values holds each word of the nibbles bit-permuted.
    std::vector<std::uint8_t> packed(h.values.size()), want(h.values.size());
    MOEFIN_CUDA_CHECK(cudaMemcpy(packed.data(), w.values(fp4::ValueLayout::kPacked), packed.size(),
                                 cudaMemcpyDeviceToHost));
    fp4::pack_words(h.values.data(), want.data(), want.size());
    BOOST_REQUIRE((packed == want));
    // The tiled copy holds those packed words with each 16-byte chunk where kTiles puts it.
    std::vector<std::uint8_t> tiles(h.values.size()), want_tiles(h.values.size());
    MOEFIN_CUDA_CHECK(cudaMemcpy(tiles.data(), w.values(fp4::ValueLayout::kTiles), tiles.size(),
                                 cudaMemcpyDeviceToHost));
    fp4::tile_chunks(want.data(), want_tiles.data(), static_cast<std::int64_t>(want.size()) * 2 / k,
                     k);
    BOOST_REQUIRE((tiles == want_tiles));
    std::int64_t const row_blocks = k / fp4::kBlock;
    for (std::int64_t b = 0; b < blocks; ++b)
      BOOST_REQUIRE_EQUAL(tiled[static_cast<std::size_t>(fp4::scale_offset(
                              fp4::ScaleLayout::kTiled, b / row_blocks, b % row_blocks, k))],
                          h.scales[static_cast<std::size_t>(b)]);
  }
}

BOOST_AUTO_TEST_CASE(splitk_dequantizes_every_code_and_scale_byte_exactly) {
  // One expert, one tile of 16 real rows; row r of a is one-hot at k = i_r, so output (r, j) is
  // bf16(g * e2m1 * e4m3) of weight (j, i_r): the dequantization is exact, so the comparison is.
  // Code 8 (e2m1 -0) is the one exception: the dot product adds +0 products to it, and IEEE
  // gives +0 + -0 = +0, so a zero weight is compared as a zero of either sign.
  std::int64_t const n = 256, k = 4096;
  std::vector<std::uint8_t> values(static_cast<std::size_t>(n * k / 2)),
      scales(static_cast<std::size_t>(n * k / 16));
  auto code_of = [&](std::int64_t j, std::int64_t i) {
    return static_cast<unsigned>((j + 3 * i) % 16);
  };
  auto scale_of = [&](std::int64_t j, std::int64_t b) {
    return static_cast<std::uint8_t>((j * 7 + b * 3) % 127); // every finite positive byte
  };
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < k; i += 2)
      values[static_cast<std::size_t>((j * k + i) / 2)] =
          static_cast<std::uint8_t>(code_of(j, i) | (code_of(j, i + 1) << 4));
  std::vector<std::uint8_t> tiled(scales.size());
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t b = 0; b < k / 16; ++b) {
      scales[static_cast<std::size_t>(j * (k / 16) + b)] = scale_of(j, b);
      tiled[static_cast<std::size_t>(fp4::scale_offset(fp4::ScaleLayout::kTiled, j, b, k))] =
          scale_of(j, b);
    }
  std::vector<float> const global{0.375f};
  std::vector<std::int32_t> const cta{0}, total{16};
  std::vector<std::int32_t> row_token(16);
  for (int r = 0; r < 16; ++r)
    row_token[static_cast<std::size_t>(r)] = r;
  std::vector<std::uint8_t> packed(values.size()), tiles(values.size());
  fp4::pack_words(values.data(), packed.data(), packed.size());
  fp4::tile_chunks(packed.data(), tiles.data(), n, k);
  DeviceBuffer d_v(values), d_vp(packed), d_vt(tiles), d_s(scales), d_st(tiled), d_g(global),
      d_cta(cta), d_total(total), d_rt(row_token);
  DeviceBuffer a(static_cast<std::size_t>(16 * k * 2)), c(static_cast<std::size_t>(16 * n * 2));
  gemm::DecodeGemmParams p;
  p.format = WeightFormat::kFp4;
  p.gemm.a = a.get();
  p.gemm.b = d_v.get();
  p.gemm.c = c.get();
  p.gemm.cta_to_expert = d_cta.as<std::int32_t>();
  p.gemm.total_padded_rows = d_total.as<std::int32_t>();
  p.gemm.row_token = d_rt.as<std::int32_t>();
  p.gemm.max_rows = 16;
  p.gemm.n = n;
  p.gemm.k = k;
  p.gemm.ldc = n;
  p.gemm.tile_m = 16;
  p.gemm.num_local_experts = 1;
  p.scales = d_s.as<std::uint8_t>();
  p.global_scale = d_g.as<float>();
  std::set<std::pair<unsigned, unsigned>> covered;
  for (std::int64_t round = 0; round < 16; ++round) {
    std::vector<std::uint16_t> host_a(static_cast<std::size_t>(16 * k), 0);
    std::int64_t idx[16];
    for (int r = 0; r < 16; ++r) {
      idx[r] = (round * 16 + r) * 16 + (r * 5 + round) % 16; // every block, every place in it
      host_a[static_cast<std::size_t>(r * k + idx[r])] = float_to_bf16(1.0f);
    }
    MOEFIN_CUDA_CHECK(
        cudaMemcpy(a.get(), host_a.data(), host_a.size() * 2, cudaMemcpyHostToDevice));
    for (int run = 0; run < 16; ++run) {
      int const ks = run % 2 ? 8 : 1;
      bool const tiled_scales = run >= 2;  // both scale layouts (fp4::ScaleLayout)
      bool const packed_values = run >= 6; // every value layout (fp4::ValueLayout)
      bool const tiled_values = run >= 12;
      gemm::DecodeGemmParams q = p;
      if (tiled_scales) {
        q.scales = d_st.as<std::uint8_t>();
        q.scale_layout = fp4::ScaleLayout::kTiled;
      }
      if (packed_values) {
        q.gemm.b = tiled_values ? d_vt.get() : d_vp.get();
        q.value_layout = tiled_values ? fp4::ValueLayout::kTiles : fp4::ValueLayout::kPacked;
      }
      gemm::DecodeOptions o = plain(ks);
      o.lean = run >= 14 || (run >= 8 && run < 12) || (run >= 4 && run < 6);
      o.wide = run >= 10; // two warp-stages a stage (the packed-value kernels' wide launch)
      auto const out = run_on(q, gemm::Variant::kSplitK, o, c);
      for (int r = 0; r < 16; ++r)
        for (std::int64_t j = 0; j < n; ++j) {
          unsigned const code = code_of(j, idx[r]);
          std::uint8_t const s = scale_of(j, idx[r] / 16);
          float const want = fp4::dequantized(code, s) * global[0];
          std::uint16_t const got = out[static_cast<std::size_t>(r * n + j)];
          bool const same = want == 0.0f ? (got & 0x7fffu) == 0 : got == float_to_bf16(want);
          BOOST_REQUIRE_MESSAGE(same, "code " << code << " scale byte " << int(s) << " ks " << ks
                                              << " tiled scales " << tiled_scales << " packed "
                                              << packed_values << " tiles " << tiled_values
                                              << " lean " << o.lean << " wide " << o.wide
                                              << ": got bf16 bits " << got);
          covered.insert({code, s});
        }
    }
  }
  BOOST_TEST(covered.size() == 16u * 127u);
}

namespace {

/// Every variant that takes `f` against the reference on one routed layout; returns the output
/// of the default split.
std::vector<std::uint16_t> check_layout(WeightFormat f, std::int64_t T, std::int64_t E,
                                        std::int64_t K, std::int64_t tile, std::int64_t n,
                                        std::int64_t k, std::uint64_t seed) {
  std::vector<std::uint16_t> first;
  BOOST_TEST_CONTEXT(gemm::weight_format_name(f) << " T=" << T << " E=" << E << " K=" << K
                                                 << " tile=" << tile << " n=" << n << " k=" << k) {
    decode_bench::ExpertWeights const w(f, E, n, k, seed);
    decode_bench::RoutedLayout const l(T, E, K, tile, seed + 1);
    auto const a_host = decode_bench::random_activations(l, k, seed + 2);
    DeviceBuffer a(a_host), c(static_cast<std::size_t>(l.max_rows * n * 2));
    auto const p = decode_bench::params(w, l, a.get(), c.get(), n);
    auto const oracle = decode_bench::oracle(w, l, a_host);
    std::int64_t const steps = k / gemm::DecodePolicy::step_k(f);
    for (int ks : {0, 1, 2, 4, 8}) {
      if (ks > 0 && steps % ks != 0)
        continue;
      for (bool pre : {false, true}) {
        gemm::DecodeOptions o = plain(ks);
        o.weights_before_wait = pre;
        auto const out = run_on(p, gemm::Variant::kSplitK, o, c);
        reference::GemmCheck const r = reference::check_gemm(out, n, n, oracle);
        BOOST_TEST(r.pass, "splitk ks=" << ks << " pre=" << pre << ": max err " << r.max_err
                                        << " tolerance " << r.tolerance << " at " << r.worst);
        BOOST_TEST(r.checked > 0);
        // Padding rows and rows past the total are never written.
        for (std::int64_t row = 0; row < l.max_rows; ++row)
          if (row >= l.total[0] || l.row_token[static_cast<std::size_t>(row)] < 0)
            for (std::int64_t j = 0; j < n; ++j)
              BOOST_REQUIRE_EQUAL(out[static_cast<std::size_t>(row * n + j)], kDevicePoison);
        // The candidates of sweep gemm (kernels/gemm/decode_candidates.hpp) compute every unit
        // the same way: two CTAs per SM at a forced split and the deep fp4 pipeline give the
        // same bits.
        if (ks > 0) {
          gemm::DecodeOptions two = o;
          two.pdl.ctas_per_sm = 2;
          BOOST_TEST(run_on(p, gemm::Variant::kSplitK, two, c) == out,
                     "two CTAs per SM, ks=" << ks << " pre=" << pre);
        }
        // The tiled scale layout (the tscale candidate, its own kernel) and packed values beside
        // it (wpack, its own kernel too) give the same bits, with and without the lean loads.
        if (f == WeightFormat::kFp4)
          for (fp4::ValueLayout vl :
               {fp4::ValueLayout::kNibbles, fp4::ValueLayout::kPacked, fp4::ValueLayout::kTiles}) {
            std::string const what = std::string("tiled scales, values ") +
                                     fp4::value_layout_name(vl) + ", ks=" + std::to_string(ks) +
                                     " pre=" + std::to_string(pre);
            auto const pt =
                decode_bench::params(w, l, a.get(), c.get(), n, fp4::ScaleLayout::kTiled, vl);
            // Tiled values are read by the wide launch only (below).
            if (vl != fp4::ValueLayout::kTiles) {
              BOOST_TEST(run_on(pt, gemm::Variant::kSplitK, o, c) == out, what);
              gemm::DecodeOptions lean = o;
              lean.lean = true;
              BOOST_TEST(run_on(pt, gemm::Variant::kSplitK, lean, c) == out,
                         what << ", lean loads");
            }
            if (ks > 0 && vl != fp4::ValueLayout::kTiles) {
              gemm::DecodeOptions two = o;
              two.pdl.ctas_per_sm = 2;
              BOOST_TEST(run_on(pt, gemm::Variant::kSplitK, two, c) == out,
                         what << ", two CTAs per SM");
            }
            // Two warp-stages a stage (wide): the same split, so the same bits, a k slice of an
            // odd number of warp-stages included (k 1280 at ks 2, 1024 at ks 8); on tiled
            // values too (their own kernel).
            if (fp4::packed_words(vl))
              for (bool lean_loads : {false, true}) {
                gemm::DecodeOptions wide = o;
                wide.wide = true;
                wide.lean = lean_loads;
                BOOST_TEST(run_on(pt, gemm::Variant::kSplitK, wide, c) == out,
                           what << ", wide, lean " << lean_loads);
                wide.pdl.ctas_per_sm = 2;
                if (ks > 0)
                  BOOST_TEST(run_on(pt, gemm::Variant::kSplitK, wide, c) == out,
                             what << ", wide, lean " << lean_loads << ", two CTAs per SM");
              }
          }
        if (f == WeightFormat::kFp4 && tile == 16) {
          gemm::DecodeOptions deep = o;
          deep.deep = true;
          BOOST_TEST(run_on(p, gemm::Variant::kSplitK, deep, c) == out,
                     "deep, ks=" << ks << " pre=" << pre);
        }
        if (first.empty())
          first = out;
        else if (ks == 0)
          BOOST_TEST(out == first, "same bits with and without the pre-wait weights");
      }
    }
    // The tiled GEMM beside it where its limits allow (tile 16, n a multiple of its 64-column
    // tile); an n only the split-K kernel takes (a partial unit of weight rows) must be refused.
    if (f == WeightFormat::kBf16 && tile == 16) {
      if (n % gemm::Policy::kTileN == 0) {
        auto const out = run_on(p, gemm::Variant::kTiled, plain(), c);
        reference::GemmCheck const r = reference::check_gemm(out, n, n, oracle);
        BOOST_TEST(r.pass, "tiled: max err " << r.max_err << " tolerance " << r.tolerance);
      } else {
        BOOST_CHECK_THROW(gemm::validate(p, gemm::Variant::kTiled, plain()), InputError);
      }
    }
  }
  return first;
}

} // namespace

BOOST_AUTO_TEST_CASE(splitk_matches_the_reference_on_routed_layouts) {
  for (WeightFormat f : {WeightFormat::kBf16, WeightFormat::kFp4})
    for (std::int64_t tile : {8, 16}) {
      check_layout(f, 1, 32, 8, tile, 512, 1024, 1);
      check_layout(f, 5, 16, 6, tile, 256, 512, 2);
      // Experts with more than one tile (the layout check_layout builds from seed 3 + 1), and
      // an n that leaves the last unit of weight rows partial.
      decode_bench::RoutedLayout const multi(40, 8, 4, tile, 4);
      bool repeated = false;
      for (std::int64_t t = 1; t < multi.tiles(); ++t)
        repeated = repeated || (multi.cta[static_cast<std::size_t>(t)] >= 0 &&
                                multi.cta[static_cast<std::size_t>(t)] ==
                                    multi.cta[static_cast<std::size_t>(t - 1)]);
      BOOST_TEST(repeated, "tile " << tile << ": no expert spans two tiles");
      check_layout(f, 40, 8, 4, tile, 96, 1280, 3);
      check_layout(f, 64, 64, 8, tile, 1024, 256, 4);
    }
}

BOOST_AUTO_TEST_CASE(a_splitk_grid_smaller_than_the_wave_keeps_the_bits) {
  // The layer chain launches each decode GEMM on half the SMs at one CTA per SM
  // (gemm::chain_grid); the split stays the wave's, so the output must not change.
  for (WeightFormat f : {WeightFormat::kBf16, WeightFormat::kFp4}) {
    decode_bench::ExpertWeights const w(f, 8, 1024, 1024, 21);
    decode_bench::RoutedLayout const l(4, 8, 8, 16, 22);
    auto const a_host = decode_bench::random_activations(l, 1024, 23);
    DeviceBuffer a(a_host), c(static_cast<std::size_t>(l.max_rows * 1024 * 2));
    auto const p = decode_bench::params(w, l, a.get(), c.get(), 1024);
    auto const full = run_on(p, gemm::Variant::kSplitK, plain(), c);
    BOOST_TEST(reference::check_gemm(full, 1024, 1024, decode_bench::oracle(w, l, a_host)).pass);
    std::int64_t const wave = gemm::num_ctas(p, gemm::Variant::kSplitK);
    for (std::int64_t g :
         {std::int64_t{1}, std::int64_t{7}, gemm::chain_grid(static_cast<int>(wave), 1)}) {
      gemm::DecodeOptions o = plain();
      o.grid_ctas = g;
      BOOST_TEST(run_on(p, gemm::Variant::kSplitK, o, c) == full, "grid " << g << " of " << wave);
    }
    gemm::DecodeOptions o = plain();
    o.grid_ctas = wave + 1;
    BOOST_CHECK_THROW(gemm::run_decode(p, gemm::Variant::kSplitK, o, nullptr), InputError);
  }
}

BOOST_AUTO_TEST_CASE(splitk_skips_tiles_of_no_expert_and_is_deterministic_under_every_pdl_knob) {
  for (WeightFormat f : {WeightFormat::kBf16, WeightFormat::kFp4}) {
    decode_bench::ExpertWeights const w(f, 16, 256, 1024, 7);
    decode_bench::RoutedLayout l(6, 16, 4, 16, 8);
    l.cta[1] = -1; // the second tile belongs to no (local) expert
    l.d_cta.upload(l.cta);
    auto const a_host = decode_bench::random_activations(l, 1024, 9);
    DeviceBuffer a(a_host), c(static_cast<std::size_t>(l.max_rows * 256 * 2));
    auto const p = decode_bench::params(w, l, a.get(), c.get(), 256);
    auto const oracle = decode_bench::oracle(w, l, a_host);
    auto const ref = run_on(p, gemm::Variant::kSplitK, plain(), c);
    BOOST_TEST(reference::check_gemm(ref, 256, 256, oracle).pass);
    for (std::int64_t row = 16; row < 32; ++row)
      for (std::int64_t j = 0; j < 256; ++j)
        BOOST_REQUIRE_EQUAL(ref[static_cast<std::size_t>(row * 256 + j)], kDevicePoison);
    for (Trigger t :
         {Trigger::kDefault, Trigger::kEntry, Trigger::kAfterWait, Trigger::kAfterWrites})
      for (bool pdl : {false, true}) {
        gemm::DecodeOptions o;
        o.pdl.pdl = pdl;
        o.pdl.trigger = t;
        o.pdl.delay_ns = 3000;
        o.pdl.max_shared_carveout = pdl;
        DeviceBuffer stamps(static_cast<std::size_t>(gemm::num_ctas(p, gemm::Variant::kSplitK)) *
                            32);
        o.pdl.stamps = stamps.as<std::int64_t>();
        // fp4 nine times: scales row-major, then tiled, then tiled with lean loads, then the
        // same two with packed values, then those two wide, then wide on tiled values (the
        // tscale, wpack, wide and tiles kernels take every knob too).
        for (int run = 0; run < 9; ++run) {
          fp4::ScaleLayout const sl =
              run == 0 ? fp4::ScaleLayout::kRowMajor : fp4::ScaleLayout::kTiled;
          fp4::ValueLayout const vl = run >= 7   ? fp4::ValueLayout::kTiles
                                      : run >= 3 ? fp4::ValueLayout::kPacked
                                                 : fp4::ValueLayout::kNibbles;
          if (run > 0 && f != WeightFormat::kFp4)
            continue;
          stamps.poison();
          auto const q = decode_bench::params(w, l, a.get(), c.get(), 256, sl, vl);
          o.lean = run == 2 || run == 4 || run == 6 || run == 8;
          o.wide = run >= 5;
          auto const out = run_on(q, gemm::Variant::kSplitK, o, c);
          BOOST_TEST(out == ref, "trigger " << trigger_name(t) << " pdl " << pdl << " scales "
                                            << fp4::scale_layout_name(sl) << " values "
                                            << fp4::value_layout_name(vl) << " lean " << o.lean
                                            << " wide " << o.wide);
          auto const st = stamps.download<std::int64_t>();
          for (std::size_t i = 0; i < st.size(); i += 4) {
            BOOST_REQUIRE(st[i] > 0 && st[i + 1] >= st[i] && st[i + 3] >= st[i + 1]);
            BOOST_REQUIRE(st[i + 3] - st[i + 1] >= 3000); // the delay before the first write
            BOOST_REQUIRE((st[i + 2] > 0) == (t != Trigger::kDefault && t != Trigger::kExit));
          }
        }
      }
  }
}

namespace {

void check_fast_routing(std::int64_t T, std::int64_t E, std::int64_t K, std::int64_t tile,
                        std::int64_t begin, std::int64_t local, routing::Method method,
                        bool renormalize, finalize::WeightType wt,
                        std::vector<float> const& scores) {
  BOOST_TEST_CONTEXT("T=" << T << " E=" << E << " K=" << K << " tile=" << tile << " local=["
                          << begin << "," << begin + local
                          << ") method=" << static_cast<int>(method) << " renorm=" << renormalize
                          << " fp32=" << (wt == finalize::WeightType::kFp32)) {
    routing::RoutingParams shape = routing_arrays::shape(T, E, K, tile, begin, local);
    shape.method = method;
    shape.renormalize = renormalize;
    shape.weight_type = wt;
    BOOST_REQUIRE(routing::fast_supports(shape));
    routing_arrays::HostRouting ref(shape, scores.data());
    reference::routing(ref.p);
    DeviceBuffer d_scores(scores);
    routing_arrays::DeviceRouting block(shape), fast(shape);
    block.p.scores = fast.p.scores = d_scores.as<float>();
    block.poison(nullptr);
    fast.poison(nullptr);
    PdlKnobs knobs;
    knobs.pdl = false;
    routing::run(block.p, knobs, nullptr);
    routing::run_fast(fast.p, knobs, nullptr);
    MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
    auto const b = block.arrays(), f = fast.arrays();
    char const* names[] = {"expert_ids",           "expanded_to_permuted", "permuted_to_token",
                           "permuted_to_expanded", "expert_counts",        "expert_offsets",
                           "cta_to_expert",        "total_padded_rows"};
    auto const want = ref.arrays();
    for (std::size_t i = 0; i < b.size(); ++i) {
      BOOST_TEST(f[i] == b[i], names[i] << " bitwise as the block kernel's");
      BOOST_TEST(f[i] == want[i], names[i] << " as the reference's");
    }
    BOOST_TEST(fast.weight_bytes() == block.weight_bytes(),
               "weights bitwise as the block kernel's");
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(fast_routing_is_bitwise_the_block_kernel_and_its_layout_the_reference) {
  using M = routing::Method;
  using W = finalize::WeightType;
  struct Case {
    std::int64_t T, E, K, tile, begin, local;
  };
  Case const cases[] = {
      {1, 256, 8, 16, 0, 256},   {1, 512, 22, 16, 0, 512},  {1, 896, 16, 16, 0, 896},
      {2, 8, 1, 1, 0, 8},        {7, 64, 6, 8, 16, 24},     {16, 1024, 32, 128, 0, 1024},
      {16, 896, 16, 16, 0, 896}, {32, 512, 22, 16, 0, 512}, {5, 100, 7, 4, 3, 90}};
  std::uint64_t seed = 21;
  for (Case const& c : cases) {
    auto const scores = chain::router_scores(seed++, c.T, c.E);
    check_fast_routing(c.T, c.E, c.K, c.tile, c.begin, c.local, M::kSoftmaxTopK, true, W::kBf16,
                       scores);
    check_fast_routing(c.T, c.E, c.K, c.tile, c.begin, c.local, M::kSoftmaxTopK, false, W::kFp32,
                       scores);
    check_fast_routing(c.T, c.E, c.K, c.tile, c.begin, c.local, M::kTopKSoftmax, false, W::kBf16,
                       scores);
  }
  // Ties: every score equal (and -0 beside +0) picks the lowest experts, in id order.
  std::vector<float> flat(static_cast<std::size_t>(9 * 64), 0.5f);
  check_fast_routing(9, 64, 6, 16, 0, 64, M::kSoftmaxTopK, true, W::kBf16, flat);
  std::vector<float> zeros(static_cast<std::size_t>(3 * 40), 0.0f);
  for (std::size_t i = 0; i < zeros.size(); i += 3)
    zeros[i] = -0.0f;
  check_fast_routing(3, 40, 5, 16, 0, 40, M::kSoftmaxTopK, true, W::kBf16, zeros);
  // Few distinct scores: ties inside a lane (experts lane + 32 j) and across lanes at every
  // pass, for each width of the lane's key tree (E = 32 .. 1024).
  for (std::int64_t E : {32, 64, 128, 256, 512, 1024}) {
    std::vector<float> coarse(static_cast<std::size_t>(4 * E));
    for (std::size_t i = 0; i < coarse.size(); ++i)
      coarse[i] = 0.25f * static_cast<float>((i * 7 + i / 5) % 6) - 0.5f;
    // Six distinct scores: from 8 keys a lane (E >= 256) every token's warp holds one twice
    // and takes the general selection (the host twin of the kernel's test says so).
    if (E >= 256)
      for (std::int64_t t = 0; t < 4; ++t)
        BOOST_TEST(!routing::fast_selection_is_sorted(coarse.data() + t * E, E), "E " << E);
    check_fast_routing(4, E, std::min<std::int64_t>(E, 22), 16, 0, E, M::kSoftmaxTopK, false,
                       W::kFp32, coarse);
    check_fast_routing(4, E, std::min<std::int64_t>(E, 8), 16, 0, E, M::kTopKSoftmax, false,
                       W::kBf16, coarse);
  }
  // Distinct scores inside every lane but equal across lanes (expert lane + 32 j scores by j,
  // some lanes by j and lane / 8): the sorted-list selection's tie between lane heads at every
  // pass, and its id lookup after the passes.
  for (std::int64_t E : {64, 256, 512, 896}) {
    std::vector<float> lanes(static_cast<std::size_t>(2 * E));
    for (std::size_t i = 0; i < lanes.size(); ++i) {
      auto const x = static_cast<std::int64_t>(i) % E;
      lanes[i] =
          0.125f * static_cast<float>(x / 32) +
          (i < static_cast<std::size_t>(E) ? 0.0f : 0.03125f * static_cast<float>(x % 32 / 8));
    }
    // Every warp takes the sorted lists (the kernel's test, by its host twin), so the ties
    // are the sorted selection's.
    for (std::int64_t t = 0; t < 2; ++t)
      BOOST_TEST(routing::fast_selection_is_sorted(lanes.data() + t * E, E), "E " << E);
    check_fast_routing(2, E, std::min<std::int64_t>(E, 22), 16, 0, E, M::kSoftmaxTopK, true,
                       W::kBf16, lanes);
    check_fast_routing(2, E, std::min<std::int64_t>(E, 16), 8, 0, E, M::kTopKSoftmax, false,
                       W::kFp32, lanes);
  }
}

BOOST_AUTO_TEST_CASE(fast_routing_gives_the_same_arrays_under_every_pdl_knob) {
  routing::RoutingParams const shape = routing_arrays::shape(4, 256, 8, 16, 0, 256);
  auto const scores = chain::router_scores(77, 4, 256);
  DeviceBuffer d_scores(scores);
  // Both runs start from the same poison (the bf16 weights fill half of their buffer, so an
  // unpoisoned baseline compares leftover bytes), complete before the launch: a PDL launch may
  // start before the stream's preceding work, and the poison is not what is compared here.
  routing_arrays::DeviceRouting first(shape);
  first.p.scores = d_scores.as<float>();
  first.poison(nullptr);
  MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
  PdlKnobs knobs;
  knobs.pdl = false;
  routing::run_fast(first.p, knobs, nullptr);
  MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
  auto const want = first.arrays();
  auto const want_w = first.weight_bytes();
  for (Trigger t :
       {Trigger::kDefault, Trigger::kEntry, Trigger::kAfterWait, Trigger::kAfterWrites}) {
    routing_arrays::DeviceRouting r(shape);
    r.p.scores = d_scores.as<float>();
    r.poison(nullptr);
    MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
    DeviceBuffer stamps(32);
    PdlKnobs k;
    k.pdl = true;
    k.trigger = t;
    k.delay_ns = 2000;
    k.stamps = stamps.as<std::int64_t>();
    routing::run_fast(r.p, k, nullptr);
    MOEFIN_CUDA_CHECK(cudaDeviceSynchronize());
    auto const got = r.arrays();
    for (std::size_t a = 0; a < got.size(); ++a)
      for (std::size_t i = 0; i < got[a].size(); ++i)
        if (got[a][i] != want[a][i]) {
          BOOST_ERROR("trigger " << trigger_name(t) << ": array " << a << " (ids, e2p, p2t, p2e, "
                                 << "counts, offsets, cta, total) differs first at " << i << ": "
                                 << got[a][i] << " vs " << want[a][i]);
          break;
        }
    BOOST_TEST(r.weight_bytes() == want_w, "trigger " << trigger_name(t));
    auto const st = stamps.download<std::int64_t>();
    BOOST_TEST(st[3] - st[1] >= 2000);
  }
}
