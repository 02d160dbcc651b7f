// moefin verify CHAIN.json: the happens-before verifier (core/pdl/verifier.hpp) on a chain
// description. Prints every pair of conflicting accesses as `ordered` with the chain of events
// that orders it, or `RACE` with what is missing and the single changes that would fix it.
// Exit 0 race-free, 1 a race, 2 a malformed or unreadable file.

#include "core/pdl/chain.hpp"
#include "core/pdl/verifier.hpp"
#include "experiments/commands.hpp"

#include <iostream>

namespace moefin::cmd {

namespace {

std::string chain_summary(pdl::Chain const& c) {
  return std::to_string(c.kernels.size()) + " kernels in " +
         (c.graph ? "a CUDA graph (" + std::to_string(c.edges.size()) + " edges)"
                  : std::string("stream order")) +
         ", " + std::to_string(c.iterations) + (c.iterations == 1 ? " iteration" : " iterations");
}

} // namespace

int verify(cli::Args const& args) {
  cli::po::options_description desc("verify options");
  desc.add_options()("chain", cli::po::value<std::string>()->required(),
                     "chain description (JSON, format in docs/reference/chain-json.md)")(
      "races-only", cli::po::bool_switch(), "print only the pairs that race")(
      "quiet,q", cli::po::bool_switch(), "print only the verdict line");
  cli::po::positional_options_description pos;
  pos.add("chain", 1);
  cli::po::variables_map vm;
  if (!cli::parse("verify", "CHAIN.json [--races-only] [--quiet]", desc, args, vm, &pos))
    return kExitOk;
  std::string const path = vm["chain"].as<std::string>();
  pdl::Chain const c = pdl::load_chain(path); // a malformed file is an InputError: exit 2
  bool const quiet = vm["quiet"].as<bool>();
  bool const races_only = vm["races-only"].as<bool>();
  pdl::VerifyOptions o;
  o.explain = !quiet;
  pdl::Report const rep = pdl::verify(c, o);

  if (!quiet) {
    std::cout << c.name << " (" << path << "): " << chain_summary(c) << "\n";
    for (pdl::PairVerdict const& p : rep.pairs) {
      if (races_only && p.ordered)
        continue;
      std::cout << "  " << (p.ordered ? "ordered" : "RACE   ") << "  " << pdl::hazard_name(p.hazard)
                << " " << c.buffers[p.key.buffer] << ": " << p.first << " -> " << p.second << "\n";
      for (auto const& w : p.why)
        std::cout << "           " << w << "\n";
      if (!p.ordered) {
        if (p.fixes.empty()) {
          std::cout << "           fix: no single change orders them\n";
        } else {
          std::cout << "           fix (any one):";
          for (std::size_t i = 0; i < p.fixes.size(); ++i)
            std::cout << (i ? ";" : "") << " " << p.fixes[i];
          std::cout << "\n";
        }
      }
    }
  }
  pdl::Verdict const v = rep.verdict();
  std::cout << (quiet ? c.name + ": " : std::string("verdict: "))
            << (v == pdl::Verdict::kRace ? "RACE" : "ordered") << " (" << rep.races() << " of "
            << rep.pairs.size() << " pairs race)";
  if (c.expected)
    std::cout << (*c.expected == v ? "; as the file expects"
                                   : std::string("; MISMATCH: the file expects ") +
                                         pdl::verdict_name(*c.expected));
  std::cout << "\n";
  return v == pdl::Verdict::kRace ? kExitFailure : kExitOk;
}

} // namespace moefin::cmd
