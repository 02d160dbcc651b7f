// The adapter's interface in a build without the released kernels (no packages, CUDA off, or
// MOEFIN_WITH_FLASHINFER=OFF): it links, reports why, and refuses to run.

#include "kernels/external/flashinfer/flashinfer.hpp"
#include "kernels/external/flashinfer/flashinfer_chain.hpp"

#include "core/ops/errors.hpp"

namespace moefin::external::flashinfer {

namespace {

[[noreturn]] void refuse(char const* what) {
  throw InputError(std::string("flashinfer: ") + what +
                   ": the released kernels are not in this "
                   "build (" +
                   unavailable_reason() + ")");
}

} // namespace

bool available() {
  return false;
}

std::string const& unavailable_reason() {
  static std::string const reason = MOEFIN_FLASHINFER_REASON;
  return reason;
}

void run(FinalizeParams const&, Options const& o, Stream, DeepseekLayout const*) {
  refuse(kernel_name(o.kernel));
}

void run_routing(routing::RoutingParams const&, RoutingExtras const&, RoutingKernel k, bool,
                 Stream) {
  refuse(routing_kernel_name(k));
}

void run_permute(permute::PermuteParams const&, std::int32_t const*, std::int64_t, bool, Stream) {
  refuse("released permute");
}

void run_activation(activation::ActivationParams const&, std::int32_t const*, std::int64_t,
                    std::int64_t, bool, Stream) {
  refuse("released activation");
}

DeepseekLayout::DeepseekLayout(FinalizeParams const&, Stream) {
  refuse("DeepseekLayout");
}

DeepseekLayout::~DeepseekLayout() = default;

bool DeepseekLayout::fits(FinalizeParams const&) const {
  return false;
}

void DeepseekLayout::poison_out_scales(Stream) const {
  refuse("DeepseekLayout");
}

void DeepseekLayout::store_scales(FinalizeParams const&, Stream) const {
  refuse("DeepseekLayout");
}

} // namespace moefin::external::flashinfer
