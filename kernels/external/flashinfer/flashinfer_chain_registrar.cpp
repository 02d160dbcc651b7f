// Registers the released routing, permute and activation launches (flashinfer_chain.hpp) as the
// kernels of the released chain flavour (core/chain/released_kernels.hpp). Built only with the
// released kernels, so a build without them has no table and refuses the flavour.

#include "core/chain/released_kernels.hpp"
#include "kernels/external/flashinfer/flashinfer.hpp"
#include "kernels/external/flashinfer/flashinfer_chain.hpp"

namespace moefin::external::flashinfer {
namespace {

void check_routing(routing::RoutingParams const& p) {
  (void)routing_kernel(p);
}

void routing_launch(routing::RoutingParams const& p, std::int32_t* tile_row_limit,
                    std::int32_t* num_tiles, bool pdl, Stream stream) {
  run_routing(p, RoutingExtras{tile_row_limit, num_tiles}, routing_kernel(p), pdl, stream);
}

struct Registrar {
  Registrar() {
    chain::ReleasedKernels k;
    k.check_routing = check_routing;
    k.routing = routing_launch;
    k.permute = run_permute;
    k.activation = run_activation;
    chain::register_released_kernels(k);
  }
};
Registrar const kRegistrar;

} // namespace
} // namespace moefin::external::flashinfer
