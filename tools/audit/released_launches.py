#!/usr/bin/env python3
"""The launches file of the released NVFP4 MoE flow, and the GEMM cubins grouped by block size.

Reads flashinferMetaInfo.h of flashinfer-cubin (each tactic's kernel name and threads per CTA)
and lists the batched-GEMM cubins. Writes:
  --groups FILE: one line per block size, "THREADS cubin cubin ...", every NVFP4 cubin (E2m1 in
                 the name; the few the meta info does not list get THREADS 0: thread paths only);
  --out FILE:    the launches file (moefin audit --chain): routing -> GEMM1 -> GEMM2 -> finalize
                 as the released host code launches them (see the file's "source"), every
                 sm_100f NVFP4 tactic of each GEMM an alternative of its launch.
"""
import argparse
import json
import os
import re
import sys

# Renormalize routing (top-K, then softmax over the K) of float scores, 256 experts, top 8: the
# one-CTA block kernel of the small-batch regime.
ROUTING = ("moe::dev::routing::routingCustom::routingIndicesBlockKernel<moe::dev::routing::"
           "routingCustom::KernelParams<float, __nv_bfloat16, 256, 8, "
           "moe::dev::routing::TopKExpertSelect<moe::dev::routing::NoOpPreprocess, "
           "moe::dev::routing::SoftmaxPostprocess> > >")
FINALIZE = ("moe::dev::finalize::finalizeKernelSmallBatch<moe::dev::finalize::KernelParams<"
            "cutlass::bfloat16_t, cutlass::bfloat16_t, 4, false, true> >")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--metainfo", required=True)
    ap.add_argument("--cubins", required=True, help="the batched_gemm-* directory")
    ap.add_argument("--groups", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--routing", default=ROUTING)
    ap.add_argument("--finalize", default=FINALIZE)
    args = ap.parse_args()

    with open(args.metainfo, encoding="utf-8", errors="replace") as f:
        meta = f.read()
    # {nullptr, 0, <shared memory>, "<kernel>", <threads per CTA>, "<hash>", ...
    threads = {m.group(1): int(m.group(2))
               for m in re.finditer(r'\{nullptr, 0, \d+, "([^"]+)", (\d+), "', meta)}
    if not threads:
        sys.exit("released_launches: no tactics found in %s" % args.metainfo)
    cubins = sorted(n for n in os.listdir(args.cubins) if n.endswith(".cubin") and "E2m1" in n)
    groups = {}
    for c in cubins:
        kernel = "b" + c[1:-len(".cubin")]
        groups.setdefault(threads.get(kernel, 0), []).append(os.path.join(args.cubins, c))
    with open(args.groups, "w") as f:
        for t in sorted(groups):
            f.write("%d %s\n" % (t, " ".join(groups[t])))

    def tactics(prefix):
        out = []
        for c in cubins:
            kernel = "b" + c[1:-len(".cubin")]
            if c.startswith(prefix) and kernel.endswith("_sm100f"):
                out.append({"kernel": kernel, "threads": threads.get(kernel, 0)})
        return out

    gemm1 = tactics("Bmm_E2m1_E2m1E2m1_")      # FP4 out: GEMM1 of the NVFP4 flow (GEMM2 reads FP4)
    gemm2 = tactics("Bmm_Bfloat16_E2m1E2m1_")  # bf16 out: GEMM2 (finalize reads bf16)
    routing_bufs = {
        "params.mPtrScores": "routing_logits",
        "params.mPtrExpertCounts": "expert_count_histogram",
        "params.mPtrPermutedIdxSize": "total_num_padded_tokens",
        "params.mPtrExpandedIdxToPermutedIdx": "expanded_idx_to_permuted_idx",
        "params.mPtrPermutedIdxToExpandedIdx": "permuted_idx_to_expanded_idx",
        "params.mPtrPermutedIdxToTokenIdx": "permuted_idx_to_token_idx",
        "params.mPtrCtaIdxXyToBatchIdx": "cta_idx_xy_to_batch_idx",
        "params.mPtrCtaIdxXyToMnLimit": "cta_idx_xy_to_mn_limit",
        "params.mPtrNumNonExitingCtas": "num_non_exiting_ctas",
        "params.mPtrTopKWeights": "expert_weights",
        "params.mPtrTopKPacked": "routing_expert_indexes",
    }
    common = {
        "params.ptrRouteMap": "permuted_idx_to_token_idx",
        "params.ptrNumNonExitingCtas": "num_non_exiting_ctas",
        "params.ptrTotalNumPaddedTokens": "total_num_padded_tokens",
        "params.ptrCtaIdxXyToBatchIdx": "cta_idx_xy_to_batch_idx",
        "params.ptrCtaIdxXyToMnLimit": "cta_idx_xy_to_mn_limit",
    }
    gemm1_bufs = dict(common, **{
        "params.tmaA": "gemm1_weights", "params.tmaSfA": "gemm1_weights_scale",
        "params.tmaB": "hidden_states", "params.tmaSfB": "hidden_states_scale",
        "params.tmaC": "gemm1_out", "params.ptrSfC": "gemm1_out_scale",
        "params.ptrA": "gemm1_weights", "params.ptrB": "hidden_states",
        "params.ptrSfB": "hidden_states_scale", "params.ptrC": "gemm1_out",
    })
    gemm2_bufs = dict(common, **{
        "params.tmaA": "gemm2_weights", "params.tmaSfA": "gemm2_weights_scale",
        "params.tmaB": "gemm1_out", "params.tmaSfB": "gemm1_out_scale",
        "params.tmaC": "gemm2_out",
        "params.ptrA": "gemm2_weights", "params.ptrB": "gemm1_out",
        "params.ptrSfB": "gemm1_out_scale", "params.ptrC": "gemm2_out",
    })
    finalize_bufs = {
        "params.inPtr": "gemm2_out",
        "params.expertWeightsPtr": "expert_weights",
        "params.expandedIdxToPermutedIdx": "expanded_idx_to_permuted_idx",
        "params.outPtr": "out",
        "params.totalNumPaddedTokens": "total_num_padded_tokens",
    }
    launches = {
        "name": "released_nvfp4_moe",
        "description": "The released NVFP4 MoE layer with PDL on, as FP4BlockScaleLauncher::run "
                       "launches it: routing (custom routing, one CTA: the small-batch regime), "
                       "GEMM1 (gathers the hidden states through the permutation and applies the "
                       "gated activation in its epilogue: no permute and no activation kernel), "
                       "GEMM2, the small-batch finalize. Every sm_100f NVFP4 tactic of each GEMM "
                       "is an alternative of its launch.",
        "source": "flashinfer-python 0.7.2.post1: csrc/trtllm_fused_moe_kernel_launcher.cu "
                  "(FP4BlockScaleLauncher::run: Routing::Runner::run, then MoE::Runner::run, "
                  "enable_pdl passed to both), csrc/trtllm_fused_moe_runner.cu (Runner::run: "
                  "PermuteGemm1, the activation kernel only for DeepSeek FP8, GEMM2, "
                  "finalize::run), include/flashinfer/trtllm/fused_moe/DevKernel.h (LAUNCH_PDL: "
                  "the PDL attribute is mUsePdl, the kernel's UsePdl the same value); "
                  "flashinfer-cubin 0.6.13: BatchedGemmInterface.h (the GEMMs' PDL attribute is "
                  "usePdl && pdlSafe, and every tactic's mGridWaitForPrimaryB is set), "
                  "flashinferMetaInfo.h (threads per CTA)",
        "buffers": {
            "routing_logits": "router scores (layer input)",
            "hidden_states": "FP4 token activations (layer input)",
            "hidden_states_scale": "their block scales (layer input)",
            "gemm1_weights": "FC1 weights", "gemm1_weights_scale": "their block scales",
            "gemm2_weights": "FC2 weights", "gemm2_weights_scale": "their block scales",
            "routing_expert_indexes": "routing scratch (packed top-K)",
            "expert_count_histogram": "routing scratch",
            "expanded_idx_to_permuted_idx": "routing output: the permutation finalize reads",
            "expert_weights": "routing output: the top-K weights finalize reads",
            "permuted_idx_to_expanded_idx": "routing output",
            "permuted_idx_to_token_idx": "routing output: GEMM1's gather map",
            "total_num_padded_tokens": "routing output: permuted rows",
            "cta_idx_xy_to_batch_idx": "routing output: each GEMM CTA's expert",
            "cta_idx_xy_to_mn_limit": "routing output: each GEMM CTA's row limit",
            "num_non_exiting_ctas": "routing output: GEMM CTAs with work",
            "gemm1_out": "FC1 output (FP4, activation applied)", "gemm1_out_scale": "its scales",
            "gemm2_out": "FC2 output (bf16), finalize's input",
            "out": "layer output",
        },
        "launches": [
            {"name": "routing", "kernel": args.routing, "pdl": True,
             "assume": {"params.mUsePdl": 1}, "params": routing_bufs},
            {"name": "gemm1", "kernel": gemm1, "pdl": True, "params": gemm1_bufs},
            {"name": "gemm2", "kernel": gemm2, "pdl": True, "params": gemm2_bufs},
            {"name": "finalize", "kernel": args.finalize, "pdl": True, "params": finalize_bufs},
        ],
        "check": [
            {"launch": "finalize", "buffer": "expanded_idx_to_permuted_idx", "where": "before_wait"},
            {"launch": "finalize", "buffer": "expert_weights", "where": "before_wait"},
            {"launch": "gemm1", "buffer": "num_non_exiting_ctas", "where": "before_wait"},
            {"launch": "gemm1", "buffer": "cta_idx_xy_to_batch_idx", "where": "before_wait"},
            {"launch": "gemm2", "buffer": "num_non_exiting_ctas", "where": "before_wait"},
            {"launch": "gemm2", "buffer": "cta_idx_xy_to_batch_idx", "where": "before_wait"},
        ],
    }
    with open(args.out, "w") as f:
        json.dump(launches, f, indent=1)
        f.write("\n")
    print("released_launches: %d GEMM1 and %d GEMM2 tactics; %d NVFP4 cubins in %d block sizes"
          % (len(gemm1), len(gemm2), len(cubins), len(groups)))


if __name__ == "__main__":
    main()
