#pragma once
// Kokkos reference of permute (gather hidden states into the permuted order), host execution
// space (implied). Same params as the CUDA kernel (core/ops/permute_params.hpp), host
// pointers; `total_padded_rows` points to a host int.

#include "core/ops/permute_params.hpp"

namespace moefin::reference {

/// permuted[r, :] = hidden_states[permuted_to_token[r], :] for r < *total_padded_rows; padding
/// rows (token -1) are written as zeros; rows [*total_padded_rows, max_rows) are not touched.
/// A bit copy: no arithmetic. Throws InputError for bad sizes or a token index out of range.
void permute(permute::PermuteParams const& p);

} // namespace moefin::reference
