#pragma once
// The H200 measurements of docs/design/pdl.md, reproducible: a producer that writes after a
// delay, zero or more middle kernels that trigger before or after their wait, and a consumer
// that reads the producer's value before and after its own wait. Counts stale reads.

#include <cstdint>
#include <string>
#include <vector>

namespace moefin::probe {

struct ProbeChain {
  std::string name;
  bool producer_triggers_at_end = false;         // else at entry, before its wait and its write
  std::vector<bool> middle_triggers_before_wait; // one entry per middle kernel
  std::string chain_file; // data/chains/<chain_file>.json: the chain for the verifier
};

struct ProbeResult {
  int iterations = 0;
  int stale_pre_wait = 0;  // consumer read an older value before its wait
  int stale_post_wait = 0; // ... after its wait (PDL forbids it)
};

/// Runs `iterations` producer/middles/consumer rounds with PDL on, in one CUDA graph replay when
/// `graph`, else as plain stream launches; `delay_ns` before the producer's write.
ProbeResult run_probe(ProbeChain const& chain, bool graph, int iterations, std::int64_t delay_ns);

/// The chains of that H200 table, in its order (host code:
/// kernels/common/pdl_probe_chains.cpp).
std::vector<ProbeChain> design_chains();

} // namespace moefin::probe
