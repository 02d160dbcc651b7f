#pragma once
// Comparison of a finalize output with the Kokkos reference: what `moefin check finalize` and
// the gpu tests both judge by. Host only.

#include "experiments/finalize/cases.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moefin::fin {

/// Tolerance of bf16 outputs: max |out - exact| relative to the output's peak. The seed saw
/// 3.7e-3 (bf16 rounding of the result: at most 2^-8 of the largest value, 3.9e-3, plus fp32 sums).
constexpr double kBf16Tolerance = 4e-3;
/// Tolerance of E4M3 outputs against the reference's own E4M3 output, dequantized: one code step
/// is at most 1/8 of a value, and kernel and reference may round one element to neighbours.
constexpr double kFp8Tolerance = 0.125;
/// Largest distance, in E4M3 codes, between the kernel's and the reference's element.
constexpr std::int64_t kFp8MaxCodeSteps = 1;

/// What the reference computes for a case.
struct Expected {
  std::int64_t tokens = 0, hidden = 0;
  std::vector<std::uint16_t> bf16; // reference::finalize (fp32 sums, rounded)
  std::vector<double> exact;       // reference::finalize_exact
  double peak = 0;                 // max |exact|
  std::vector<std::uint8_t> fp8;   // reference::finalize_deepseek_fp8, when asked
  std::vector<float> fp8_scales;   // [T, ceil(H / 128)]
  std::vector<double> fp8_dequant; // fp8 * scale
  double fp8_peak = 0;
};

Expected expected_of(HostCase const& c, bool with_fp8);

struct Verdict {
  std::int64_t unwritten = 0; // elements still holding the poison
  std::int64_t nan = 0;       // NaN elements that are not the poison
  std::int64_t ulp_max = 0;   // largest distance in representable steps to the rounded reference
  double max_abs_err = 0, peak = 0, rel_err = 0, tolerance = 0;
  bool pass = false;
  std::string detail; // the worst element, or the first unwritten / NaN one
};

/// `got`: the kernel's bf16 output bits [T, H], after the buffer was poisoned with 0xff bytes.
Verdict verify_bf16(std::vector<std::uint16_t> const& got, Expected const& e,
                    double tolerance = kBf16Tolerance);
/// `got`: E4M3 bytes [T, H]; `scales`: [T, ceil(H / 128)]; both poisoned with 0xff before.
Verdict verify_fp8(std::vector<std::uint8_t> const& got, std::vector<float> const& scales,
                   Expected const& e, double tolerance = kFp8Tolerance);

float fp8_e4m3_to_float(std::uint8_t b);

} // namespace moefin::fin
