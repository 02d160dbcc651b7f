#pragma once
// Keeps Kokkos headers out of translation units that do not run reference kernels.

#include <string>

namespace moefin::reference {

/// Initializes Kokkos for the lifetime of the object (once per process; nested objects are no-ops).
class KokkosSession {
public:
  KokkosSession();
  ~KokkosSession();
  KokkosSession(KokkosSession const&) = delete;
  KokkosSession& operator=(KokkosSession const&) = delete;

private:
  bool owner_ = false;
};

/// "3.4.1", from KOKKOS_VERSION of the headers compiled in.
std::string kokkos_version();
/// Name of the default host execution space ("Serial" with Debian's package).
std::string kokkos_backend();

} // namespace moefin::reference
