// The released routing block kernels launched from moefin. Their launch functions are defined in
// the released trtllm_fused_moe_routing_custom_block.cu, which this target compiles as it is
// shipped; they are declared here with the released signatures (no released header declares
// them outside that file), and the released policy header answers which tier serves a shape.

#include "kernels/common/cuda_check.hpp"
#include "kernels/external/flashinfer/flashinfer_data.hpp"

#include "flashinfer/trtllm/fused_moe/RoutingCustomPolicy.cuh"

#include <exception>
#include <string>

namespace moe::dev::routing::routingCustom {
bool launchBlockKernel(Data const& data, void* stream);
bool launchDynBlockKernel(Data const& data, uint32_t numThreadsHist, void* stream);
} // namespace moe::dev::routing::routingCustom

namespace moefin::external::flashinfer {

void run_routing(routing::RoutingParams const& p, RoutingExtras const& x, RoutingKernel k, bool pdl,
                 Stream stream) {
  namespace rc = moe::dev::routing::routingCustom;
  if (routing_kernel(p) != k && k != RoutingKernel::kDynBlock)
    throw InputError(std::string("flashinfer: ") + routing_kernel_name(k) +
                     " serves at most 4 "
                     "tokens (" +
                     std::to_string(p.num_tokens) + ")");
  if (x.tile_row_limit == nullptr || x.num_tiles == nullptr)
    throw InputError("flashinfer: released routing needs tile_row_limit and num_tiles");
  rc::Data const d = routing_data(p, x, pdl);
  if (!rc::queryPolicyHasCompiledTier(d))
    throw InputError("flashinfer: released routing has no compiled tier for experts=" +
                     std::to_string(p.num_experts) + ", top_k=" + std::to_string(p.top_k) +
                     " with this method");
  bool launched = false;
  try {
    if (k == RoutingKernel::kBlock) {
      launched = rc::launchBlockKernel(d, stream);
    } else {
      if (p.num_tokens > 16 || rc::queryDispatchedMaxExperts(d) > 512)
        throw InputError("flashinfer: fi_routing_dyn_block serves at most 16 tokens and a tier "
                         "of at most 512 experts");
      // The released run() passes this; the dynamic kernel sizes its block itself.
      auto const threads =
          std::min(1024u, static_cast<std::uint32_t>(rc::getMaxNumExperts(d.mNumExperts)));
      launched = rc::launchDynBlockKernel(d, threads, stream);
    }
  } catch (InputError const&) {
    throw;
  } catch (std::exception const& e) {
    throw DeviceError(std::string("flashinfer: ") + routing_kernel_name(k) + ": " + e.what());
  }
  if (!launched)
    throw DeviceError(std::string("flashinfer: ") + routing_kernel_name(k) + " was not launched");
  MOEFIN_CUDA_CHECK_LAUNCH();
}

} // namespace moefin::external::flashinfer
