#pragma once
// Kokkos for the whole test module: include once in a test file that runs reference kernels.

#include "reference/kokkos_env.hpp"

#include <boost/test/unit_test.hpp>

struct KokkosFixture {
  moefin::reference::KokkosSession session;
};
BOOST_TEST_GLOBAL_FIXTURE(KokkosFixture);
