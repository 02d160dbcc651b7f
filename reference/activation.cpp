#include "reference/activation.hpp"

#include "core/bf16.hpp"
#include "core/ops/errors.hpp"

#include <Kokkos_Core.hpp>

#include <cmath>
#include <string>

namespace moefin::reference {

void activation(activation::ActivationParams const& p) {
  auto require = [](bool ok, std::string const& what) {
    if (!ok)
      throw InputError("activation params: " + what);
  };
  require(p.in && p.out && p.total_padded_rows, "a pointer is null");
  require(p.inter >= 1, "inter " + std::to_string(p.inter) + " < 1");
  std::int64_t const rows = *p.total_padded_rows;
  require(rows >= 0 && rows <= p.max_rows, "total_padded_rows " + std::to_string(rows) +
                                               " outside [0, max_rows " +
                                               std::to_string(p.max_rows) + "]");

  auto const* in = static_cast<bf16_bits const*>(p.in);
  auto* out = static_cast<bf16_bits*>(p.out);
  std::int64_t const I = p.inter;
  bool const swiglu = p.type == activation::Type::kSwiGlu;
  std::int64_t const in_cols = swiglu ? 2 * I : I;
  Kokkos::parallel_for(
      swiglu ? "ref::activation::swiglu" : "ref::activation::relu2",
      Kokkos::MDRangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::Rank<2>>({0, 0}, {rows, I}),
      [=](std::int64_t r, std::int64_t j) {
        double const x = bf16_to_float(in[r * in_cols + j]);
        double y;
        if (swiglu) {
          double const up = bf16_to_float(in[r * in_cols + I + j]);
          y = x / (1.0 + std::exp(-x)) * up;
        } else {
          y = x > 0.0 ? x * x : 0.0;
        }
        out[r * I + j] = float_to_bf16(static_cast<float>(y));
      });
  Kokkos::fence();
}

} // namespace moefin::reference
