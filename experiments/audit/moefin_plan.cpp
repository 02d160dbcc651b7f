#include "experiments/audit/moefin_plan.hpp"

#include "core/ops/errors.hpp"
#include "core/ops/value_layout.hpp"
#include "kernels/gemm/decode_plan.hpp"
#include "kernels/routing/fast_routing.hpp"

namespace moefin::audit_plan {

namespace {

audit::AssumeItem item(std::string const& name, std::int64_t value) {
  audit::AssumeItem a;
  a.name = name;
  a.value = static_cast<std::uint64_t>(value);
  a.text = name + "=" + std::to_string(value);
  return a;
}

using Params = std::vector<std::pair<std::string, std::vector<std::string>>>;

Params one_each(std::vector<std::pair<std::string, std::string>> const& v) {
  Params p;
  for (auto const& [k, b] : v)
    p.emplace_back(k, std::vector<std::string>{b});
  return p;
}

std::int64_t trigger_value(Trigger t) {
  return static_cast<std::int64_t>(t);
}

/// The kernel symbol ChainRunner launches for a finalize variant: its checked graphs run the
/// instrumented instantiation (finalize_kernels.cuh, "Knob sets": every knob a run-time value,
/// the weight type read at run time).
std::string finalize_symbol(std::string const& impl, MoefinLaunchOptions const& o) {
  std::string const k = "moefin::finalize::kernels::";
  std::string const w = "(moefin::finalize::kernels::Weights)3";
  std::string const knobs = k + "Knobs";
  if (impl == "small_batch" || impl == "small_batch_late_trigger" ||
      impl == "small_batch_meta_after_wait")
    return k + "finalize_small_batch<" + w + ", true, " + knobs + ">";
  if (impl == "small_batch_nosplit")
    return k + "finalize_small_batch<" + w + ", false, " + knobs + ">";
  if (impl == "scalar")
    return k + "finalize_scalar<" + w + ", " + knobs + ">";
  if (impl == "vecload")
    return k + "finalize_vecload<" + w + ", " +
           std::to_string(o.top_k % 4 == 0   ? 4
                          : o.top_k % 2 == 0 ? 2
                                             : 1) +
           ", " + knobs + ">";
  throw InputError("audit: finalize variant " + impl + " has no kernel symbol in the audit");
}

void expect_impl(chain::KernelPlan const& k, std::string const& impl) {
  if (k.impl != impl)
    throw InputError("audit: the layer plan's " + k.name + " is " + k.impl +
                     ", the audit knows the kernels of " + impl);
}

} // namespace

audit::Launches moefin_launches(chain::LayerPlan const& plan, MoefinLaunchOptions const& o) {
  using chain::Kernel;
  if (plan.flavour != "moefin" && plan.flavour != "decode-bf16" && plan.flavour != "decode-fp4")
    throw InputError("audit: layer plan flavour " + plan.flavour +
                     " (the audit knows moefin, decode-bf16 and decode-fp4)");
  audit::Launches l;
  l.origin =
      "moefin ChainRunner (layer plan " + plan.flavour + ", finalize " + plan.finalize->name + ")";
  l.name = "moefin_chain";
  l.iterations = o.iterations;
  auto knob = [&](Kernel k, std::string const& impl, std::string const& symbol, Params params,
                  std::vector<audit::AssumeItem> assume = {}) {
    chain::KernelPlan const& kp = plan.at(k);
    expect_impl(kp, impl);
    audit::Launch la;
    la.name = kp.name;
    la.kernel = symbol;
    la.pdl = kp.pdl;
    la.assume.push_back(item("k.trigger", trigger_value(kp.trigger)));
    la.assume.insert(la.assume.end(), assume.begin(), assume.end());
    la.params = std::move(params);
    l.launches.push_back(std::move(la));
  };
  // The decode routing below its token limit (scores per lane by the expert count, as
  // routing::run_fast instantiates it), else the block kernels.
  bool const fast_routing = plan.at(Kernel::kRouting).impl == chain::kFastRouting;
  std::string routing_symbol = o.tokens <= 16 ? "moefin::routing::routing_block_kernel"
                                              : "moefin::routing::routing_multi_kernel";
  if (fast_routing) {
    if (o.tokens > routing::FastPolicy::kMaxTokens)
      throw InputError("audit: the decode routing takes at most " +
                       std::to_string(routing::FastPolicy::kMaxTokens) + " tokens (" +
                       std::to_string(o.tokens) + " asked)");
    routing_symbol = "moefin::routing::routing_fast_kernel<" +
                     std::to_string(routing::fast_scores_per_lane(o.num_experts)) + ">";
  }
  knob(Kernel::kRouting, fast_routing ? chain::kFastRouting : "moefin.routing", routing_symbol,
       one_each({{"p.scores", "scores"},
                 {"p.expert_ids", "expert_ids"},
                 {"p.expert_weights", "expert_weights"},
                 {"p.expanded_to_permuted", "expanded_to_permuted"},
                 {"p.permuted_to_token", "permuted_to_token"},
                 {"p.permuted_to_expanded", "permuted_to_expanded"},
                 {"p.expert_counts", "expert_counts"},
                 {"p.expert_offsets", "expert_offsets"},
                 {"p.cta_to_expert", "cta_to_expert"},
                 {"p.total_padded_rows", "total_padded_rows"}}));
  knob(Kernel::kPermute, "moefin.permute", o.permute_kernel,
       one_each({{"p.hidden_states", "hidden_states"},
                 {"p.permuted_to_token", "permuted_to_token"},
                 {"p.total_padded_rows", "total_padded_rows"},
                 {"p.permuted", "permuted"}}));
  // The tiled grouped GEMM, or the split-K decode GEMM (DecodeGemmParams: the grouped GEMM's
  // params as p.gemm, fp4 scales and global scales read as parts of the weights), which the
  // chain launches without weights_before_wait.
  std::string const gemm_impl = plan.at(Kernel::kGemm1).impl;
  bool const decode = gemm_impl != chain::kTiledGemmBf16;
  if (decode && gemm_impl != chain::kDecodeGemmBf16 && gemm_impl != chain::kDecodeGemmFp4)
    throw InputError("audit: GEMM implementation " + gemm_impl + " has no kernel symbol");
  bool const fp4_gemm = gemm_impl == chain::kDecodeGemmFp4;
  if (o.tiled_scales.value_or(false) && !fp4_gemm)
    throw InputError("audit: tiled scales are a layout of fp4 weights, not of GEMM " + gemm_impl);
  bool const tiled = o.tiled_scales.value_or(fp4_gemm);
  if (o.lean && !tiled)
    throw InputError("audit: lean loads are built into the tiled-scale kernel only");
  if (o.packed_values.value_or(false) && !tiled)
    throw InputError("audit: packed fp4 values are read by the tiled-scale kernel only");
  fp4::ValueLayout const chain_values =
      fp4::chain_value_layout(tiled ? fp4::ScaleLayout::kTiled : fp4::ScaleLayout::kRowMajor);
  bool const packed = o.packed_values.value_or(fp4::packed_words(chain_values));
  if (o.wide.value_or(false) && !packed)
    throw InputError("audit: the wide launch is built into the packed-value kernels only");
  bool const tiles = o.tiled_values.value_or(packed && chain_values == fp4::ValueLayout::kTiles &&
                                             o.wide.value_or(true));
  if (tiles && (!packed || !o.wide.value_or(true)))
    throw InputError("audit: tiled fp4 values are packed words read by the wide launch only");
  // (Tiles are packed words, checked above, so the rule launches them wide too.)
  bool const wide = o.wide.value_or(
      fp4::chain_wide_gemms(packed ? fp4::ValueLayout::kPacked : fp4::ValueLayout::kNibbles));
  std::string const tiled_args =
      std::to_string(o.tile_m / 8) + ", " + (o.lean ? "true" : "false") +
      (wide ? ", " + std::to_string(gemm::DecodePolicy::wide_stages(o.ctas_per_sm)) : "") + ">";
  std::string const gemm =
      tiled ? std::string("moefin::gemm::decode_gemm_") +
                  (tiles    ? "tiles"
                   : wide   ? "wide"
                   : packed ? "wpack"
                            : "tscale") +
                  "_kernel<" + tiled_args
      : decode ? std::string("moefin::gemm::decode_gemm_kernel<(moefin::gemm::WeightFormat)") +
                     (gemm_impl == chain::kDecodeGemmFp4 ? "1" : "0") + ", " +
                     std::to_string(o.tile_m / 8) + ", true>"
               : "moefin::gemm::grouped_gemm_kernel<" + std::to_string(o.tile_m / 16) + ">";
  auto gemm_params = [&](char const* a, char const* b, char const* c) {
    std::string const g = decode ? "p.gemm." : "p.";
    Params p = one_each({{g + "a", a},
                         {g + "b", b},
                         {g + "c", c},
                         {g + "cta_to_expert", "cta_to_expert"},
                         {g + "total_padded_rows", "total_padded_rows"},
                         {g + "row_token", "permuted_to_token"}});
    if (decode && gemm_impl == chain::kDecodeGemmFp4) {
      p.emplace_back("p.scales", std::vector<std::string>{b});
      p.emplace_back("p.global_scale", std::vector<std::string>{b});
    }
    return p;
  };
  std::vector<audit::AssumeItem> gemm_assume;
  if (decode)
    gemm_assume.push_back(item("launch.weights_before_wait", 0));
  knob(Kernel::kGemm1, gemm_impl, gemm, gemm_params("permuted", "w1", "gemm1_out"), gemm_assume);
  knob(Kernel::kActivation, "moefin.activation",
       std::string("moefin::activation::activation_kernel<(moefin::activation::Type)") +
           (o.swiglu ? "0" : "1") + ">",
       one_each({{"p.in", "gemm1_out"},
                 {"p.out", "act_out"},
                 {"p.total_padded_rows", "total_padded_rows"}}));
  knob(Kernel::kGemm2, gemm_impl, gemm, gemm_params("act_out", "w2", "gemm2_out"), gemm_assume);

  chain::KernelPlan const& fp = plan.at(Kernel::kFinalize);
  audit::Launch f;
  f.name = fp.name;
  f.kernel = finalize_symbol(fp.impl, o);
  f.pdl = fp.pdl;
  f.assume.push_back(item("k.trigger", trigger_value(fp.trigger)));
  f.assume.push_back(item("k.meta_before_wait", plan.finalize_meta_before_wait() ? 1 : 0));
  Params params = one_each({{"p.gemm_out", "gemm2_out"},
                            {"p.expert_weights", "expert_weights"},
                            {"p.expanded_to_permuted", "expanded_to_permuted"},
                            {"p.out", "out"}});
  // The runner passes the snapshot buffer exactly when the run allows pre-wait metadata.
  if (plan.meta_allowed)
    params.emplace_back("k.snapshot", std::vector<std::string>{"snapshot"});
  else
    f.assume.push_back(item("k.snapshot:8", 0));
  f.params = params;
  l.launches.push_back(f);

  if (o.checksum) {
    expect_impl(plan.checksum(), "moefin.checksum");
    audit::Launch c;
    c.name = plan.checksum().name;
    c.kernel = "moefin::chain::checksum_kernel";
    std::vector<std::string> layer;
    for (chain::Buffer b : chain::hashed_buffers())
      layer.push_back(chain::buffer_name(b));
    c.params = {{"p.buf", layer},
                {"p.expanded_to_permuted", {"expanded_to_permuted"}},
                {"p.slots", {"checksums"}},
                {"p.stale", {"checksums"}},
                {"p.recorded", {"checksums"}}};
    if (plan.meta_allowed)
      c.params.emplace_back("p.snapshot", std::vector<std::string>{"snapshot"});
    else
      c.assume.push_back(item("p.snapshot:8", 0));
    // Only the released flavour's checksum poisons what it hashed (LayerPlan::repoison).
    if (!plan.repoison)
      c.assume.push_back(item("p.repoison", 0));
    l.launches.push_back(c);
  }
  return l;
}

std::vector<audit::PlannedKernel> moefin_plan(chain::LayerPlan const& plan, bool checksum) {
  auto names = [](std::vector<chain::Buffer> const& bs) {
    std::vector<std::string> out;
    for (chain::Buffer b : bs)
      out.push_back(chain::buffer_name(b));
    return out;
  };
  std::vector<audit::PlannedKernel> out;
  for (chain::KernelPlan const& k : plan.kernels) {
    if (k.kernel == chain::Kernel::kChecksum && !checksum)
      continue;
    audit::PlannedKernel p;
    p.name = k.name;
    p.impl = k.impl;
    p.trigger = trigger_name(k.trigger);
    p.waits = k.waits;
    p.reads_before_wait = names(k.reads_before_wait);
    p.reads_after_wait = names(k.reads_after_wait);
    p.writes = names(k.writes);
    out.push_back(p);
  }
  return out;
}

} // namespace moefin::audit_plan
