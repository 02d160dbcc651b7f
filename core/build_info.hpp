#pragma once
// What this binary was built from and with; filled in at build time (cmake/write_build_info.cmake).

namespace moefin {

struct BuildInfo {
  char const* version;
  char const* git_commit; // short hash, "-dirty" when tracked files differed from HEAD
  char const* cxx_compiler;
  char const* cuda_version; // nvcc version, or "none (built without CUDA)"
  char const* cuda_architectures;
  char const* kokkos_version;
  char const* hdf5_version;
  char const* boost_version;
  char const* build_type;
};

BuildInfo const& build_info();

} // namespace moefin
