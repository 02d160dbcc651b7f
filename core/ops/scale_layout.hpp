#pragma once
// Where the scales of 4-bit weights (core/fp4.hpp) are stored: the layouts' names and tile
// sizes, which the GEMM params name (decode_gemm_params.hpp). The offsets are
// fp4::scale_offset in core/fp4.hpp. Header-only, no CUDA.

#include <cstdint>

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

} // namespace moefin::fp4
