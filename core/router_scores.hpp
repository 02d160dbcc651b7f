#pragma once
// Router scores of one randomized routing, from a 64-bit seed. The same integer arithmetic runs on
// the host (tests, the reference chain) and on the device (the chain's score generator), and the
// conversion to float is exact, so a seed names the same scores everywhere.

#include <cstdint>

#if defined(__CUDACC__)
#define MOEFIN_HD __host__ __device__ __forceinline__
#else
#define MOEFIN_HD inline
#endif

namespace moefin {

/// splitmix64's finalizer: a bijective 64-bit mix.
MOEFIN_HD std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// Score of expert x for token t: a multiple of 2^-21 in [-4, 4). 24 random bits, so ties between
/// experts of one token occur (about 1% of tokens at E = 512) and the tie rule is exercised.
MOEFIN_HD float router_score(std::uint64_t seed, std::int64_t t, std::int64_t x,
                             std::int64_t num_experts) {
  std::uint64_t const pos = static_cast<std::uint64_t>(t * num_experts + x);
  std::uint64_t const u = mix64(seed ^ mix64(pos + 0x9e3779b97f4a7c15ULL));
  auto const m = static_cast<std::int32_t>((u >> 40) & 0xffffffu) - (1 << 23);
  return static_cast<float>(m) * 0x1p-21f;
}

} // namespace moefin
