// moefin route: a seeded routing and its permuted layout, written to HDF5 (group /route).

#include "core/finalize_inputs.hpp"
#include "experiments/commands.hpp"
#include "experiments/routing/routing_file.hpp"

#include <cstdio>
#include <iostream>

namespace moefin::cmd {

int route(cli::Args const& args) {
  cli::po::options_description desc("route options");
  add_routing_options(desc);
  desc.add_options()("weights", cli::po::value<std::string>()->default_value("bf16"),
                     "bf16 | fp32: the weight type the layer uses (both are stored)");
  add_result_file_options(desc, "seed of the routing", "out/route.h5");
  cli::po::variables_map vm;
  if (!cli::parse("route",
                  "[--tokens T] [--experts E] [--top-k K] [--distribution D] [--zipf-s S] "
                  "[--weights bf16|fp32] [--no-renormalize] [--drop-fraction F] "
                  "[--local-experts BEGIN:COUNT] [--tile N] [--seed S] [--out FILE]",
                  desc, args, vm))
    return kExitOk;

  std::string const w = vm["weights"].as<std::string>();
  cli::check_choice("--weights", w, {"bf16", "fp32"});
  finalize::WeightType weights{};
  parse_weight_type(w, &weights);
  std::uint64_t const seed = vm["seed"].as<std::uint64_t>();
  RoutingSpec const spec = routing_spec_from(vm, seed, weights);
  std::int64_t const tile = vm["tile"].as<std::int64_t>();

  std::string const path = vm["out"].as<std::string>();
  bool const overwrite = vm["overwrite"].as<bool>();
  check_can_create(path, overwrite);
  bool const long_run = spec.num_tokens * spec.top_k > (std::int64_t(1) << 22);
  if (long_run)
    std::fprintf(stderr, "[route] generating %lld x %lld choices\n",
                 static_cast<long long>(spec.num_tokens), static_cast<long long>(spec.top_k));
  Routing const routing = generate_routing(spec);
  RoutingLayout const layout = build_layout(routing, spec, tile);
  if (long_run)
    std::fprintf(stderr, "[route] writing %s\n", path.c_str());
  auto file = create_result_file(path, seed, overwrite);
  write_routing(file, "route", spec, routing, layout);

  std::cout << "route: T=" << spec.num_tokens << " E=" << spec.num_experts << " K=" << spec.top_k
            << " " << distribution_name(spec.distribution) << ", " << w << " weights"
            << (spec.renormalize ? "" : " (raw)") << ": " << describe_layout(routing, layout)
            << "\nwrote " << path << " (/route)\n";
  return kExitOk;
}

} // namespace moefin::cmd
