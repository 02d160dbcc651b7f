#include "experiments/finalize/verify.hpp"

#include "core/bf16.hpp"
#include "kernels/finalize/finalize_policy.hpp"
#include "reference/finalize.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace moefin::fin {

namespace {

constexpr std::uint16_t kPoison16 = 0xffff;
constexpr std::uint8_t kPoison8 = 0xff;

/// Position of a finite value on a line where neighbours differ by one: sign-magnitude bits
/// mapped to a monotone integer.
std::int64_t ordered(std::uint32_t bits, std::uint32_t sign_bit) {
  auto const mag = static_cast<std::int64_t>(bits & (sign_bit - 1));
  return (bits & sign_bit) ? -mag : mag;
}

std::string where(std::int64_t i, std::int64_t hidden) {
  return "token " + std::to_string(i / hidden) + " column " + std::to_string(i % hidden);
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

} // namespace

float fp8_e4m3_to_float(std::uint8_t b) {
  int const e = (b >> 3) & 0xf;
  int const m = b & 7;
  float v;
  if (e == 0xf && m == 7)
    v = std::nanf("");
  else if (e == 0)
    v = std::ldexp(static_cast<float>(m), -9);
  else
    v = std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  return (b & 0x80) ? -v : v;
}

Expected expected_of(HostCase const& c, bool with_fp8) {
  Expected e;
  e.tokens = c.shape.tokens;
  e.hidden = c.shape.hidden;
  auto const n = static_cast<std::size_t>(e.tokens * e.hidden);
  e.bf16.assign(n, kPoison16);
  reference::finalize(c.params(e.bf16.data()));
  e.exact = reference::finalize_exact(c.params(nullptr));
  for (double v : e.exact)
    e.peak = std::max(e.peak, std::fabs(v));
  if (with_fp8) {
    std::int64_t const blocks =
        (e.hidden + finalize::Policy::kScaleBlock - 1) / finalize::Policy::kScaleBlock;
    e.fp8.assign(n, kPoison8);
    e.fp8_scales.assign(static_cast<std::size_t>(e.tokens * blocks), std::nanf(""));
    reference::finalize_deepseek_fp8(c.params(e.fp8.data(), e.fp8_scales.data()));
    e.fp8_dequant.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::int64_t const t = static_cast<std::int64_t>(i) / e.hidden;
      std::int64_t const b =
          (static_cast<std::int64_t>(i) % e.hidden) / finalize::Policy::kScaleBlock;
      e.fp8_dequant[i] = static_cast<double>(fp8_e4m3_to_float(e.fp8[i])) *
                         e.fp8_scales[static_cast<std::size_t>(t * blocks + b)];
      e.fp8_peak = std::max(e.fp8_peak, std::fabs(e.fp8_dequant[i]));
    }
  }
  return e;
}

Verdict verify_bf16(std::vector<std::uint16_t> const& got, Expected const& e, double tolerance) {
  Verdict v;
  v.tolerance = tolerance;
  v.peak = e.peak;
  std::int64_t const n = e.tokens * e.hidden;
  if (static_cast<std::int64_t>(got.size()) < n) {
    v.detail =
        "output has " + std::to_string(got.size()) + " elements, expected " + std::to_string(n);
    return v;
  }
  std::int64_t worst = -1, first_bad = -1;
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint16_t const b = got[static_cast<std::size_t>(i)];
    if (b == kPoison16) {
      ++v.unwritten;
      first_bad = first_bad < 0 ? i : first_bad;
      continue;
    }
    float const f = bf16_to_float(b);
    if (std::isnan(f)) {
      ++v.nan;
      first_bad = first_bad < 0 ? i : first_bad;
      continue;
    }
    double const err = std::fabs(static_cast<double>(f) - e.exact[static_cast<std::size_t>(i)]);
    if (err > v.max_abs_err || worst < 0) {
      v.max_abs_err = std::max(v.max_abs_err, err);
      worst = i;
    }
    std::uint16_t const want = e.bf16[static_cast<std::size_t>(i)];
    v.ulp_max =
        std::max<std::int64_t>(v.ulp_max, std::llabs(ordered(b, 0x8000u) - ordered(want, 0x8000u)));
  }
  v.rel_err = v.peak > 0 ? v.max_abs_err / v.peak : v.max_abs_err;
  v.pass = v.unwritten == 0 && v.nan == 0 && v.rel_err <= tolerance;
  if (first_bad >= 0) {
    auto const b = got[static_cast<std::size_t>(first_bad)];
    v.detail = std::string(b == kPoison16 ? "unwritten" : "NaN") + " at " +
               where(first_bad, e.hidden) + " (" + std::to_string(v.unwritten) + " unwritten, " +
               std::to_string(v.nan) + " NaN of " + std::to_string(n) + ")";
  } else if (worst >= 0) {
    auto const i = static_cast<std::size_t>(worst);
    v.detail = "worst at " + where(worst, e.hidden) + ": got " + num(bf16_to_float(got[i])) +
               ", exact " + num(e.exact[i]) + ", reference " + num(bf16_to_float(e.bf16[i])) +
               "; error " + num(v.max_abs_err) + " = " + num(v.rel_err) + " of peak " +
               num(v.peak) + " (tolerance " + num(tolerance) + ")";
  }
  return v;
}

Verdict verify_fp8(std::vector<std::uint8_t> const& got, std::vector<float> const& scales,
                   Expected const& e, double tolerance) {
  Verdict v;
  v.tolerance = tolerance;
  v.peak = e.fp8_peak;
  std::int64_t const n = e.tokens * e.hidden;
  std::int64_t const blocks =
      (e.hidden + finalize::Policy::kScaleBlock - 1) / finalize::Policy::kScaleBlock;
  if (static_cast<std::int64_t>(got.size()) < n ||
      static_cast<std::int64_t>(scales.size()) < e.tokens * blocks || e.fp8.empty()) {
    v.detail = "output or scales too short, or no fp8 reference";
    return v;
  }
  std::int64_t worst = -1, first_bad = -1, bad_scale = -1;
  double worst_scale_err = 0;
  for (std::int64_t s = 0; s < e.tokens * blocks; ++s) {
    float const got_s = scales[static_cast<std::size_t>(s)];
    float const want_s = e.fp8_scales[static_cast<std::size_t>(s)];
    std::uint32_t bits;
    std::memcpy(&bits, &got_s, 4);
    if (bits == 0xffffffffu || std::isnan(got_s)) {
      ++(bits == 0xffffffffu ? v.unwritten : v.nan);
      if (bad_scale < 0)
        bad_scale = s;
      continue;
    }
    // An all-zero block has no defined scale; its elements are compared below.
    if (want_s > 0 && got_s > 0) {
      double const rel = std::fabs(static_cast<double>(got_s) - want_s) / want_s;
      if (rel > worst_scale_err) {
        worst_scale_err = rel;
        if (rel > 1e-5 && bad_scale < 0)
          bad_scale = s;
      }
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint8_t const b = got[static_cast<std::size_t>(i)];
    if (b == kPoison8 || (b & 0x7f) == 0x7f) { // the poison, or the other NaN code
      ++(b == kPoison8 ? v.unwritten : v.nan);
      first_bad = first_bad < 0 ? i : first_bad;
      continue;
    }
    std::int64_t const t = i / e.hidden;
    std::int64_t const blk = (i % e.hidden) / finalize::Policy::kScaleBlock;
    double const deq = static_cast<double>(fp8_e4m3_to_float(b)) *
                       scales[static_cast<std::size_t>(t * blocks + blk)];
    double const err = std::fabs(deq - e.fp8_dequant[static_cast<std::size_t>(i)]);
    if (err > v.max_abs_err || worst < 0) {
      v.max_abs_err = std::max(v.max_abs_err, err);
      worst = i;
    }
    v.ulp_max = std::max<std::int64_t>(
        v.ulp_max,
        std::llabs(ordered(b, 0x80u) - ordered(e.fp8[static_cast<std::size_t>(i)], 0x80u)));
  }
  v.rel_err = v.peak > 0 ? v.max_abs_err / v.peak : v.max_abs_err;
  bool const scales_ok = bad_scale < 0;
  v.pass = v.unwritten == 0 && v.nan == 0 && scales_ok && v.rel_err <= tolerance &&
           v.ulp_max <= kFp8MaxCodeSteps;
  if (first_bad >= 0) {
    v.detail =
        std::string(got[static_cast<std::size_t>(first_bad)] == kPoison8 ? "unwritten" : "NaN") +
        " at " + where(first_bad, e.hidden);
  } else if (!scales_ok) {
    auto const s = static_cast<std::size_t>(bad_scale);
    v.detail = "scale of token " + std::to_string(bad_scale / blocks) + " block " +
               std::to_string(bad_scale % blocks) + ": got " + num(scales[s]) + ", reference " +
               num(e.fp8_scales[s]);
  } else if (worst >= 0) {
    auto const i = static_cast<std::size_t>(worst);
    v.detail = "worst at " + where(worst, e.hidden) + ": code " + std::to_string(got[i]) +
               ", reference code " + std::to_string(e.fp8[i]) + "; dequantized error " +
               num(v.max_abs_err) + " = " + num(v.rel_err) + " of peak " + num(v.peak) +
               ", at most " + std::to_string(v.ulp_max) + " code steps (allowed " +
               std::to_string(kFp8MaxCodeSteps) + ")";
  }
  return v;
}

} // namespace moefin::fin
