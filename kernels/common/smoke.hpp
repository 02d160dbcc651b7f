#pragma once
// A minimal device round trip used by `moefin info --check` and the gpu-labelled smoke test.

#include <string>

namespace moefin {

/// Launches a PDL pair (producer, then consumer that waits) on poisoned buffers and checks every
/// element on the host. Returns false with a reason in `detail`. Throws DeviceError on CUDA errors.
bool run_device_smoke(std::string* detail);

} // namespace moefin
