#include "reference/permute.hpp"

#include "core/bf16.hpp"
#include "core/ops/errors.hpp"

#include <Kokkos_Core.hpp>

#include <string>

namespace moefin::reference {

void permute(permute::PermuteParams const& p) {
  auto require = [](bool ok, std::string const& what) {
    if (!ok)
      throw InputError("permute params: " + what);
  };
  require(p.hidden_states && p.permuted_to_token && p.total_padded_rows && p.permuted,
          "a pointer is null");
  require(p.num_tokens >= 1 && p.hidden >= 1, "num_tokens and hidden must be >= 1");
  std::int64_t const rows = *p.total_padded_rows;
  require(rows >= 0 && rows <= p.max_rows, "total_padded_rows " + std::to_string(rows) +
                                               " outside [0, max_rows " +
                                               std::to_string(p.max_rows) + "]");
  for (std::int64_t r = 0; r < rows; ++r)
    require(p.permuted_to_token[r] >= -1 && p.permuted_to_token[r] < p.num_tokens,
            "permuted_to_token[" + std::to_string(r) +
                "] = " + std::to_string(p.permuted_to_token[r]) + " outside [-1, num_tokens)");

  auto const* in = static_cast<bf16_bits const*>(p.hidden_states);
  auto* out = static_cast<bf16_bits*>(p.permuted);
  std::int64_t const H = p.hidden;
  Kokkos::parallel_for(
      "ref::permute",
      Kokkos::MDRangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::Rank<2>>({0, 0}, {rows, H}),
      [=](std::int64_t r, std::int64_t h) {
        std::int32_t const t = p.permuted_to_token[r];
        out[r * H + h] = t < 0 ? bf16_bits{0} : in[t * H + h];
      });
  Kokkos::fence();
}

} // namespace moefin::reference
