#pragma once
// How the e2m1 values of 4-bit weights (core/fp4.hpp) are stored: the layouts' names, which the
// GEMM params name (decode_gemm_params.hpp). The bit permutation itself is fp4::pack_word in
// core/fp4.hpp. Header-only, no CUDA.

#include "core/ops/scale_layout.hpp"

#include <cstdint>
#include <optional>
#include <string_view>

namespace moefin::fp4 {

enum class ValueLayout : std::int32_t {
  kNibbles = 0, // two values per byte, the lower k in the low nibble (NVFP4's order)
  kPacked = 1,  // the same 32-bit words, each one's bits permuted by fp4::pack_word
  kTiles = 2,   // packed words, their 16-byte chunks in the decode GEMM's warp-stage tiles
                // (fp4::value_chunk_offset): every warp-stage's 2 KiB contiguous
};

/// Whether `l` is one of the layouts above (a cast integer need not be).
constexpr bool known_value_layout(ValueLayout l) {
  return l == ValueLayout::kNibbles || l == ValueLayout::kPacked || l == ValueLayout::kTiles;
}

inline char const* value_layout_name(ValueLayout l) {
  return l == ValueLayout::kNibbles  ? "nibbles"
         : l == ValueLayout::kPacked ? "packed"
         : l == ValueLayout::kTiles  ? "tiles"
                                     : "?";
}

/// The layout value_layout_name calls `name`; nullopt for any other name.
inline std::optional<ValueLayout> value_layout_from_name(std::string_view name) {
  for (ValueLayout l : {ValueLayout::kNibbles, ValueLayout::kPacked, ValueLayout::kTiles})
    if (name == value_layout_name(l))
      return l;
  return std::nullopt;
}

/// The chain's value layout for fp4 weights whose scales lie in `scales`: packed words in
/// warp-stage tiles with tiled scales (the tiles kernel reads both, launched wide; the same output
/// bits, a faster GEMM), nibbles with row-major ones (the only layout their kernel reads).
inline ValueLayout chain_value_layout(ScaleLayout scales) {
  return scales == ScaleLayout::kTiled ? ValueLayout::kTiles : ValueLayout::kNibbles;
}

/// Whether values in `values` are packed words (kPacked, kTiles: fp4::pack_word's bits).
constexpr bool packed_words(ValueLayout values) {
  return values == ValueLayout::kPacked || values == ValueLayout::kTiles;
}

/// Whether the chain launches its fp4 GEMMs wide (gemm::DecodeOptions::wide: two warp-stages per
/// pipeline stage, the same output bits) on values that lie in `values`: where they are packed
/// words, the layouts the wide kernel reads (a 10% shorter fp4 layer on the H200 at tile 16,
/// docs/design/decode-gemm.md, "Two warp-stages a stage"); kTiles is read by the wide kernel only.
inline bool chain_wide_gemms(ValueLayout values) {
  return packed_words(values);
}

} // namespace moefin::fp4
