// The happens-before verifier: the H200 table of docs/design/pdl.md, the derived rule on
// random stream chains, graph ports, iterations, and every shipped scenario's expected verdict.
#define BOOST_TEST_MODULE pdl_verifier
#include <boost/test/unit_test.hpp>

#include "core/pdl/chain.hpp"
#include "core/pdl/moe_chain.hpp"
#include "core/pdl/verifier.hpp"
#include "core/rng.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace moefin::pdl;

namespace {

std::string chains_dir() {
  return std::string(MOEFIN_SOURCE_DIR) + "/data/chains/";
}

std::vector<std::string> shipped() {
  std::vector<std::string> files;
  for (auto const& e : fs::directory_iterator(chains_dir()))
    if (e.path().extension() == ".json")
      files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

std::string quoted_path(std::vector<std::string> const& ops) {
  std::string s = "[";
  for (std::size_t i = 0; i < ops.size(); ++i)
    s += (i ? ", \"" : "\"") + ops[i] + "\"";
  return s + "]";
}

/// A stream chain over one buffer `data`: kernels k0, k1, ... with these paths and PDL flags.
Chain stream_chain(std::vector<std::vector<std::vector<std::string>>> const& kernels,
                   std::vector<bool> const& pdl) {
  std::string j = R"({"name": "t", "buffers": {"data": ""}, "kernels": [)";
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    j += (k ? ", " : "") + std::string(R"({"name": "k)") + std::to_string(k) + R"(", "pdl": )" +
         (pdl[k] ? "true" : "false") + R"(, "paths": [)";
    for (std::size_t p = 0; p < kernels[k].size(); ++p)
      j += (p ? ", " : "") + quoted_path(kernels[k][p]);
    j += "]}";
  }
  return parse_chain(j + "]}", "test chain");
}

/// The verdict of the pair (k0's write of data, the consumer's read at op `op`).
PairVerdict const& consumer_read(Report const& r, int consumer, int op) {
  for (PairVerdict const& p : r.pairs)
    if (p.key.kernel_a == 0 && p.key.kernel_b == consumer && p.key.op_b == op)
      return p;
  BOOST_FAIL("no pair for the consumer's op " << op);
  return r.pairs.front();
}

using Paths = std::vector<std::vector<std::string>>;
Paths const kProducer{{"trigger", "write data"}}; // triggers at entry, writes after
Paths const kConsumer{{"read data", "wait", "read data"}};
Paths const kBefore{{"trigger", "wait"}};
Paths const kAfter{{"wait", "trigger"}};

} // namespace

BOOST_AUTO_TEST_CASE(h200_table_rows_come_out_as_measured) {
  struct Row {
    std::vector<Paths> middles;
    bool pre_ordered; // 0 stale pre-wait reads measured, and the rules order them
  };
  // Rows 1, 3-7 of the table (row 2, trigger at end, is below: 0 measured but not ordered).
  std::vector<Row> const rows{{{}, false},
                              {{kBefore}, false},
                              {{kAfter}, true},
                              {{kAfter, kBefore}, true},
                              {{kBefore, kAfter}, true},
                              {{kBefore, kBefore}, false}};
  for (Row const& row : rows) {
    std::vector<Paths> ks{kProducer};
    ks.insert(ks.end(), row.middles.begin(), row.middles.end());
    ks.push_back(kConsumer);
    int const consumer = static_cast<int>(ks.size()) - 1;
    Report const r = verify(stream_chain(ks, std::vector<bool>(ks.size(), true)));
    BOOST_TEST(r.pairs.size() == 2u);
    BOOST_TEST(consumer_read(r, consumer, 0).ordered == row.pre_ordered,
               "pre-wait read with " << row.middles.size() << " kernels in between");
    BOOST_TEST(consumer_read(r, consumer, 2).ordered, "post-wait reads are never stale");
    // Serialized (compute-sanitizer): everything is ordered.
    Report const s = verify(stream_chain(ks, std::vector<bool>(ks.size(), false)));
    BOOST_TEST(s.races() == 0u);
  }
  // Row 2: the trigger after the write publishes nothing; a release fence before it does.
  Report const late = verify(stream_chain({{{"write data", "trigger"}}, kConsumer}, {true, true}));
  BOOST_TEST(!consumer_read(late, 1, 0).ordered);
  Report const fenced =
      verify(stream_chain({{{"write data", "fence gpu", "trigger"}}, kConsumer}, {true, true}));
  BOOST_TEST(consumer_read(fenced, 1, 0).ordered);
}

BOOST_AUTO_TEST_CASE(shipped_h200_chains_agree_with_their_measurements) {
  int checked = 0;
  for (auto const& f : shipped()) {
    Chain const c = load_chain(f);
    if (c.measured.empty())
      continue;
    Report const r = verify(c);
    for (MeasuredReads const& m : c.measured) {
      bool any_race = false;
      int pairs = 0;
      for (PairVerdict const& p : r.pairs) {
        if (p.key.kernel_b != m.kernel || p.key.buffer != m.buffer)
          continue;
        Path const& q = c.kernels[m.kernel].paths[p.key.path_b];
        int const w = first_of(q, OpKind::kWait);
        if (q[p.key.op_b].kind != OpKind::kRead || (w < 0 || p.key.op_b < w) != m.before_wait)
          continue;
        ++pairs;
        any_race = any_race || !p.ordered;
      }
      BOOST_TEST(pairs > 0, f);
      if (m.stale > 0)
        BOOST_TEST(any_race, f << ": stale reads were measured, so the verifier must say RACE");
      if (!any_race)
        BOOST_TEST(m.stale == 0, f << ": the verifier orders these reads, none may be stale");
      ++checked;
    }
  }
  BOOST_TEST(checked >= 16); // two measured read groups per H200 chain
}

BOOST_AUTO_TEST_CASE(random_stream_chains_follow_the_derived_rule) {
  // docs/design/pdl.md: an access in K_n before its wait is ordered after K_0's write iff some
  // K_i (0 < i <= n-1) waits before it triggers on every path, or some K_i (0 < i <= n) is launched
  // without PDL, and every kernel strictly between K_0 and that K_i waits on every path. After its
  // wait, it is also ordered when every kernel strictly between waits on every path.
  std::vector<std::vector<std::string>> const shapes{
      {}, {"wait"}, {"trigger"}, {"trigger", "wait"}, {"wait", "trigger"}};
  auto const cls = [](std::vector<std::string> const& p) {
    auto const w = std::find(p.begin(), p.end(), "wait");
    if (w == p.end())
      return 0;
    auto const t = std::find(p.begin(), p.end(), "trigger");
    return t < w ? 1 : 2;
  };
  moefin::Rng rng(42);
  int races = 0, ordered = 0;
  for (int trial = 0; trial < 400; ++trial) {
    int const n = 1 + static_cast<int>(rng.below(5)); // consumer index
    std::vector<Paths> ks{kProducer};
    std::vector<bool> pdl{true};
    std::vector<int> klass{0};
    for (int i = 1; i < n; ++i) {
      Paths ps;
      int c = 2;
      for (std::uint64_t p = 0, np = 1 + rng.below(2); p < np; ++p) {
        ps.push_back(shapes[rng.below(shapes.size())]);
        c = std::min(c, cls(ps.back()));
      }
      ks.push_back(ps);
      klass.push_back(c);
      pdl.push_back(rng.below(4) != 0);
    }
    ks.push_back(kConsumer);
    pdl.push_back(rng.below(4) != 0);
    auto const waits = [&](int l) { return klass[l] >= 1 || !pdl[l]; };
    bool pre = false;
    for (int i = 1; i <= n && !pre; ++i) {
      bool link = !pdl[i] || (i <= n - 1 && klass[i] == 2);
      for (int l = 1; l < i && link; ++l)
        link = waits(l);
      pre = link;
    }
    bool all_wait = true;
    for (int l = 1; l < n; ++l)
      all_wait = all_wait && waits(l);
    Report const r = verify(stream_chain(ks, pdl));
    BOOST_TEST(consumer_read(r, n, 0).ordered == pre, "trial " << trial);
    BOOST_TEST(consumer_read(r, n, 2).ordered == (pre || all_wait), "trial " << trial);
    (pre ? ordered : races) += 1;
  }
  BOOST_TEST(races > 50); // both verdicts well represented
  BOOST_TEST(ordered > 50);
}

BOOST_AUTO_TEST_CASE(every_shipped_chain_has_its_expected_verdict) {
  std::set<std::string> names;
  for (auto const& f : shipped()) {
    Chain const c = load_chain(f);
    BOOST_TEST_REQUIRE(c.expected.has_value(), f << " has no expected verdict");
    Report const r = verify(c);
    BOOST_TEST((r.verdict() == *c.expected), f << ": " << r.races() << " races");
    BOOST_TEST(!r.pairs.empty(), f);
    for (PairVerdict const& p : r.pairs) {
      BOOST_TEST(!p.why.empty(), f << ": every verdict is justified");
      if (!p.ordered)
        BOOST_TEST(!p.fixes.empty(), f << ": " << p.first << " -> " << p.second);
    }
    names.insert(fs::path(f).stem().string());
  }
  for (char const* required :
       {"seed_before", "seed_after", "review_claim_gemms_entry", "review_claim_gemms_after_wait",
        "review_claim_gemms_after_writes", "review_claim_gemms_exit", "h200_direct",
        "h200_direct_trigger_at_end", "h200_middle_trigger_before_wait",
        "h200_middle_trigger_after_wait", "h200_m1_after_m2_before", "h200_m1_before_m2_after",
        "h200_m1_before_m2_before", "h200_serialized", "replay_seed_after",
        "replay_routing_no_wait_small_batch", "graph_launch_completion"})
    BOOST_TEST(names.count(required) == 1u, "data/chains/" << required << ".json is shipped");
}

BOOST_AUTO_TEST_CASE(shipped_seed_chains_match_the_generator) {
  auto const same_paths = [](Chain const& a, Chain const& b) {
    if (a.kernels.size() != b.kernels.size() || a.buffers != b.buffers)
      return false;
    for (std::size_t k = 0; k < a.kernels.size(); ++k)
      if (a.kernels[k].name != b.kernels[k].name || !(a.kernels[k].paths == b.kernels[k].paths) ||
          a.kernels[k].pdl != b.kernels[k].pdl)
        return false;
    return true;
  };
  MoeChainSpec gemms = seed_after_spec();
  BOOST_TEST(same_paths(load_chain(chains_dir() + "seed_before.json"),
                        make_moe_chain(seed_before_spec(), "x")));
  BOOST_TEST(same_paths(load_chain(chains_dir() + "seed_after.json"),
                        make_moe_chain(seed_after_spec(), "x")));
  for (moefin::Trigger p : {moefin::Trigger::kEntry, moefin::Trigger::kAfterWait,
                            moefin::Trigger::kAfterWrites, moefin::Trigger::kExit}) {
    gemms.trigger[2] = gemms.trigger[4] = p;
    std::string const f = chains_dir() + "review_claim_gemms_" + moefin::trigger_name(p) + ".json";
    BOOST_TEST(same_paths(load_chain(f), make_moe_chain(gemms, "x")), f);
  }
}

BOOST_AUTO_TEST_CASE(the_review_claim_holds_only_when_no_kernel_links_routing_to_finalize) {
  Report const r = verify(load_chain(chains_dir() + "review_claim_gemms_entry.json"));
  BOOST_TEST(r.races() == 1u);
  PairVerdict const* race = nullptr;
  for (PairVerdict const& p : r.pairs)
    if (!p.ordered)
      race = &p;
  BOOST_REQUIRE(race);
  BOOST_TEST(race->first == "routing writes routing_meta after its wait");
  BOOST_TEST(race->second == "finalize reads routing_meta before its wait");
  for (char const* fix : {"gemm1 waits before it triggers (every path)",
                          "gemm2 waits before it triggers (every path)",
                          "finalize does 'read routing_meta' after its wait",
                          "routing fences (gpu) after 'write routing_meta' and triggers after the "
                          "fence"})
    BOOST_TEST((std::find(race->fixes.begin(), race->fixes.end(), fix) != race->fixes.end()), fix);
  // Those fixes, applied, are the shipped chains that verify as ordered.
  for (char const* f : {"review_claim_gemms_after_wait", "review_fix_meta_after_wait",
                        "review_fix_routing_fence_trigger_at_end"})
    BOOST_TEST((verify(load_chain(chains_dir() + f + ".json")).verdict() == Verdict::kOrdered), f);
  // Moving routing's trigger back after its writes is not a fix: a trigger publishes nothing.
  BOOST_TEST(verify(load_chain(chains_dir() + "review_fix_routing_trigger_at_end.json")).races() ==
             1u);
}

BOOST_AUTO_TEST_CASE(ordered_pairs_are_justified_by_the_link_kernel) {
  Report const r = verify(load_chain(chains_dir() + "h200_m1_after_m2_before.json"));
  PairVerdict const& pre = consumer_read(r, 3, 0);
  BOOST_REQUIRE(pre.ordered);
  BOOST_TEST(pre.why.at(0) == "producer completes (flushed) -> m1's wait returns -> m1 triggers -> "
                              "launch m2 -> m2 triggers -> launch consumer -> consumer reads data");
  Report const s = verify(load_chain(chains_dir() + "seed_after.json"));
  for (PairVerdict const& p : s.pairs)
    if (p.second == "finalize reads routing_meta before its wait")
      BOOST_TEST(p.why.at(0).find("gemm1's wait returns -> gemm1 exits") != std::string::npos,
                 p.why.at(0));
}

BOOST_AUTO_TEST_CASE(next_iteration_overwrites_are_hazards) {
  Chain const c = load_chain(chains_dir() + "replay_routing_no_wait_small_batch.json");
  Report const r = verify(c);
  bool war = false;
  for (PairVerdict const& p : r.pairs)
    if (!p.ordered && p.hazard == Hazard::kWar && p.key.distance == 1 &&
        c.buffers[p.key.buffer] == "routing_meta" && p.key.kernel_a == 5 && p.key.kernel_b == 0)
      war = true;
  BOOST_TEST(war, "iteration 2's routing may overwrite what iteration 1's finalize reads early");
  // With routing waiting (the seed-after chain), the same pair is ordered.
  Report const ok = verify(load_chain(chains_dir() + "replay_seed_after.json"));
  BOOST_TEST(ok.races() == 0u);
  bool cross = false;
  for (PairVerdict const& p : ok.pairs)
    cross = cross || (p.key.distance == 1 && p.hazard == Hazard::kWar);
  BOOST_TEST(cross, "cross-iteration WAR pairs are checked");
}

BOOST_AUTO_TEST_CASE(a_launch_completion_edge_is_invisible_to_the_wait) {
  Report const lc = verify(load_chain(chains_dir() + "graph_launch_completion.json"));
  BOOST_REQUIRE(lc.pairs.size() == 1u);
  BOOST_TEST(!lc.pairs[0].ordered);
  BOOST_TEST(lc.pairs[0].second == "consumer reads data after its wait");
  BOOST_TEST((verify(load_chain(chains_dir() + "graph_programmatic.json")).verdict() ==
              Verdict::kOrdered));
  BOOST_TEST((verify(load_chain(chains_dir() + "graph_default_edge.json")).verdict() ==
              Verdict::kOrdered));
}

BOOST_AUTO_TEST_CASE(a_kernel_is_as_weak_as_its_weakest_path) {
  Report const exit_early = verify(load_chain(chains_dir() + "early_exit_path.json"));
  Report const waits = verify(load_chain(chains_dir() + "early_exit_path_waits.json"));
  BOOST_TEST(exit_early.races() == 4u);
  BOOST_TEST(waits.races() == 0u);
}

BOOST_AUTO_TEST_CASE(a_captured_stream_orders_exactly_like_the_stream) {
  int compared = 0;
  for (auto const& f : shipped()) {
    Chain const c = load_chain(f);
    if (c.graph)
      continue;
    Chain const g = captured_graph(c, c.iterations);
    BOOST_TEST_REQUIRE(g.graph);
    BOOST_TEST(g.kernels.size() == c.kernels.size() * static_cast<std::size_t>(c.iterations));
    Report const rs = verify(c, {false});
    Report const rg = verify(g, {false});
    BOOST_TEST((rg.verdict() == rs.verdict()), f);
    if (c.iterations == 1) { // later rounds repeat pairs the stream form checks once
      BOOST_TEST(rg.races() == rs.races(), f);
      BOOST_TEST(rg.pairs.size() == rs.pairs.size(), f);
    }
    ++compared;
  }
  BOOST_TEST(compared >= 20);
  BOOST_CHECK_THROW(captured_graph(load_chain(chains_dir() + "graph_programmatic.json"), 1),
                    std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(the_verdict_on_one_read_names_the_side_of_the_wait) {
  Chain const c = load_chain(chains_dir() + "h200_middle_trigger_before_wait.json");
  Report const r = verify(c, {false});
  int const consumer = c.kernel_index("consumer"), data = c.buffer_index("data");
  BOOST_TEST((reads_verdict(c, r, {consumer}, data, true) == Verdict::kRace));
  BOOST_TEST((reads_verdict(c, r, {consumer}, data, false) == Verdict::kOrdered));
  BOOST_CHECK_THROW(reads_verdict(c, r, {c.kernel_index("middle")}, data, true),
                    std::invalid_argument);
}
