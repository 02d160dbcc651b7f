#include "core/device_pick.hpp"

#include "core/ops/errors.hpp"

#ifdef MOEFIN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstdio>

namespace moefin {

namespace {

#ifdef MOEFIN_HAVE_CUDA
/// The 16 UUID bytes in nvidia-smi's spelling, so a file names the physical GPU.
std::string uuid_text(cudaUUID_t const& u) {
  char buf[48];
  auto const* b = reinterpret_cast<unsigned char const*>(u.bytes);
  std::snprintf(buf, sizeof(buf),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return buf;
}
#endif

} // namespace

DevicePick pick_device(int local_rank) {
  DevicePick p;
  p.local_rank = local_rank;
#ifndef MOEFIN_HAVE_CUDA
  p.reason = "built without CUDA";
  return p;
#else
  // cudaGetDeviceCount creates no context, so the pick still precedes every context.
  cudaError_t err = cudaGetDeviceCount(&p.visible);
  if (err != cudaSuccess || p.visible <= 0) {
    p.reason = err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device visible";
    p.visible = 0;
    cudaGetLastError();
    return p;
  }
  p.ordinal = local_rank % p.visible;
  err = cudaSetDevice(p.ordinal);
  if (err != cudaSuccess)
    throw DeviceError("cudaSetDevice(" + std::to_string(p.ordinal) +
                      "): " + cudaGetErrorString(err));
  p.selected = true;
  p.rule = "local rank " + std::to_string(local_rank) + " mod " + std::to_string(p.visible) +
           " visible devices = device " + std::to_string(p.ordinal);
  cudaDeviceProp prop{};
  err = cudaGetDeviceProperties(&prop, p.ordinal);
  if (err != cudaSuccess)
    throw DeviceError("cudaGetDeviceProperties(" + std::to_string(p.ordinal) +
                      "): " + cudaGetErrorString(err));
  p.uuid = uuid_text(prop.uuid);
  char bus[32] = {0};
  err = cudaDeviceGetPCIBusId(bus, sizeof(bus), p.ordinal);
  if (err != cudaSuccess)
    throw DeviceError("cudaDeviceGetPCIBusId(" + std::to_string(p.ordinal) +
                      "): " + cudaGetErrorString(err));
  p.pci_bus_id = bus;
  return p;
#endif
}

} // namespace moefin
