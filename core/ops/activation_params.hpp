#pragma once
// Activation between the two grouped GEMMs. Shared by the CUDA kernel and the Kokkos reference.
// Header-only, no CUDA.

#include "core/ops/pdl_knobs.hpp"

#include <cstdint>

namespace moefin::activation {

enum class Type : std::int32_t {
  kSwiGlu = 0, // out = silu(gate) * up, gate = in[:, 0:inter], up = in[:, inter:2*inter]
  kRelu2 = 1,  // out = relu(in)^2, in has inter columns
};

inline char const* type_name(Type t) { // "swiglu", "relu2"
  return t == Type::kSwiGlu ? "swiglu" : "relu2";
}

/// Trigger::kDefault of the activation kernel: at entry, then the wait (the seed's kernel).
inline constexpr Trigger kDefaultTrigger = Trigger::kEntry;

struct ActivationParams {
  void const* in = nullptr; // bf16 [max_rows, 2*inter] (SwiGLU) or [max_rows, inter] (ReLU^2)
  void* out = nullptr;      // bf16 [max_rows, inter]
  std::int32_t const* total_padded_rows = nullptr; // [1], written by routing
  std::int64_t max_rows = 0;
  std::int64_t inter = 0;
  Type type = Type::kSwiGlu; // math in fp32, one bf16 rounding at the store
};

} // namespace moefin::activation
