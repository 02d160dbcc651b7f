#pragma once
// Where the scales of 4-bit weights (core/fp4.hpp) are stored: the layouts' names and tile
// sizes, which the GEMM params name (decode_gemm_params.hpp). The offsets are
// fp4::scale_offset in core/fp4.hpp. Header-only, no CUDA.

#include <cstdint>
#include <optional>
#include <string_view>

namespace moefin::fp4 {

enum class ScaleLayout : std::int32_t {
  kRowMajor = 0,
  kTiled = 1,
};

inline constexpr int kTileRows = 16;   // rows of a kTiled tile
inline constexpr int kTileK = 128;     // k of a kTiled tile
inline constexpr int kTileBytes = 128; // kTileRows * kTileK / 16: a byte per 16 k

inline char const* scale_layout_name(ScaleLayout l) {
  return l == ScaleLayout::kRowMajor ? "rowmajor" : l == ScaleLayout::kTiled ? "tiled" : "?";
}

/// The layout scale_layout_name calls `name`; nullopt for any other name.
inline std::optional<ScaleLayout> scale_layout_from_name(std::string_view name) {
  for (ScaleLayout l : {ScaleLayout::kRowMajor, ScaleLayout::kTiled})
    if (name == scale_layout_name(l))
      return l;
  return std::nullopt;
}

} // namespace moefin::fp4
