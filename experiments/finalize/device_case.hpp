#pragma once
// A host case copied to the device, and one poisoned, checked run of finalize on it (CUDA
// builds only). Shared by `moefin check finalize`, the sweep and the gpu tests.

#include "experiments/finalize/cases.hpp"
#include "experiments/harness/device_buffer.hpp"

#include <cstdint>
#include <vector>

namespace moefin::fin {

struct DeviceCase {
  dev::Buffer gemm_out, weights, perm, in_scales, out, out_scales;
  finalize::FinalizeParams params; // device pointers

  /// Copies the case's inputs; allocates out for bf16 [T, H] (E4M3 output uses its first half)
  /// and out_scales for [T, ceil(H / 128)].
  explicit DeviceCase(HostCase const& c);
};

/// Poisons out (0xff bytes: NaN), runs finalize::run with `o` on `stream`, synchronizes and
/// returns the bf16 output bits [T, H].
std::vector<std::uint16_t> run_bf16(DeviceCase& d, finalize::Options const& o, cudaStream_t stream);

struct Fp8Output {
  std::vector<std::uint8_t> q; // [T, H] E4M3
  std::vector<float> scales;   // [T, ceil(H / 128)]
};
/// The same for the deepseek_fp8 variant (out and out_scales poisoned).
Fp8Output run_fp8(DeviceCase& d, finalize::Options const& o, cudaStream_t stream);

} // namespace moefin::fin
