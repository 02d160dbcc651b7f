#include "core/chain/verifier_chain.hpp"

#include "core/chain/presets.hpp"

#include <stdexcept>
#include <vector>

namespace moefin::chain {

namespace {

/// The buffers of the verifier chain, in the order it lists them: the layer's inputs, the
/// hashed buffers in chain order, then the measurement buffers.
std::vector<Buffer> verifier_buffers() {
  std::vector<Buffer> b = {Buffer::kScores, Buffer::kHiddenStates, Buffer::kW1, Buffer::kW2};
  for (Buffer h : hashed_buffers())
    b.push_back(h);
  b.push_back(Buffer::kSnapshot);
  b.push_back(Buffer::kChecksums);
  b.push_back(Buffer::kFusedCounters);
  return b;
}

std::string buffer_note(Buffer b) {
  switch (b) {
  case Buffer::kScores:
    return "router logits of the layer (its own slice per iteration; written before the batch)";
  case Buffer::kHiddenStates:
  case Buffer::kW1:
  case Buffer::kW2:
    return "layer input, written before the batch";
  case Buffer::kSnapshot:
    return "the permuted indices finalize used (when meta=before), for the stale-read count";
  case Buffer::kChecksums:
    return "per-iteration hashes of every buffer and the stale-read counts";
  case Buffer::kFusedCounters:
    return "the fused finalize's arrival counters (GEMM1 clears, GEMM2 counts)";
  default:
    return "chain buffer (kernels/chain/chain.hpp)";
  }
}

} // namespace

pdl::Chain verifier_chain(LayerPlan const& plan, std::string const& description, bool graph,
                          int iterations) {
  pdl::Chain c;
  c.name = "moefin_race_cell";
  c.description = description;
  c.source = "core/ops/layer_plan.hpp (the plan ChainRunner enqueues, checked layers)";
  std::vector<Buffer> const buffers = verifier_buffers();
  for (Buffer b : buffers) {
    c.buffers.push_back(buffer_name(b));
    c.buffer_notes.push_back(buffer_note(b));
  }
  c.iterations = iterations;
  auto op = [&](pdl::OpKind kind) {
    pdl::Op o;
    o.kind = kind;
    return o;
  };
  auto access = [&](pdl::OpKind kind, Buffer b) {
    pdl::Op o = op(kind);
    o.buffer = c.buffer_index(buffer_name(b));
    if (o.buffer < 0)
      throw std::logic_error(std::string("verifier_chain: no buffer ") + buffer_name(b));
    return o;
  };
  for (KernelPlan const& k : plan.kernels) {
    if (!k.launched) // finalize inside GEMM2: GEMM2's entry has its accesses
      continue;
    if (k.trigger == Trigger::kDefault)
      throw std::logic_error("verifier_chain: unresolved trigger of " + k.name);
    pdl::Path p;
    if (k.trigger == Trigger::kEntry)
      p.push_back(op(pdl::OpKind::kTrigger));
    for (Buffer b : k.reads_before_wait)
      p.push_back(access(pdl::OpKind::kRead, b));
    if (k.waits)
      p.push_back(op(pdl::OpKind::kWait));
    if (k.trigger == Trigger::kAfterWait)
      p.push_back(op(pdl::OpKind::kTrigger));
    for (Buffer b : k.reads_after_wait)
      p.push_back(access(pdl::OpKind::kRead, b));
    for (Buffer b : k.writes)
      p.push_back(access(pdl::OpKind::kWrite, b));
    if (k.trigger == Trigger::kAfterWrites)
      p.push_back(op(pdl::OpKind::kTrigger));
    pdl::Kernel kern;
    kern.name = k.name;
    kern.pdl = k.pdl;
    kern.ctas = 2; // one CTA on the weakest path decides (core/pdl/verifier.hpp); two show it
    kern.paths.push_back(std::move(p));
    c.kernels.push_back(std::move(kern));
  }
  return graph ? pdl::captured_graph(c, iterations) : c;
}

pdl::Chain verifier_chain(ChainConfig const& cfg, finalize::FinalizeVariant const& fin, bool graph,
                          int iterations) {
  return verifier_chain(make_layer_plan(cfg, fin), describe(cfg) + " finalize_variant=" + fin.name,
                        graph, iterations);
}

std::string chain_json(ChainConfig const& cfg, finalize::FinalizeVariant const& fin, bool graph,
                       ChainFlavour const& flavour) {
  return pdl::to_json(verifier_chain(make_layer_plan(cfg, fin, flavour),
                                     describe(cfg) + " finalize_variant=" + fin.name, graph));
}

CellVerdict verify_cell(ChainConfig const& cfg, finalize::FinalizeVariant const& fin, bool graph,
                        ChainFlavour const& flavour) {
  LayerPlan const plan = make_layer_plan(cfg, fin, flavour);
  pdl::Chain const c = verifier_chain(plan, describe(cfg) + " finalize_variant=" + fin.name, graph);
  pdl::Report const r = pdl::verify(c, {false});
  CellVerdict v;
  v.chain = r.verdict();
  v.races = r.races();
  v.pairs = r.pairs.size();
  // The launched kernels of a layer and its checksum, and the one that reads the metadata.
  int n = 0, f = -1;
  for (KernelPlan const& k : plan.kernels) {
    if (!k.launched)
      continue;
    if (k.kernel == plan.metadata_reader())
      f = n;
    ++n;
  }
  std::vector<int> fin_kernels = {f};
  if (graph)
    for (int it = 1; it < kVerifierIterations; ++it)
      fin_kernels.push_back(it * n + f);
  bool const before = plan.finalize_meta_before_wait();
  for (Buffer b : {Buffer::kExpandedToPermuted, Buffer::kExpertWeights})
    if (pdl::reads_verdict(c, r, fin_kernels, c.buffer_index(buffer_name(b)), before) ==
        pdl::Verdict::kRace)
      v.metadata = pdl::Verdict::kRace;
  return v;
}

} // namespace moefin::chain
