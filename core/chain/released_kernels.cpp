#include "core/chain/released_kernels.hpp"

#include "core/ops/errors.hpp"

namespace moefin::chain {

namespace {
ReleasedKernels& released_table() {
  static ReleasedKernels table;
  return table;
}
bool& released_registered() {
  static bool registered = false;
  return registered;
}
} // namespace

ReleasedKernels const* released_kernels() {
  return released_registered() ? &released_table() : nullptr;
}

void register_released_kernels(ReleasedKernels const& k) {
  released_table() = k;
  released_registered() = true;
}

void require_released_kernels(std::string const& flag) {
  if (released_kernels() == nullptr)
    throw InputError(flag + ": this build lacks the released FlashInfer kernels (configure with "
                            "the packages of scripts/fetch_released.sh)");
}

} // namespace moefin::chain
