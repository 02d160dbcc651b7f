#include "core/device_info.hpp"

#ifdef MOEFIN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace moefin {

std::string DeviceInfo::compute_capability() const {
  if (!present)
    return "none";
  return std::to_string(cc_major) + "." + std::to_string(cc_minor);
}

std::string DeviceInfo::arch() const {
  if (!present)
    return "none";
  return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
}

std::string cuda_version_string(int encoded) {
  if (encoded <= 0)
    return "none";
  return std::to_string(encoded / 1000) + "." + std::to_string((encoded % 1000) / 10);
}

DeviceInfo query_device(int ordinal) {
  DeviceInfo info;
  info.ordinal = ordinal;
#ifndef MOEFIN_HAVE_CUDA
  info.reason = "built without CUDA";
  return info;
#else
  cudaRuntimeGetVersion(&info.runtime_version);
  if (cudaDriverGetVersion(&info.driver_version) != cudaSuccess)
    info.driver_version = 0;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    info.reason = std::string(cudaGetErrorString(err));
    cudaGetLastError(); // clear the sticky-free error so later calls start clean
    return info;
  }
  // A sharded run picks its GPU first (core/device_pick.hpp); everything after reports that one.
  if (ordinal == kCurrentDevice && cudaGetDevice(&ordinal) != cudaSuccess) {
    cudaGetLastError();
    ordinal = 0;
  }
  info.ordinal = ordinal;
  if (ordinal < 0 || ordinal >= count) {
    info.reason =
        "device " + std::to_string(ordinal) + " requested, " + std::to_string(count) + " present";
    return info;
  }
  cudaDeviceProp prop{};
  err = cudaGetDeviceProperties(&prop, ordinal);
  if (err != cudaSuccess) {
    info.reason = std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(err);
    cudaGetLastError();
    return info;
  }
  info.present = true;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.l2_bytes = prop.l2CacheSize;
  info.global_mem_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
  cudaDeviceGetAttribute(&info.max_sm_clock_khz, cudaDevAttrClockRate, ordinal);
  cudaDeviceGetAttribute(&info.max_mem_clock_khz, cudaDevAttrMemoryClockRate, ordinal);
  char bus[32] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), ordinal) == cudaSuccess)
    info.pci_bus_id = bus;
  return info;
#endif
}

} // namespace moefin
