#include "core/pdl/moe_chain.hpp"

#include <set>
#include <stdexcept>

namespace moefin::pdl {

namespace {

struct Buffers {
  char const* name;
  char const* what;
};

constexpr Buffers kBuffers[] = {
    {"scores", "router logits [T, E] (input of the layer)"},
    {"hidden_states", "token activations [T, H] (input of the layer)"},
    {"routing_meta", "expert ids, expert weights, expanded_to_permuted [T*K]"},
    {"layout",
     "permuted_to_token, permuted_to_expanded, expert offsets, cta_to_expert, total rows"},
    {"permuted", "hidden states gathered in permuted order"},
    {"gemm1_out", "gate/up projection output"},
    {"act_out", "activation output"},
    {"gemm2_out", "down projection output (finalize input)"},
    {"out", "finalize output [T, H]"},
};

/// What each kernel reads before its wait, after it, and writes (writes come last).
struct Template {
  std::vector<std::string> pre, post, writes;
  char const* note;
};

Template kernel_template(int k, bool meta_before) {
  switch (k) {
  case 0:
    return {{}, {"scores"}, {"routing_meta", "layout"}, "routing block kernel (single CTA)"};
  case 1:
    return {
        {}, {"layout", "hidden_states"}, {"permuted"}, "gather hidden states into expert order"};
  case 2:
    return {{},
            {"layout", "permuted"},
            {"gemm1_out"},
            "grouped GEMM1; every routing-dependent load after the wait"};
  case 3:
    return {{}, {"layout", "gemm1_out"}, {"act_out"}, "SwiGLU or ReLU^2"};
  case 4:
    return {{},
            {"layout", "act_out"},
            {"gemm2_out"},
            "grouped GEMM2; every routing-dependent load after the wait"};
  default:
    if (meta_before)
      return {{"routing_meta"}, {"gemm2_out"}, {"out"}, "finalize: metadata read before the wait"};
    return {{}, {"routing_meta", "gemm2_out"}, {"out"}, "finalize: every read after the wait"};
  }
}

Op access(Chain const& c, OpKind kind, std::string const& buffer) {
  Op o;
  o.kind = kind;
  o.buffer = c.buffer_index(buffer);
  if (o.buffer < 0)
    throw std::logic_error("moe chain: no buffer " + buffer);
  return o;
}

Op control(OpKind kind) {
  Op o;
  o.kind = kind;
  return o;
}

constexpr char const* kShort[kMoeKernels] = {"r", "p", "g1", "a", "g2", "f"};

} // namespace

char const* moe_kernel_name(int k) {
  static constexpr char const* kNames[kMoeKernels] = {"routing",    "permute", "gemm1",
                                                      "activation", "gemm2",   "finalize"};
  return k >= 0 && k < kMoeKernels ? kNames[k] : "?";
}

MoeChainSpec seed_before_spec() {
  MoeChainSpec s;
  s.trigger = {Trigger::kAfterWrites, Trigger::kEntry, Trigger::kExit,
               Trigger::kEntry,       Trigger::kExit,  Trigger::kExit};
  s.finalize_meta_before_wait = false;
  return s;
}

MoeChainSpec seed_after_spec() {
  MoeChainSpec s;
  s.trigger = {Trigger::kAfterWait, Trigger::kEntry, Trigger::kExit,
               Trigger::kEntry,     Trigger::kExit,  Trigger::kEntry};
  s.finalize_meta_before_wait = true;
  return s;
}

Chain make_moe_chain(MoeChainSpec const& spec, std::string const& name) {
  Chain c;
  c.name = name;
  c.description = "MoE layer chain " + spec_label(spec);
  c.origin = "moe chain " + spec_label(spec);
  for (Buffers const& b : kBuffers) {
    c.buffers.push_back(b.name);
    c.buffer_notes.push_back(b.what);
  }
  c.iterations = spec.iterations;
  for (int k = 0; k < kMoeKernels; ++k) {
    Template const t = kernel_template(k, spec.finalize_meta_before_wait);
    Kernel kern;
    kern.name = moe_kernel_name(k);
    kern.pdl = spec.pdl;
    kern.ctas = k == 0 ? 1 : spec.ctas;
    kern.note = t.note;
    Trigger const pl = spec.trigger[k];
    Path p;
    if (pl == Trigger::kEntry)
      p.push_back(control(OpKind::kTrigger));
    for (auto const& b : t.pre)
      p.push_back(access(c, OpKind::kRead, b));
    if (spec.omit_wait != k)
      p.push_back(control(OpKind::kWait));
    if (pl == Trigger::kAfterWait)
      p.push_back(control(OpKind::kTrigger));
    for (auto const& b : t.post)
      p.push_back(access(c, OpKind::kRead, b));
    for (auto const& b : t.writes)
      p.push_back(access(c, OpKind::kWrite, b));
    if (pl == Trigger::kAfterWrites)
      p.push_back(control(OpKind::kTrigger));
    kern.paths.push_back(p);
    c.kernels.push_back(kern);
  }
  return c;
}

std::string spec_label(MoeChainSpec const& s) {
  std::string out;
  for (int k = 0; k < kMoeKernels; ++k)
    out += std::string(k ? "," : "") + kShort[k] + "=" + trigger_name(s.trigger[k]);
  out += std::string(",meta=") + (s.finalize_meta_before_wait ? "before" : "after");
  out += std::string(",omit=") + (s.omit_wait < 0 ? "none" : kShort[s.omit_wait]);
  if (!s.pdl)
    out += ",pdl=off";
  out += ",it=" + std::to_string(s.iterations);
  return out;
}

std::vector<MoeChainSpec> moe_corpus() {
  MoeChainSpec base = seed_after_spec();
  base.trigger[2] = Trigger::kEntry;
  base.trigger[4] = Trigger::kEntry;
  std::vector<MoeChainSpec> out;
  std::set<std::string> seen;
  for (int k = 0; k < kMoeKernels; ++k)
    for (Trigger p : kPlacements)
      for (int omit = -1; omit < kMoeKernels; ++omit)
        for (bool meta : {true, false})
          for (int it : {1, 2}) {
            MoeChainSpec s = base;
            s.trigger[k] = p;
            s.omit_wait = omit;
            s.finalize_meta_before_wait = meta;
            s.iterations = it;
            if (seen.insert(spec_label(s)).second)
              out.push_back(s);
          }
  return out;
}

} // namespace moefin::pdl
