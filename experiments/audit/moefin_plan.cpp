#include "experiments/audit/moefin_plan.hpp"

#include <stdexcept>

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

} // namespace

audit::Launches moefin_launches(chain::ChainConfig const& cfg, std::string const& variant,
                                MoefinLaunchOptions const& o) {
  using chain::Kernel;
  chain::FinalizeRun const fin = chain::finalize_run(cfg, variant);
  audit::Launches l;
  l.origin = "moefin ChainRunner (" + chain::describe(cfg) + ", finalize " + variant + ")";
  l.name = "moefin_chain";
  l.iterations = o.iterations;
  auto knob = [&](Kernel k, std::string const& symbol, Params params) {
    audit::Launch la;
    la.name = chain::kernel_name(k);
    la.kernel = symbol;
    la.pdl = cfg.at(k).pdl;
    la.assume.push_back(item("k.trigger", static_cast<std::int64_t>(cfg.trigger(k))));
    la.params = std::move(params);
    l.launches.push_back(std::move(la));
  };
  knob(Kernel::kRouting,
       o.tokens <= 16 ? "moefin::routing::routing_block_kernel"
                      : "moefin::routing::routing_multi_kernel",
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
  knob(Kernel::kPermute, o.permute_kernel,
       one_each({{"p.hidden_states", "hidden_states"},
                 {"p.permuted_to_token", "permuted_to_token"},
                 {"p.total_padded_rows", "total_padded_rows"},
                 {"p.permuted", "permuted"}}));
  std::string const gemm =
      "moefin::gemm::grouped_gemm_kernel<" + std::to_string(o.tile_m / 16) + ">";
  auto gemm_params = [](char const* a, char const* b, char const* c) {
    return one_each({{"p.a", a},
                     {"p.b", b},
                     {"p.c", c},
                     {"p.cta_to_expert", "cta_to_expert"},
                     {"p.total_padded_rows", "total_padded_rows"},
                     {"p.row_token", "permuted_to_token"}});
  };
  knob(Kernel::kGemm1, gemm, gemm_params("permuted", "w1", "gemm1_out"));
  knob(Kernel::kActivation,
       std::string("moefin::activation::activation_kernel<(moefin::activation::Type)") +
           (o.swiglu ? "0" : "1") + ">",
       one_each({{"p.in", "gemm1_out"},
                 {"p.out", "act_out"},
                 {"p.total_padded_rows", "total_padded_rows"}}));
  knob(Kernel::kGemm2, gemm, gemm_params("act_out", "w2", "gemm2_out"));

  audit::Launch f;
  f.name = chain::kernel_name(Kernel::kFinalize);
  std::string const w = "(moefin::finalize::WeightType)1"; // bf16 weights (the runner's)
  if (variant == "small_batch")
    f.kernel = "moefin::finalize::kernels::finalize_small_batch<" + w + ", true>";
  else if (variant == "scalar")
    f.kernel = "moefin::finalize::kernels::finalize_scalar<" + w + ">";
  else if (variant == "vecload")
    f.kernel = "moefin::finalize::kernels::finalize_vecload<" + w + ", " +
               std::to_string(o.top_k % 4 == 0   ? 4
                              : o.top_k % 2 == 0 ? 2
                                                 : 1) +
               ">";
  else
    throw std::invalid_argument("moefin_launches: finalize variant " + variant);
  f.pdl = cfg.at(Kernel::kFinalize).pdl;
  f.assume.push_back(item("k.trigger", static_cast<std::int64_t>(fin.trigger)));
  f.assume.push_back(item("k.meta_before_wait", cfg.metadata_before_wait ? 1 : 0));
  Params fp = one_each({{"p.gemm_out", "gemm2_out"},
                        {"p.expert_weights", "expert_weights"},
                        {"p.expanded_to_permuted", "expanded_to_permuted"},
                        {"p.out", "out"}});
  if (cfg.metadata_before_wait)
    fp.emplace_back("k.snapshot", std::vector<std::string>{"snapshot"});
  else
    f.assume.push_back(item("k.snapshot:8", 0));
  f.params = fp;
  l.launches.push_back(f);

  if (o.checksum) {
    audit::Launch c;
    c.name = "checksum";
    c.kernel = "moefin::chain::checksum_kernel";
    auto const& names = chain::layer_buffer_names();
    std::vector<std::string> layer(names.begin(), names.end());
    c.params = {{"p.buf", layer},
                {"p.expanded_to_permuted", {"expanded_to_permuted"}},
                {"p.slots", {"checksums"}},
                {"p.stale", {"checksums"}},
                {"p.recorded", {"checksums"}}};
    if (cfg.metadata_before_wait)
      c.params.emplace_back("p.snapshot", std::vector<std::string>{"snapshot"});
    else
      c.assume.push_back(item("p.snapshot:8", 0));
    l.launches.push_back(c);
  }
  return l;
}

std::vector<audit::PlannedKernel> moefin_plan(chain::ChainConfig const& cfg,
                                              std::string const& variant) {
  std::vector<audit::PlannedKernel> out;
  for (chain::KernelDescription const& k : chain::describe_chain(cfg, variant)) {
    audit::PlannedKernel p;
    p.name = k.name;
    p.trigger = k.trigger;
    p.waits = k.waits;
    p.reads_before_wait = k.reads_before_wait;
    p.reads_after_wait = k.reads_after_wait;
    p.writes = k.writes;
    out.push_back(p);
  }
  return out;
}

} // namespace moefin::audit_plan
