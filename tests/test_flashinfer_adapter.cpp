// The adapter to the released FlashInfer finalize kernels, host side (no GPU): moefin's
// FinalizeParams as the released finalize::Data and as the KernelParams each kernel receives,
// the released geometry of every kernel, the released selection rule, and the shapes the
// released kernels cannot run. Without the released kernels in the build it reports itself
// skipped with the reason (exit 77).

#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include "kernels/external/flashinfer/flashinfer.hpp"

#include <cstdio>

#if MOEFIN_FLASHINFER_BUILT
#include "core/ops/errors.hpp"
#include "core/ops/finalize_variants.hpp"
#include "kernels/external/flashinfer/flashinfer_data.hpp"

#include <cstdint>
#include <string>

using namespace moefin;
using finalize::FinalizeParams;
using finalize::WeightType;
namespace fi = moefin::external::flashinfer;
namespace tg = batchedGemm::trtllm::gen;

namespace {

/// Distinct 256-byte aligned addresses: never dereferenced, only compared.
template <class T> T* fake(std::uintptr_t slot) {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(0x100000) + slot * 0x1000);
}

FinalizeParams shape(std::int64_t h, std::int64_t t, std::int64_t k,
                     WeightType w = WeightType::kBf16, std::int64_t hp = 0) {
  FinalizeParams p;
  p.gemm_out = fake<void const>(1);
  p.expert_weights = w == WeightType::kNone ? nullptr : fake<void const>(2);
  p.expanded_to_permuted = fake<std::int32_t const>(3);
  p.out = fake<void>(4);
  p.in_scales = fake<float const>(5);
  p.out_scales = fake<float>(6);
  p.num_tokens = t;
  p.hidden = h;
  p.hidden_padded = hp ? hp : h;
  p.top_k = k;
  p.num_rows = t * k + 8 * k;
  p.weight_type = w;
  return p;
}

bool throws_naming(FinalizeParams const& p, fi::Kernel k, std::string const& what) {
  try {
    fi::plan(p, k);
  } catch (InputError const& e) {
    std::string const msg = e.what();
    BOOST_TEST_MESSAGE(msg);
    return msg.find(fi::kernel_name(k)) != std::string::npos &&
           msg.find(what) != std::string::npos && msg.find('\n') == std::string::npos;
  }
  return false;
}

} // namespace

BOOST_AUTO_TEST_CASE(finalize_data_maps_every_field) {
  for (WeightType w : {WeightType::kBf16, WeightType::kFp32, WeightType::kNone}) {
    for (bool pdl : {true, false}) {
      BOOST_TEST_CONTEXT("weights " << static_cast<int>(w) << " pdl " << pdl) {
        FinalizeParams const p = shape(7168, 3, 22, w, 7296);
        moe::dev::finalize::Data const d = fi::finalize_data(p, pdl, nullptr);
        BOOST_TEST((d.mDtypeElt == tg::Dtype::Bfloat16));
        BOOST_TEST(
            (d.mDtypeExpW == (w == WeightType::kFp32 ? tg::Dtype::Fp32 : tg::Dtype::Bfloat16)));
        BOOST_TEST(d.mUsePdl == pdl);
        BOOST_TEST(!d.mUseDeepSeekFp8);
        BOOST_TEST(d.inPtr == p.gemm_out);
        BOOST_TEST(d.inPtr2 == nullptr);
        BOOST_TEST(d.outPtr == p.out);
        BOOST_TEST(d.expertWeightsPtr == p.expert_weights);
        BOOST_TEST(d.expandedIdxToPermutedIdx == p.expanded_to_permuted);
        BOOST_TEST(d.inDqSfsPtr == nullptr);
        BOOST_TEST(d.outDqSfsPtr == nullptr);
        BOOST_TEST(d.totalNumPaddedTokens == nullptr);
        BOOST_TEST(d.numTokens == 3);
        BOOST_TEST(d.topK == 22);
        BOOST_TEST(d.hiddenDim == 7168);
        BOOST_TEST(d.hiddenDimPadded == 7296);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(kernel_params_hold_what_the_kernels_read) {
  FinalizeParams const p = shape(4096, 5, 8, WeightType::kFp32, 4160);
  auto const d = fi::finalize_data(p, true, nullptr);
  using P = moe::dev::finalize::KernelParams<cutlass::bfloat16_t, float, 4, false, true>;
  P const k = P::setKernelParams(d);
  BOOST_TEST(static_cast<void const*>(k.inPtr) == p.gemm_out);
  BOOST_TEST(static_cast<void const*>(k.inPtr2) == nullptr);
  BOOST_TEST(static_cast<void const*>(k.expertWeightsPtr) == p.expert_weights);
  BOOST_TEST(static_cast<void*>(k.outPtr) == p.out);
  BOOST_TEST(k.expandedIdxToPermutedIdx == p.expanded_to_permuted);
  BOOST_TEST(k.hiddenDim == 4096);
  BOOST_TEST(k.hiddenDimPadded == 4160);
  BOOST_TEST(k.numTokens == 5);
  BOOST_TEST(k.topK == 8);
  BOOST_TEST(P::UsePdl);
  BOOST_TEST(!P::UseSecondInput);
}

BOOST_AUTO_TEST_CASE(deepseek_data_points_at_the_released_layouts) {
  FinalizeParams const p = shape(7168, 2, 8, WeightType::kFp32);
  fi::DeepseekScales const s{fake<std::int32_t const>(7), fake<float const>(8), fake<float>(9)};
  auto const d = fi::finalize_data(p, false, &s);
  BOOST_TEST(d.mUseDeepSeekFp8);
  BOOST_TEST(!d.mUsePdl);
  BOOST_TEST(d.totalNumPaddedTokens == s.total_padded_rows);
  BOOST_TEST(d.inDqSfsPtr == s.in_by_block);
  BOOST_TEST(d.outDqSfsPtr == s.out_by_block);
  // moefin's own row-major scales are not what the released kernel indexes.
  BOOST_TEST(static_cast<void const*>(d.inDqSfsPtr) != static_cast<void const*>(p.in_scales));
}

BOOST_AUTO_TEST_CASE(released_geometry_of_each_kernel) {
  // finalizeKernel: ceil(H/256) x min(8192, T) CTAs of 256 threads.
  auto lp = fi::plan(shape(2880, 9000, 6), fi::Kernel::kScalar);
  BOOST_TEST(lp.grid_x == 12);
  BOOST_TEST(lp.grid_y == 8192);
  BOOST_TEST(lp.block_x == 256);
  BOOST_TEST(lp.block_y == 1);
  BOOST_TEST(lp.unroll == 2);
  // finalizeKernelVecLoad: one CTA of 256 threads per token.
  lp = fi::plan(shape(4096, 300, 8), fi::Kernel::kVecload);
  BOOST_TEST(lp.grid_x == 300);
  BOOST_TEST(lp.grid_y == 1);
  BOOST_TEST(lp.block_x == 256);
  BOOST_TEST(lp.unroll == 4);
  // finalizeKernelSmallBatch: kSplit = smallest power of two with 4 * kSplit >= K,
  // 256 / kSplit vectors of 8 bf16 per CTA, grid (T, slices).
  struct SmallBatchCase {
    std::int64_t h, t, k;
    int split, vecs, slices;
  };
  for (SmallBatchCase const c :
       {SmallBatchCase{4096, 1, 8, 2, 128, 4}, SmallBatchCase{7168, 3, 22, 8, 32, 28},
        SmallBatchCase{1024, 7, 64, 16, 16, 8}, SmallBatchCase{5120, 2, 5, 2, 128, 5},
        SmallBatchCase{2880, 1, 4, 1, 256, 2}, SmallBatchCase{2048, 9, 32, 8, 32, 8}}) {
    BOOST_TEST_CONTEXT("H=" << c.h << " T=" << c.t << " K=" << c.k) {
      lp = fi::plan(shape(c.h, c.t, c.k), fi::Kernel::kSmallBatch);
      BOOST_TEST(lp.k_split == c.split);
      BOOST_TEST(lp.block_y == c.split);
      BOOST_TEST(lp.block_x == c.vecs);
      BOOST_TEST(lp.block_x * lp.block_y == 256);
      BOOST_TEST(lp.grid_x == c.t);
      BOOST_TEST(lp.grid_y == c.slices);
    }
  }
  // finalizeDeepSeekKernel: one CTA of 128 threads per (128-column block, token).
  lp = fi::plan(shape(7168, 2, 8, WeightType::kFp32), fi::Kernel::kDeepseekFp8);
  BOOST_TEST(lp.grid_x == 56);
  BOOST_TEST(lp.grid_y == 2);
  BOOST_TEST(lp.block_x == 128);
}

BOOST_AUTO_TEST_CASE(dispatch_follows_the_released_rule) {
  struct DispatchCase {
    std::int64_t h, t, k, hp;
    fi::Kernel want;
  };
  for (DispatchCase const c :
       {DispatchCase{4096, 1, 8, 0, fi::Kernel::kSmallBatch},
        DispatchCase{4096, 1, 4, 0, fi::Kernel::kScalar},      // K <= 4 keeps the scalar kernel
        DispatchCase{7168, 42, 8, 0, fi::Kernel::kSmallBatch}, // 28 x 42 = 1176 < 1184
        DispatchCase{7168, 43, 8, 0, fi::Kernel::kVecload},    // 28 x 43 = 1204
        DispatchCase{1002, 9000, 8, 0, fi::Kernel::kScalar},   // unaligned rows: scalar always
        DispatchCase{4096, 2, 8, 4100, fi::Kernel::kScalar},   // unaligned stride too
        DispatchCase{1024, 3, 65, 0, fi::Kernel::kScalar},     // K > 64: never small batch
        DispatchCase{1024, 295, 2, 0, fi::Kernel::kScalar},    // 4 x 295 = 1180
        DispatchCase{1024, 296, 2, 0, fi::Kernel::kVecload},
        DispatchCase{1024, 9000, 64, 0, fi::Kernel::kVecload}}) {
    BOOST_TEST_CONTEXT("H=" << c.h << " T=" << c.t << " K=" << c.k << " Hp=" << c.hp) {
      auto const lp =
          fi::plan(shape(c.h, c.t, c.k, WeightType::kBf16, c.hp), fi::Kernel::kDispatch);
      BOOST_TEST(fi::kernel_name(lp.kernel) == fi::kernel_name(c.want));
      BOOST_TEST((lp.requested == fi::Kernel::kDispatch));
    }
  }
  BOOST_TEST(throws_naming(shape(1024, 9000, 65), fi::Kernel::kDispatch, "top_k <= 64"));
}

BOOST_AUTO_TEST_CASE(unsupported_shapes_are_one_line_errors) {
  BOOST_TEST(throws_naming(shape(1002, 4, 8), fi::Kernel::kVecload, "multiples of 8"));
  BOOST_TEST(throws_naming(shape(1024, 4, 8, WeightType::kBf16, 1030), fi::Kernel::kSmallBatch,
                           "multiples of 8"));
  BOOST_TEST(throws_naming(shape(1024, 4, 65), fi::Kernel::kSmallBatch, "top_k <= 64"));
  BOOST_TEST(throws_naming(shape(2880, 4, 8), fi::Kernel::kDeepseekFp8, "multiple of 128"));
  BOOST_TEST(throws_naming(shape(1024, 4, 8, WeightType::kNone), fi::Kernel::kDeepseekFp8,
                           "weights none"));
  FinalizeParams big = shape(7168, 4, 8);
  big.num_rows = 400000; // 400000 x 7168 > 2^31
  BOOST_TEST(throws_naming(big, fi::Kernel::kScalar, "below 2^31"));
  FinalizeParams null_out = shape(1024, 1, 8);
  null_out.out = nullptr;
  BOOST_TEST(throws_naming(null_out, fi::Kernel::kSmallBatch, "null"));
}

routing::RoutingParams routing_shape(std::int64_t t, std::int64_t e, std::int64_t k,
                                     std::int64_t tile) {
  routing::RoutingParams p;
  p.scores = fake<float const>(10);
  p.expert_weights = fake<void>(11);
  p.expanded_to_permuted = fake<std::int32_t>(12);
  p.permuted_to_token = fake<std::int32_t>(13);
  p.permuted_to_expanded = fake<std::int32_t>(14);
  p.cta_to_expert = fake<std::int32_t>(15);
  p.total_padded_rows = fake<std::int32_t>(16);
  p.expert_ids = fake<std::int32_t>(17);
  p.expert_counts = fake<std::int32_t>(18);
  p.expert_offsets = fake<std::int32_t>(19);
  p.num_tokens = t;
  p.num_experts = e;
  p.top_k = k;
  p.tile = tile;
  p.local_expert_begin = e / 4;
  p.num_local_experts = e / 2;
  p.max_padded_rows = t * k + e * tile;
  return p;
}

BOOST_AUTO_TEST_CASE(routing_data_maps_every_field) {
  namespace rt = moe::dev::routing;
  fi::RoutingExtras const x{fake<std::int32_t>(20), fake<std::int32_t>(21)};
  auto p = routing_shape(3, 512, 22, 128);
  auto d = fi::routing_data(p, x, true);
  BOOST_TEST(d.mUsePdl);
  BOOST_TEST((d.mDtypeInput == tg::Dtype::Fp32));
  BOOST_TEST((d.mDtypeOutput == tg::Dtype::Bfloat16));
  // softmax -> top-K -> renormalize is the released Renormalize (top-K -> softmax).
  BOOST_TEST((d.mPreprocessType == rt::RoutingPreprocessType::None));
  BOOST_TEST((d.mPostprocessType == rt::RoutingPostprocessType::Softmax));
  BOOST_TEST(d.mPtrScores == p.scores);
  BOOST_TEST(d.mPtrTopKWeights == p.expert_weights);
  BOOST_TEST(d.mPtrExpandedIdxToPermutedIdx == p.expanded_to_permuted);
  BOOST_TEST(d.mPtrPermutedIdxToTokenIdx == p.permuted_to_token);
  BOOST_TEST(d.mPtrPermutedIdxToExpandedIdx == p.permuted_to_expanded);
  BOOST_TEST(d.mPtrCtaIdxXyToBatchIdx == p.cta_to_expert);
  BOOST_TEST(d.mPtrPermutedIdxSize == p.total_padded_rows);
  BOOST_TEST(d.mPtrCtaIdxXyToMnLimit == x.tile_row_limit);
  BOOST_TEST(d.mPtrNumNonExitingCtas == x.num_tiles);
  BOOST_TEST(d.mPtrTopKIds == nullptr);
  BOOST_TEST(d.mPtrTopKPacked == nullptr);
  BOOST_TEST(d.mPtrExpertCounts == nullptr);
  BOOST_TEST(d.mNumTokens == 3);
  BOOST_TEST(d.mNumExperts == 512);
  BOOST_TEST(d.mTopK == 22);
  BOOST_TEST(d.mTileTokensDim == 128);
  BOOST_TEST(d.mPaddingLog2 == 7);
  BOOST_TEST(d.mLocalExpertsStartIdx == 128);
  BOOST_TEST(d.mNumLocalExperts == 256);
  BOOST_TEST(d.mLocalExpertsStrideLog2 == 0);
  p.tile = 24; // not a power of two: the released runner's log2 gives -1
  p.weight_type = WeightType::kFp32;
  p.renormalize = false; // softmax over all experts, then top-K: the released Default
  d = fi::routing_data(p, x, false);
  BOOST_TEST(d.mPaddingLog2 == -1);
  BOOST_TEST((d.mDtypeOutput == tg::Dtype::Fp32));
  BOOST_TEST((d.mPreprocessType == rt::RoutingPreprocessType::Softmax));
  BOOST_TEST((d.mPostprocessType == rt::RoutingPostprocessType::None));
  p.method = routing::Method::kTopKSoftmax;
  d = fi::routing_data(p, x, false);
  BOOST_TEST((d.mPostprocessType == rt::RoutingPostprocessType::Softmax));
}

BOOST_AUTO_TEST_CASE(routing_kernel_choice_and_limits) {
  BOOST_TEST((fi::routing_kernel(routing_shape(1, 256, 8, 16)) == fi::RoutingKernel::kBlock));
  BOOST_TEST((fi::routing_kernel(routing_shape(4, 896, 16, 16)) == fi::RoutingKernel::kBlock));
  BOOST_TEST((fi::routing_kernel(routing_shape(5, 512, 22, 16)) == fi::RoutingKernel::kDynBlock));
  BOOST_TEST((fi::routing_kernel(routing_shape(16, 256, 8, 16)) == fi::RoutingKernel::kDynBlock));
  auto refused = [](routing::RoutingParams const& p, std::string const& what) {
    try {
      fi::routing_kernel(p);
    } catch (InputError const& e) {
      BOOST_TEST_MESSAGE(e.what());
      return std::string(e.what()).find(what) != std::string::npos;
    }
    return false;
  };
  BOOST_TEST(refused(routing_shape(17, 256, 8, 16), "16 tokens"));
  BOOST_TEST(refused(routing_shape(5, 896, 16, 16), "512"));
  BOOST_TEST(refused(routing_shape(1, 64, 33, 16), "min(32, experts)"));
  auto none = routing_shape(1, 64, 8, 16);
  none.weight_type = WeightType::kNone;
  BOOST_TEST(refused(none, "weights none"));
}

BOOST_AUTO_TEST_CASE(permute_and_activation_data_map_every_field) {
  permute::PermuteParams pp;
  pp.hidden_states = fake<void const>(30);
  pp.permuted = fake<void>(31);
  pp.total_padded_rows = fake<std::int32_t const>(32);
  pp.num_tokens = 7;
  pp.hidden = 2048;
  pp.max_rows = 512;
  auto const* e2p = fake<std::int32_t const>(33);
  auto const pd = fi::permute_data(pp, e2p, 6, true);
  BOOST_TEST(pd.inPtr == pp.hidden_states);
  BOOST_TEST(pd.outPtr == pp.permuted);
  BOOST_TEST(pd.expandedIdxToPermutedIdx == e2p);
  BOOST_TEST(pd.totalNumPaddedTokens == pp.total_padded_rows);
  BOOST_TEST(pd.hiddenDim == 2048);
  BOOST_TEST(pd.numTokens == 7);
  BOOST_TEST(pd.topK == 6);
  BOOST_TEST(pd.mUsePdl);
  BOOST_TEST(!pd.mUseDeepSeekFp8);
  BOOST_TEST((pd.mDtypeElt == tg::Dtype::Bfloat16));
  activation::ActivationParams ap;
  ap.in = fake<void const>(34);
  ap.out = fake<void>(35);
  ap.total_padded_rows = fake<std::int32_t const>(36);
  ap.max_rows = 512;
  ap.inter = 1280;
  auto const ad = fi::activation_data(ap, e2p, 9, 22, false);
  BOOST_TEST(ad.inPtr == ap.in);
  BOOST_TEST(ad.outPtr == ap.out);
  BOOST_TEST(ad.innerDim == 2560);
  BOOST_TEST(ad.numTokens == 9);
  BOOST_TEST(ad.topK == 22);
  BOOST_TEST(ad.expandedIdxToPermutedIdx == e2p);
  BOOST_TEST(!ad.mUsePdl);
  BOOST_TEST(ad.gatedActAlphaPtr == nullptr);
  BOOST_TEST(ad.gatedActBetaPtr == nullptr);
  BOOST_TEST(ad.gatedActClampLimitPtr == nullptr);
}

BOOST_AUTO_TEST_CASE(names_round_trip) {
  for (int i = 0; i < fi::kNumKernels; ++i) {
    auto const k = static_cast<fi::Kernel>(i);
    fi::Kernel back{};
    BOOST_TEST(fi::parse_kernel(fi::kernel_name(k), &back));
    BOOST_TEST((back == k));
  }
  fi::Kernel unused{};
  BOOST_TEST(!fi::parse_kernel("small_batch", &unused));
}

BOOST_AUTO_TEST_CASE(registry_entries_run_the_released_kernels) {
  // The released kernels as finalize variants: role, baseline (the released previous kernel),
  // lists, PDL fields as the released code behaves, and the released geometry.
  struct Entry {
    fi::Kernel kernel;
    finalize::Role role;
    std::string baseline;
    unsigned lists;
    Trigger trigger;
    bool meta_before;
  };
  unsigned const both = finalize::kListCheck | finalize::kListSweep;
  for (Entry const& e :
       {Entry{fi::Kernel::kScalar, finalize::Role::kPrevious, "", both, Trigger::kExit, false},
        Entry{fi::Kernel::kSmallBatch, finalize::Role::kSmallBatch, "fi_scalar", both,
              Trigger::kEntry, true},
        Entry{fi::Kernel::kVecload, finalize::Role::kLargeBatch, "fi_scalar", both, Trigger::kExit,
              true},
        Entry{fi::Kernel::kDispatch, finalize::Role::kDispatch, "fi_scalar", finalize::kListCheck,
              Trigger::kEntry, true}}) {
    BOOST_TEST_CONTEXT(fi::kernel_name(e.kernel)) {
      auto const* v = finalize::find_variant(fi::kernel_name(e.kernel));
      BOOST_TEST_REQUIRE(v != nullptr);
      BOOST_TEST((v->source == finalize::Source::kReleased));
      BOOST_TEST((v->role == e.role));
      BOOST_TEST(v->baseline == e.baseline);
      BOOST_TEST(v->lists == e.lists);
      BOOST_TEST(!v->dispatchable); // moefin's rule never picks a released kernel
      BOOST_TEST(v->order > 100);
      BOOST_TEST((v->default_trigger == e.trigger));
      BOOST_TEST(v->meta_before_wait == e.meta_before);
      BOOST_TEST(v->launch != nullptr);
      for (auto const& p : {shape(4096, 1, 8), shape(7168, 3, 22, WeightType::kFp32),
                            shape(2048, 300, 4, WeightType::kNone)}) {
        auto const want = fi::plan(p, e.kernel);
        auto const got = v->geometry(p, finalize::Options{}, *v);
        BOOST_TEST(got.grid_x == want.grid_x);
        BOOST_TEST(got.grid_y == want.grid_y);
        BOOST_TEST(got.block_x == want.block_x);
        BOOST_TEST(got.block_y == want.block_y);
        BOOST_TEST(got.loads_per_thread >= 1);
        BOOST_TEST(got.loads_per_thread <= 4);
      }
    }
  }
  BOOST_TEST(finalize::find_variant("fi_deepseek_fp8") == nullptr);
  auto const& sb = finalize::variant("fi_small_batch", "test");
  BOOST_TEST(sb.geometry(shape(7168, 3, 22), finalize::Options{}, sb).loads_per_thread ==
             3); // K = 22 over 8 thread groups
}

BOOST_AUTO_TEST_CASE(registry_entries_refuse_knobs_the_released_kernels_lack) {
  auto const& sb = finalize::variant("fi_small_batch", "test");
  auto const& sc = finalize::variant("fi_scalar", "test");
  auto const p = shape(4096, 1, 8);
  auto refused = [&](finalize::FinalizeVariant const& v, finalize::Options const& o,
                     std::string const& what) {
    try {
      v.geometry(p, o, v);
    } catch (InputError const& e) {
      std::string const msg = e.what();
      BOOST_TEST_MESSAGE(msg);
      return msg.find(v.name) != std::string::npos && msg.find(what) != std::string::npos;
    }
    return false;
  };
  finalize::Options o;
  o.pdl.trigger = Trigger::kExit;
  BOOST_TEST(refused(sb, o, "triggers where the released code does"));
  o.pdl.trigger = Trigger::kEntry; // its own placement, asked for by name
  BOOST_TEST(sb.geometry(p, o, sb).grid_x == 1);
  BOOST_TEST(refused(sc, o, "triggers where the released code does"));
  o = {};
  o.metadata_before_wait = false;
  BOOST_TEST(refused(sb, o, "before its wait"));
  BOOST_TEST(sc.geometry(p, o, sc).grid_x == 16); // reads them after its wait anyway
  o = {};
  o.pdl.delay_ns = 25000;
  BOOST_TEST(refused(sc, o, "delay"));
  o = {};
  std::int32_t snapshot = 0;
  o.pre_wait_snapshot = &snapshot;
  BOOST_TEST(refused(sb, o, "snapshot"));
  o = {};
  o.slice_chunks = 16;
  BOOST_TEST(refused(sb, o, "slice"));
}
#endif // MOEFIN_FLASHINFER_BUILT

bool init_unit_test() {
  return true;
}

int main(int argc, char* argv[]) {
  if (!moefin::external::flashinfer::available()) {
    std::printf("SKIPPED: %s\n", moefin::external::flashinfer::unavailable_reason().c_str());
    return 77;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
