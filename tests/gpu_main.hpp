#pragma once
// main() of gpu-labelled test executables: without a usable CUDA device they print why and exit
// 77, which CTest reports as "Skipped" (SKIP_RETURN_CODE), never as passed.
// Include once, in the test file, instead of defining BOOST_TEST_MODULE. A test that needs more
// than a device defines MOEFIN_GPU_TEST_SKIP_REASON() before including this: an expression giving
// a std::string, non-empty when the test cannot run (it is then skipped the same way).

#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include "core/device_info.hpp"

#include <cstdio>
#include <string>

bool init_unit_test() {
  return true;
}

int main(int argc, char* argv[]) {
#ifdef MOEFIN_GPU_TEST_SKIP_REASON
  if (std::string const why = MOEFIN_GPU_TEST_SKIP_REASON(); !why.empty()) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 77;
  }
#endif
  moefin::DeviceInfo const d = moefin::query_device();
  if (!d.present) {
    std::printf("SKIPPED: no CUDA device (%s); this gpu-labelled test needs one\n",
                d.reason.c_str());
    return 77;
  }
  std::printf("running on %s (%s, %d SMs)\n", d.name.c_str(), d.arch().c_str(), d.sm_count);
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
