// moefin reference finalize: the Kokkos reference finalize over a generated or stored routing and
// a seeded GEMM-output tensor, written to HDF5 (groups /route and /finalize).

#include "experiments/commands.hpp"
#include "experiments/finalize/reference_run.hpp"
#include "experiments/routing/routing_file.hpp"

#include <cstdio>
#include <iostream>

namespace moefin::cmd {

int reference_finalize(cli::Args const& args) {
  cli::po::options_description desc("reference finalize options");
  desc.add_options()("hidden", cli::po::value<std::int64_t>()->default_value(2048),
                     "output row length H, 1..65536")(
      "hidden-padded", cli::po::value<std::int64_t>()->default_value(0),
      "row stride of the GEMM output, H..65536+1024; 0: same as --hidden")(
      "weights", cli::po::value<std::string>()->default_value("bf16"),
      "bf16 | fp32 | none (every expert weighs 1)")(
      "routing", cli::po::value<std::string>(),
      "read the routing from this 'moefin route' file instead of generating one")(
      "fp8", cli::po::bool_switch(),
      "the DeepSeek-FP8 variant: block-scaled inputs, E4M3 output with per-(token, 128-column) "
      "scales");
  add_routing_options(desc);
  add_result_file_options(desc, "seed of the routing and (mixed) of the GEMM-output tensor",
                          "out/reference_finalize.h5");
  cli::po::variables_map vm;
  if (!cli::parse("reference finalize",
                  "[--hidden H] [--hidden-padded HP] [--tokens T] [--top-k K] [--experts E] "
                  "[--weights bf16|fp32|none] [--distribution D] [--routing FILE] [--fp8] "
                  "[--seed S] [--out FILE]",
                  desc, args, vm))
    return kExitOk;

  std::int64_t const hidden = vm["hidden"].as<std::int64_t>();
  cli::check_range<std::int64_t>("--hidden", hidden, 1, 1 << 16);
  std::int64_t hidden_padded = vm["hidden-padded"].as<std::int64_t>();
  if (hidden_padded == 0)
    hidden_padded = hidden;
  cli::check_range<std::int64_t>("--hidden-padded", hidden_padded, hidden, (1 << 16) + 1024);
  std::string const w = vm["weights"].as<std::string>();
  cli::check_choice("--weights", w, {"bf16", "fp32", "none"});
  finalize::WeightType weights{};
  parse_weight_type(w, &weights);
  std::uint64_t const seed = vm["seed"].as<std::uint64_t>();

  RoutingSpec spec;
  Routing routing;
  RoutingLayout layout;
  if (vm.count("routing")) {
    std::string const flag = explicit_routing_flag(vm);
    if (!flag.empty())
      throw InputError(flag + ": not allowed with --routing (the routing file fixes it)");
    StoredRouting stored = read_routing(vm["routing"].as<std::string>());
    routing = std::move(stored.routing);
    layout = std::move(stored.layout);
    spec = stored.spec;
    if (vm["weights"].defaulted())
      weights = spec.weight_type;
  } else {
    spec = routing_spec_from(vm, seed, weights);
    routing = generate_routing(spec);
    layout = build_layout(routing, spec, vm["tile"].as<std::int64_t>());
  }
  spec.weight_type = weights;
  validate_finalize_shape(hidden, hidden_padded, layout.total_padded_rows);

  bool const fp8 = vm["fp8"].as<bool>();
  bool const long_run = layout.num_tokens * layout.top_k * hidden > (std::int64_t(1) << 26);
  if (long_run)
    std::fprintf(stderr, "[reference finalize] %lld x %lld outputs over %lld rows: running\n",
                 static_cast<long long>(layout.num_tokens), static_cast<long long>(hidden),
                 static_cast<long long>(layout.total_padded_rows));
  std::string const path = vm["out"].as<std::string>();
  bool const overwrite = vm["overwrite"].as<bool>();
  check_can_create(path, overwrite);
  ReferenceFinalizeRun const run = run_reference_finalize(routing, layout, hidden, hidden_padded,
                                                          weights, fp8, finalize_input_seed(seed));
  if (long_run)
    std::fprintf(stderr, "[reference finalize] reference done in %.1f ms; writing %s\n",
                 run.reference_ms, path.c_str());
  auto file = create_result_file(path, seed, overwrite);
  write_routing(file, "route", spec, run.routing, run.layout);
  write_finalize(file, "finalize", run);
  file.set_attr("finalize", "routing_source",
                vm.count("routing") ? vm["routing"].as<std::string>() : "generated");
  std::cout << summary_line(run) << "\nwrote " << path << " (/route, /finalize)\n";
  return kExitOk;
}

} // namespace moefin::cmd
