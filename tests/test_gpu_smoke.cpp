#include "tests/gpu_main.hpp"

#include "kernels/common/smoke.hpp"

BOOST_AUTO_TEST_CASE(pdl_producer_consumer_round_trip_writes_every_element) {
  std::string detail;
  BOOST_TEST(moefin::run_device_smoke(&detail), detail);
}
