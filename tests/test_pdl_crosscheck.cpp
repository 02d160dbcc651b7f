// Verifier against simulator: on every shipped scenario and on the generated corpus of the
// 6-kernel chain, the simulator never finds a hazard in a pair the verifier orders (soundness)
// and witnesses every race the verifier reports within the stated bound (witness_bound with
// miss probability 1e-9; exact for chains whose kernels have one path each). Also checks that
// simulated schedules obey the rules, re-derived here from the chain rather than from the graph.
#define BOOST_TEST_MODULE pdl_crosscheck
#include <boost/test/unit_test.hpp>

#include "core/pdl/chain.hpp"
#include "core/pdl/event_graph.hpp"
#include "core/pdl/moe_chain.hpp"
#include "core/pdl/simulator.hpp"
#include "core/pdl/verifier.hpp"
#include "core/rng.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>

namespace fs = std::filesystem;
using namespace moefin::pdl;

namespace {

constexpr double kMiss = 1e-9;
constexpr std::int64_t kMinSchedules = 400; // free schedules beyond the bound, for soundness

struct Outcome {
  std::size_t races = 0, ordered = 0, witnessed = 0;
};

/// Runs both tools on one chain and checks the two directions; returns the counts.
Outcome cross_check(Chain const& c, std::string const& what) {
  Report const rep = verify(c, VerifyOptions{false});
  WitnessBound const b = witness_bound(c, kMiss);
  Simulator const sim(c);
  Schedule s;
  std::map<PairKey, std::int64_t> first_seen;
  std::int64_t const n = std::max(b.schedules, kMinSchedules);
  for (std::int64_t i = 0; i < n; ++i) {
    sim.run(2026, i, &s);
    for (HazardEvent const& h : sim.hazards(s)) {
      first_seen.emplace(h.key, i);
      PairVerdict const* v = rep.find(h.key);
      BOOST_TEST_REQUIRE(v != nullptr, what << ": the simulator found a pair the verifier lacks");
      if (v->ordered)
        BOOST_ERROR(what << ": unsound: schedule " << i << " shows " << hazard_text(c, h)
                         << " but the verifier orders it");
    }
  }
  Outcome o;
  for (PairVerdict const& p : rep.pairs) {
    if (p.ordered) {
      ++o.ordered;
      continue;
    }
    ++o.races;
    auto const it = first_seen.find(p.key);
    if (it == first_seen.end() || it->second >= b.schedules)
      BOOST_ERROR(what << ": race " << p.first << " -> " << p.second << " not witnessed within "
                       << b.schedules << " schedules"
                       << (it == first_seen.end() ? "" : " (only later)"));
    else
      ++o.witnessed;
  }
  return o;
}

std::vector<std::string> shipped() {
  std::vector<std::string> files;
  for (auto const& e : fs::directory_iterator(std::string(MOEFIN_SOURCE_DIR) + "/data/chains"))
    if (e.path().extension() == ".json")
      files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

} // namespace

BOOST_AUTO_TEST_CASE(simulator_agrees_with_verifier_on_every_shipped_scenario) {
  Outcome total;
  for (auto const& f : shipped()) {
    Outcome const o = cross_check(load_chain(f), f);
    total.races += o.races;
    total.ordered += o.ordered;
    total.witnessed += o.witnessed;
  }
  BOOST_TEST_MESSAGE("shipped scenarios: " << total.races
                                           << " races (all witnessed: " << total.witnessed << "), "
                                           << total.ordered << " ordered pairs");
  BOOST_TEST(total.races > 10u);
  BOOST_TEST(total.witnessed == total.races);
}

BOOST_AUTO_TEST_CASE(simulator_agrees_with_verifier_on_the_generated_corpus) {
  auto const t0 = std::chrono::steady_clock::now();
  std::vector<MoeChainSpec> const corpus = moe_corpus();
  BOOST_TEST(corpus.size() >= 300u);
  Outcome total;
  std::size_t racy_chains = 0;
  for (MoeChainSpec const& spec : corpus) {
    Chain const c = make_moe_chain(spec, "corpus");
    Outcome const o = cross_check(c, spec_label(spec));
    racy_chains += o.races > 0;
    total.races += o.races;
    total.ordered += o.ordered;
    total.witnessed += o.witnessed;
  }
  double const secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE("corpus: " << corpus.size() << " chains (" << racy_chains << " with a race), "
                                << total.races << " racing pairs, all witnessed: "
                                << (total.witnessed == total.races) << "; " << total.ordered
                                << " ordered pairs never stale; " << secs << " s");
  // The corpus must exercise both verdicts, or the check proves little.
  BOOST_TEST(racy_chains > 100u);
  BOOST_TEST(racy_chains < corpus.size());
}

BOOST_AUTO_TEST_CASE(simulator_agrees_with_verifier_on_random_chains) {
  // Random ops (fences included), several paths, PDL on and off, graph edges of every port and
  // two iterations: the corners the 6-kernel corpus does not reach.
  moefin::Rng rng(7);
  Outcome total;
  int chains = 0;
  while (chains < 300) {
    Chain c;
    c.name = "random";
    c.origin = "random chain " + std::to_string(chains);
    int const nb = 1 + static_cast<int>(rng.below(2));
    for (int b = 0; b < nb; ++b) {
      c.buffers.push_back("b" + std::to_string(b));
      c.buffer_notes.push_back("");
    }
    int const nk = 2 + static_cast<int>(rng.below(3));
    int multi = 0;
    for (int k = 0; k < nk; ++k) {
      Kernel kern;
      kern.name = "k" + std::to_string(k);
      kern.pdl = rng.below(5) != 0;
      kern.ctas = 1 + static_cast<int>(rng.below(3));
      int const np = multi == 0 && rng.below(3) == 0 ? 2 : 1;
      multi += np > 1;
      for (int p = 0; p < np; ++p) {
        Path path;
        for (std::uint64_t j = 0, len = rng.below(6); j < len; ++j) {
          Op o;
          o.kind = static_cast<OpKind>(rng.below(5));
          o.buffer = o.is_access() ? static_cast<int>(rng.below(nb)) : -1;
          path.push_back(o);
        }
        kern.paths.push_back(path);
      }
      c.kernels.push_back(kern);
    }
    c.graph = rng.below(3) == 0;
    if (c.graph)
      for (int to = 1; to < nk; ++to)
        for (int from = 0; from < to; ++from)
          if (rng.below(2) == 0)
            c.edges.push_back({from, to, static_cast<Port>(rng.below(3))});
    c.iterations = 1 + static_cast<int>(rng.below(2));
    if (witness_bound(c, kMiss).schedules > 20000)
      continue; // keep the test quick; such chains are rare here
    Outcome const o = cross_check(c, c.origin);
    total.races += o.races;
    total.ordered += o.ordered;
    total.witnessed += o.witnessed;
    ++chains;
  }
  BOOST_TEST_MESSAGE("random chains: " << total.races << " races, " << total.ordered
                                       << " ordered pairs");
  BOOST_TEST(total.races > 100u);
  BOOST_TEST(total.ordered > 100u);
}

BOOST_AUTO_TEST_CASE(multi_path_chains_use_the_probabilistic_bound) {
  Chain const c = load_chain(std::string(MOEFIN_SOURCE_DIR) + "/data/chains/early_exit_path.json");
  WitnessBound const b = witness_bound(c, kMiss);
  BOOST_TEST(b.q == 0.25);    // permute has two paths: 1 / (2 * 2)
  BOOST_TEST(b.rounds == 73); // ceil(ln 1e-9 / ln 0.75)
  BOOST_TEST(b.schedules == 2 * b.pivots * b.rounds);
  Chain const single = load_chain(std::string(MOEFIN_SOURCE_DIR) + "/data/chains/seed_after.json");
  WitnessBound const bs = witness_bound(single, kMiss);
  BOOST_TEST(bs.q == 1.0);
  BOOST_TEST(bs.rounds == 1);
}

BOOST_AUTO_TEST_CASE(simulated_schedules_obey_the_rules) {
  // The rules of docs/design/pdl.md, checked on the times directly from the chain's structure.
  for (auto const& f : shipped()) {
    Chain const c = load_chain(f);
    Simulator const sim(c);
    Unrolled const u = unroll(c);
    Schedule s;
    for (std::int64_t i = 0; i < 40; ++i) {
      sim.run(99, i, &s);
      EventGraph const& g = s.graph;
      auto const t = [&](int node) { return s.time[node]; };
      for (int m = 0; m < u.size(); ++m) {
        double trig = 0, exit = 0;
        for (int ci = g.cta_begin[m]; ci < g.cta_begin[m + 1]; ++ci) {
          CtaNodes const& cn = g.ctas[ci];
          BOOST_TEST_REQUIRE(t(cn.start) >= t(g.launch[m]));
          for (std::size_t j = 0; j < cn.ops->size(); ++j) {
            int const v = g.op_node(ci, static_cast<int>(j));
            BOOST_TEST_REQUIRE(t(v) >= t(v - 1)); // program order
            if ((*cn.ops)[j].kind == OpKind::kWait)
              for (InEdge const& e : u.in_edges[m])
                if (e.port == Port::kProgrammatic)
                  BOOST_TEST_REQUIRE(t(v) >= t(g.complete[e.from]),
                                     f << ": wait before completion");
          }
          int const tp = first_of(*cn.ops, OpKind::kTrigger);
          trig = std::max(trig, tp >= 0 ? t(g.op_node(ci, tp)) : t(cn.exit));
          exit = std::max(exit, t(cn.exit));
        }
        BOOST_TEST_REQUIRE(t(g.trigger[m]) == trig);  // the latest CTA trigger or exit
        BOOST_TEST_REQUIRE(t(g.complete[m]) >= exit); // flush after the last exit
        for (InEdge const& e : u.in_edges[m]) {
          if (e.port == Port::kProgrammatic)
            BOOST_TEST_REQUIRE(t(g.launch[m]) >= t(g.trigger[e.from]), f);
          else if (e.port == Port::kDefault)
            BOOST_TEST_REQUIRE(t(g.launch[m]) >= t(g.complete[e.from]), f);
          else
            for (int ci = g.cta_begin[e.from]; ci < g.cta_begin[e.from + 1]; ++ci)
              BOOST_TEST_REQUIRE(t(g.launch[m]) >= t(g.ctas[ci].start), f);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(free_schedules_also_show_races_without_pivots) {
  // Races are not an artefact of pivot schedules: free (even) schedules show them too.
  Chain const c = load_chain(std::string(MOEFIN_SOURCE_DIR) + "/data/chains/h200_direct.json");
  Simulator const sim(c);
  Schedule s;
  int stale = 0, free_runs = 0;
  for (std::int64_t i = 0; i < 400; i += 2, ++free_runs) {
    sim.run(5, i, &s);
    BOOST_TEST_REQUIRE(!s.pivot_mode);
    stale += !sim.hazards(s).empty();
  }
  BOOST_TEST(stale > 0);
  BOOST_TEST(stale < free_runs);
}
