// The released finalize kernels launched from moefin: the one place where the adapter's runtime
// choices become instantiations of the released templates.
//
// The released kernels are templates defined inside the released translation unit
// trtllm_fused_moe_dev_kernel.cu (no header declares them), so that file is compiled here, in
// place from the installed package, with FlashInfer's flags (kernels/external/flashinfer/
// CMakeLists.txt); it brings the released host functions (moe::dev::finalize::run, permute,
// activation) along. Every instantiation launched below is one the released run() instantiates
// as well: Type = bf16, TypeExpW = bf16 or fp32, TopKUnrollFactor by top-K, no second input.
#include "fused_moe/trtllm_backend/trtllm_fused_moe_dev_kernel.cu"

#include "kernels/common/cuda_check.hpp"
#include "kernels/external/flashinfer/flashinfer_data.hpp"

#include <climits>
#include <exception>
#include <string>

namespace moefin::external::flashinfer {

namespace {

namespace rel = moe::dev::finalize;

template <class TypeExpW, int kUnroll, bool kPdl>
using Params =
    rel::KernelParams<cutlass::bfloat16_t, TypeExpW, kUnroll, /*UseSecondInput=*/false, kPdl>;

/// The released LAUNCH_PDL's launch: programmatic serialization as asked, not cooperative, the
/// kernel's params from the released setKernelParams.
template <class KernelParams, class Data>
void launch_released(void (*kernel)(KernelParams), dim3 grid, dim3 block, Data const& d, bool pdl,
                     Stream stream) {
  KernelParams const params = KernelParams::setKernelParams(d);
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchAttribute attributes[2] = {};
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  attributes[1].id = cudaLaunchAttributeCooperative;
  attributes[1].val.cooperative = 0;
  config.attrs = attributes;
  config.numAttrs = 2;
  MOEFIN_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, params));
  MOEFIN_CUDA_CHECK_LAUNCH();
}

template <class TypeExpW, int kUnroll, bool kPdl>
void launch_kernel(LaunchPlan const& lp, rel::Data const& d, Stream stream) {
  using P = Params<TypeExpW, kUnroll, kPdl>;
  dim3 const grid(static_cast<unsigned>(lp.grid_x), static_cast<unsigned>(lp.grid_y));
  dim3 const block(static_cast<unsigned>(lp.block_x), static_cast<unsigned>(lp.block_y));
  switch (lp.kernel) {
  case Kernel::kScalar:
    launch_released<P>(rel::finalizeKernel<P>, grid, block, d, kPdl, stream);
    break;
  case Kernel::kVecload:
    launch_released<P>(rel::finalizeKernelVecLoad<P>, grid, block, d, kPdl, stream);
    break;
  case Kernel::kSmallBatch:
    launch_released<P>(rel::finalizeKernelSmallBatch<P>, grid, block, d, kPdl, stream);
    break;
  case Kernel::kDeepseekFp8:
    launch_released<P>(rel::finalizeDeepSeekKernel<P>, grid, block, d, kPdl, stream);
    break;
  default:
    throw InputError(std::string("flashinfer: cannot launch ") + kernel_name(lp.kernel));
  }
}

template <class TypeExpW, bool kPdl>
void unroll_switch(LaunchPlan const& lp, rel::Data const& d, Stream stream) {
  switch (lp.unroll) {
  case 4:
    return launch_kernel<TypeExpW, 4, kPdl>(lp, d, stream);
  case 2:
    return launch_kernel<TypeExpW, 2, kPdl>(lp, d, stream);
  default:
    return launch_kernel<TypeExpW, 1, kPdl>(lp, d, stream);
  }
}

template <class TypeExpW>
void pdl_switch(LaunchPlan const& lp, rel::Data const& d, bool pdl, Stream stream) {
  if (pdl)
    unroll_switch<TypeExpW, true>(lp, d, stream);
  else
    unroll_switch<TypeExpW, false>(lp, d, stream);
}

__global__ void transpose_scales(float const* in, float* out, std::int64_t rows,
                                 std::int64_t cols) {
  // in [rows][cols] -> out [cols][rows]
  std::int64_t const n = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t const r = i / cols, c = i % cols;
    out[c * rows + r] = in[i];
  }
}

__global__ void store_value(std::int32_t* dst, std::int32_t value) {
  *dst = value;
}

void transpose(float const* in, float* out, std::int64_t rows, std::int64_t cols, Stream stream) {
  if (rows * cols == 0)
    return;
  std::int64_t const blocks = std::min<std::int64_t>((rows * cols + 255) / 256, 4096);
  transpose_scales<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(in, out, rows, cols);
  MOEFIN_CUDA_CHECK_LAUNCH();
}

std::int64_t scale_blocks(std::int64_t columns) {
  return (columns + 127) / 128;
}

} // namespace

bool available() {
  return true;
}

std::string const& unavailable_reason() {
  static std::string const none;
  return none;
}

void run(FinalizeParams const& p, Options const& o, Stream stream, DeepseekLayout const* deepseek) {
  LaunchPlan const lp = plan(p, o.kernel);
  if (lp.kernel == Kernel::kDeepseekFp8 && (deepseek == nullptr || !deepseek->fits(p)))
    throw InputError("flashinfer: fi_deepseek_fp8 needs the scales in the released layout, made "
                     "for this shape (DeepseekLayout)");
  DeepseekScales const scales = deepseek ? deepseek->scales() : DeepseekScales{};
  rel::Data const d =
      finalize_data(p, o.pdl, lp.kernel == Kernel::kDeepseekFp8 ? &scales : nullptr);
  if (o.kernel == Kernel::kDispatch) {
    try {
      rel::run(d, stream);
    } catch (std::exception const& e) {
      throw DeviceError(std::string("flashinfer: moe::dev::finalize::run: ") + e.what());
    }
    MOEFIN_CUDA_CHECK_LAUNCH();
    return;
  }
  if (p.weight_type == finalize::WeightType::kFp32)
    pdl_switch<float>(lp, d, o.pdl, stream);
  else
    pdl_switch<cutlass::bfloat16_t>(lp, d, o.pdl, stream);
}

void run_permute(permute::PermuteParams const& p, std::int32_t const* expanded_to_permuted,
                 std::int64_t top_k, bool pdl, Stream stream) {
  if (!p.hidden_states || !p.permuted || !expanded_to_permuted)
    throw InputError("flashinfer: released permute needs hidden_states, permuted and "
                     "expanded_to_permuted (one is null)");
  if (p.num_tokens < 1 || p.hidden < 1 || top_k < 1 || p.num_tokens * top_k > INT_MAX ||
      p.max_rows * p.hidden > INT_MAX)
    throw InputError("flashinfer: released permute needs tokens, hidden, top_k >= 1 and its "
                     "32-bit indices (max_rows * hidden, tokens * top_k) below 2^31");
  auto const d = permute_data(p, expanded_to_permuted, top_k, pdl);
  dim3 const grid(static_cast<unsigned>((p.hidden + 255) / 256),
                  static_cast<unsigned>(std::min<std::int64_t>(8192, p.num_tokens)));
  namespace pm = moe::dev::permute;
  if (pdl)
    launch_released<pm::KernelParams<cutlass::bfloat16_t, true>>(
        pm::permuteKernel<pm::KernelParams<cutlass::bfloat16_t, true>>, grid, dim3(256), d, true,
        stream);
  else
    launch_released<pm::KernelParams<cutlass::bfloat16_t, false>>(
        pm::permuteKernel<pm::KernelParams<cutlass::bfloat16_t, false>>, grid, dim3(256), d, false,
        stream);
}

void run_activation(activation::ActivationParams const& p, std::int32_t const* expanded_to_permuted,
                    std::int64_t num_tokens, std::int64_t top_k, bool pdl, Stream stream) {
  if (p.type != activation::Type::kSwiGlu)
    throw InputError("flashinfer: the released activationKernel computes SwiGLU only (ReLU^2 is "
                     "part of the trtllm-gen GEMM1 epilogue)");
  if (!p.in || !p.out || !expanded_to_permuted)
    throw InputError("flashinfer: released activation needs in, out and expanded_to_permuted "
                     "(one is null)");
  if (p.inter < 64 || num_tokens < 1 || top_k < 1 || top_k > 65535 ||
      p.max_rows * 2 * p.inter > INT_MAX)
    throw InputError("flashinfer: released activation needs inter >= 64 (one CTA per 128 "
                     "columns of its input), tokens >= 1, 1 <= top_k <= 65535 and "
                     "max_rows * 2 * inter below 2^31");
  auto const d = activation_data(p, expanded_to_permuted, num_tokens, top_k, pdl);
  dim3 const grid(static_cast<unsigned>(2 * p.inter / 128), static_cast<unsigned>(top_k),
                  static_cast<unsigned>(std::min<std::int64_t>(8192, num_tokens)));
  namespace ac = moe::dev::activation;
  if (pdl)
    launch_released<ac::KernelParams<cutlass::bfloat16_t, 1, true>>(
        ac::activationKernel<ac::KernelParams<cutlass::bfloat16_t, 1, true>>, grid, dim3(256), d,
        true, stream);
  else
    launch_released<ac::KernelParams<cutlass::bfloat16_t, 1, false>>(
        ac::activationKernel<ac::KernelParams<cutlass::bfloat16_t, 1, false>>, grid, dim3(256), d,
        false, stream);
}

DeepseekLayout::DeepseekLayout(FinalizeParams const& p, Stream stream)
    : tokens_(p.num_tokens), blocks_(scale_blocks(p.hidden)), rows_count_(p.num_rows),
      in_blocks_(scale_blocks(p.hidden_padded)) {
  if (p.in_scales == nullptr || p.out_scales == nullptr)
    throw InputError("flashinfer: DeepseekLayout needs in_scales and out_scales");
  std::int64_t const in_blocks = in_blocks_;
  MOEFIN_CUDA_CHECK(cudaMalloc(&rows_, sizeof(std::int32_t)));
  MOEFIN_CUDA_CHECK(
      cudaMalloc(&in_scales_, sizeof(float) * std::max<std::int64_t>(1, p.num_rows * in_blocks)));
  MOEFIN_CUDA_CHECK(
      cudaMalloc(&out_scales_, sizeof(float) * std::max<std::int64_t>(1, tokens_ * blocks_)));
  store_value<<<1, 1, 0, stream>>>(rows_, static_cast<std::int32_t>(p.num_rows));
  MOEFIN_CUDA_CHECK_LAUNCH();
  transpose(p.in_scales, in_scales_, p.num_rows, in_blocks, stream);
  MOEFIN_CUDA_CHECK(cudaStreamSynchronize(stream));
}

DeepseekLayout::~DeepseekLayout() {
  // No throw from a destructor; a failure here surfaces at the next checked call.
  cudaFree(rows_);
  cudaFree(in_scales_);
  cudaFree(out_scales_);
}

void DeepseekLayout::poison_out_scales(Stream stream) const {
  MOEFIN_CUDA_CHECK(cudaMemsetAsync(out_scales_, 0xff, sizeof(float) * tokens_ * blocks_, stream));
}

bool DeepseekLayout::fits(FinalizeParams const& p) const {
  return p.num_tokens == tokens_ && scale_blocks(p.hidden) == blocks_ &&
         p.num_rows == rows_count_ && scale_blocks(p.hidden_padded) == in_blocks_;
}

void DeepseekLayout::store_scales(FinalizeParams const& p, Stream stream) const {
  if (!fits(p))
    throw InputError("flashinfer: DeepseekLayout was made for another shape");
  transpose(out_scales_, p.out_scales, blocks_, tokens_, stream);
}

} // namespace moefin::external::flashinfer
