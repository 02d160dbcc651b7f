#include "experiments/finalize/device_case.hpp"

#include "kernels/finalize/finalize_policy.hpp"

namespace moefin::fin {

DeviceCase::DeviceCase(HostCase const& c) {
  gemm_out.upload(c.inputs.gemm_out);
  perm.upload(c.layout.expanded_to_permuted);
  if (c.shape.weights == finalize::WeightType::kBf16)
    weights.upload(c.r.weights_bf16);
  else if (c.shape.weights == finalize::WeightType::kFp32)
    weights.upload(c.r.weights);
  if (!c.inputs.in_scales.empty())
    in_scales.upload(c.inputs.in_scales);
  std::int64_t const t = c.shape.tokens, h = c.shape.hidden;
  out = dev::Buffer(static_cast<std::size_t>(t * h) * 2);
  std::int64_t const blocks =
      (h + finalize::Policy::kScaleBlock - 1) / finalize::Policy::kScaleBlock;
  out_scales = dev::Buffer(static_cast<std::size_t>(t * blocks) * sizeof(float));

  params = shape_params(c.shape, c.hidden_padded);
  params.num_rows = c.num_rows();
  params.gemm_out = gemm_out.get();
  // A layout with every expert dropped has no rows; the kernels still need a valid pointer.
  if (!params.gemm_out) {
    std::vector<std::uint16_t> const nan(8, 0xffff);
    gemm_out.upload(nan);
    params.gemm_out = gemm_out.get();
  }
  params.expanded_to_permuted = perm.get<std::int32_t const>();
  params.expert_weights = weights.get();
  params.in_scales = in_scales.get<float const>();
  params.out = out.get();
  params.out_scales = out_scales.get<float>();
}

std::vector<std::uint16_t> run_bf16(DeviceCase& d, finalize::Options const& o,
                                    cudaStream_t stream) {
  d.out.fill(0xff, stream);
  finalize::run(d.params, o, stream);
  return d.out.download<std::uint16_t>(stream);
}

Fp8Output run_fp8(DeviceCase& d, finalize::Options const& o, cudaStream_t stream) {
  d.out.fill(0xff, stream);
  d.out_scales.fill(0xff, stream);
  finalize::run(d.params, o, stream);
  Fp8Output r;
  r.q = d.out.download<std::uint8_t>(stream);
  r.q.resize(static_cast<std::size_t>(d.params.num_tokens * d.params.hidden));
  r.scales = d.out_scales.download<float>(stream);
  return r;
}

} // namespace moefin::fin
