#pragma once
// The released FlashInfer finalize kernels (flashinfer-python 0.7.2.post1,
// csrc/fused_moe/trtllm_backend/trtllm_fused_moe_dev_kernel.cu; docs/design/released.md) driven by
// moefin's FinalizeParams. Each released kernel is launchable on its own with the geometry the
// released host code gives it, with the PDL attribute on or off, and the released host
// dispatcher moe::dev::finalize::run is one more entry. The released code is built from the
// installed package (scripts/fetch_released.sh) into the target moefin_flashinfer; without it
// this interface still links, available() is false and run() throws.
// Host-visible header: no CUDA and no FlashInfer includes.
//
// Where the released input conventions differ from moefin's (docs/design/computation.md):
// - permuted indices: the same array and meaning ([T*K], row of gemm_out, -1 = not local); the
//   released kernels skip exactly -1 (moefin's also skip indices past the GEMM output).
// - hidden / hidden_padded: the same (output row length / gemm_out row stride).
// - weights: bf16 or fp32 [T, K] as in moefin, or none (nullptr); the DeepSeek kernel needs them.
// - element types: bf16 in and out. FlashInfer's DeepSeek kernel reads and writes one element
//   type; it runs here on moefin's bf16 GEMM output and writes bf16 values already divided by the
//   output scale (moefin's deepseek_fp8 stores E4M3): see DeepseekLayout.
// - DeepSeek scales: FlashInfer indexes them column-major ([blocks][rows], [blocks][tokens]) and
//   reads the padded row count from device memory; moefin's are row-major ([rows][blocks],
//   [tokens][blocks]). DeepseekLayout holds the transposed copies.

#include "kernels/finalize/finalize.hpp"

#include <cstdint>
#include <string>

namespace moefin::external::flashinfer {

using finalize::FinalizeParams;
using Stream = finalize::Stream;

/// Whether this build contains the released kernels; if not, why (one line naming what is
/// missing and how to get it).
bool available();
std::string const& unavailable_reason();
/// The package the kernels are built from (scripts/fetch_released.sh pins it).
inline constexpr char kReleasedVersion[] = "flashinfer-python 0.7.2.post1";

/// The released finalize entries.
enum class Kernel : std::int32_t {
  kScalar = 0,  // finalizeKernel: the previous kernel (one element per thread, serial top-K)
  kVecload,     // finalizeKernelVecLoad: one CTA per token, 128-bit loads
  kSmallBatch,  // finalizeKernelSmallBatch: the seed's kernel in its released geometry
  kDeepseekFp8, // finalizeDeepSeekKernel: block-scaled sum, output divided by amax / 448
  kDispatch,    // moe::dev::finalize::run: the released selection rule picks one of the first three
};
inline constexpr int kNumKernels = 5;

char const* kernel_name(Kernel k);   // "fi_scalar", "fi_vecload", "fi_small_batch", ...
char const* kernel_symbol(Kernel k); // "finalizeKernel", ..., "moe::dev::finalize::run"
bool parse_kernel(std::string const& name, Kernel* out); // by kernel_name

/// The CTA budget the released code hard-codes (148 SMs x 8), as moefin's kPublishedCtaBudget.
inline constexpr int kReleasedCtaBudget = 1184;

/// The launch a released entry makes for a shape. For kDispatch: the kernel the released rule
/// selects and its geometry (the launch itself is the released run()'s).
struct LaunchPlan {
  Kernel requested = Kernel::kDispatch;
  Kernel kernel = Kernel::kScalar; // what runs (never kDispatch)
  int grid_x = 0, grid_y = 0;
  int block_x = 0, block_y = 0;
  int unroll = 1;  // TopKUnrollFactor of the KernelParams instantiation (4, 2 or 1 by top-K)
  int k_split = 1; // small batch: thread groups over top-K (blockDim.y)
  std::int64_t ctas() const { return static_cast<std::int64_t>(grid_x) * grid_y; }
};

/// The released host rule and geometry for `p`; InputError (naming the entry, the field and what
/// the released kernel supports) for shapes it cannot run. Host only.
LaunchPlan plan(FinalizeParams const& p, Kernel k);

struct Options {
  Kernel kernel = Kernel::kDispatch;
  bool pdl = true; // the programmatic-serialization attribute and the UsePdl instantiation
};

/// Device pointers in the layouts finalizeDeepSeekKernel reads and writes (see DeepseekLayout).
struct DeepseekScales {
  std::int32_t const* total_padded_rows = nullptr; // [1]: p.num_rows
  float const* in_by_block = nullptr;              // [ceil(Hp/128)][num_rows]
  float* out_by_block = nullptr;                   // [ceil(H/128)][num_tokens]
};

class DeepseekLayout;

/// Launches the entry on `stream` (capturable in a CUDA graph) and checks the launch.
/// kDeepseekFp8 needs `deepseek` (the released layouts of p's scales); the others ignore it.
/// Output: bf16 [T, H] in p.out; for kDeepseekFp8 see DeepseekLayout.
void run(FinalizeParams const& p, Options const& o, Stream stream,
         DeepseekLayout const* deepseek = nullptr);

/// Device buffers in the layouts finalizeDeepSeekKernel reads and writes: the padded row count
/// as an int32 in device memory, p.in_scales transposed to [ceil(Hp/128)][num_rows], and the
/// output scales [ceil(H/128)][T]. The kernel writes out[t, h] = bf16(sum / s) with
/// s = amax / 448 over the (token, 128-column block); store_scales() writes s into p.out_scales
/// as moefin's [T][ceil(H/128)], so out * scale is the sum as for moefin's deepseek_fp8.
class DeepseekLayout {
public:
  /// Allocates and fills the copies from p (device pointers) on `stream`.
  DeepseekLayout(FinalizeParams const& p, Stream stream);
  ~DeepseekLayout();
  DeepseekLayout(DeepseekLayout const&) = delete;
  DeepseekLayout& operator=(DeepseekLayout const&) = delete;

  DeepseekScales scales() const { return {rows_, in_scales_, out_scales_}; }
  /// Whether the copies were made for p's shape (tokens, rows, scale blocks).
  bool fits(FinalizeParams const& p) const;
  /// Fills the released output scales with 0xff bytes (NaN), so an unwritten one is seen.
  void poison_out_scales(Stream stream) const;
  /// Copies the released output scales into p.out_scales ([T][ceil(H/128)]) on `stream`.
  void store_scales(FinalizeParams const& p, Stream stream) const;

private:
  std::int32_t* rows_ = nullptr;
  float* in_scales_ = nullptr;
  float* out_scales_ = nullptr;
  std::int64_t tokens_ = 0, blocks_ = 0, rows_count_ = 0, in_blocks_ = 0;
};

} // namespace moefin::external::flashinfer
