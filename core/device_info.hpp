#pragma once
// What the CUDA runtime says about the GPU, for `moefin info` and result-file provenance.

#include <cstdint>
#include <string>

namespace moefin {

struct DeviceInfo {
  bool present = false;
  std::string reason; // why no device is usable, when !present
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t global_mem_bytes = 0;
  int max_sm_clock_khz = 0;
  int max_mem_clock_khz = 0;
  int driver_version = 0;  // e.g. 13000 for 13.0
  int runtime_version = 0; // CUDA runtime linked into moefin, same encoding
  std::string pci_bus_id;

  std::string compute_capability() const; // "9.0", or "none"
  std::string arch() const;               // "sm_90", or "none"
};

/// The device this thread made current (cudaSetDevice; device 0 when none was set).
inline constexpr int kCurrentDevice = -1;

/// Queries device `ordinal`. Never throws: a missing driver or device gives present == false.
DeviceInfo query_device(int ordinal = kCurrentDevice);

/// "13.0" from 13000; "none" for 0.
std::string cuda_version_string(int encoded);

} // namespace moefin
