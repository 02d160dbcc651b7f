#include "reference/kokkos_env.hpp"

#include <Kokkos_Core.hpp>

namespace moefin::reference {

KokkosSession::KokkosSession() {
  if (!Kokkos::is_initialized()) {
    Kokkos::InitArguments args;
    args.disable_warnings = true;
    Kokkos::initialize(args);
    owner_ = true;
  }
}

KokkosSession::~KokkosSession() {
  if (owner_)
    Kokkos::finalize();
}

std::string kokkos_version() {
  int const v = KOKKOS_VERSION;
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

std::string kokkos_backend() {
  return Kokkos::DefaultHostExecutionSpace::name();
}

} // namespace moefin::reference
