#pragma once
// Checking every CUDA runtime call: a failure becomes a DeviceError naming the call and place.

#include "core/ops/errors.hpp"

#include <cuda_runtime_api.h>

#include <string>

namespace moefin {

inline void cuda_check(cudaError_t err, char const* what, char const* file, int line) {
  if (err != cudaSuccess)
    throw DeviceError(std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " +
                      cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

} // namespace moefin

#define MOEFIN_CUDA_CHECK(call) ::moefin::cuda_check((call), #call, __FILE__, __LINE__)
/// After a launch: a bad configuration shows up here rather than at the next synchronization.
#define MOEFIN_CUDA_CHECK_LAUNCH() MOEFIN_CUDA_CHECK(cudaPeekAtLastError())
