// moefin info: the build (commit, compilers, libraries) and the GPU, or why there is none.

#include "core/build_info.hpp"
#include "core/device_info.hpp"
#include "experiments/commands.hpp"
#include "reference/kokkos_env.hpp"

#include <H5public.h>

#include <iostream>

#ifdef MOEFIN_HAVE_CUDA
#include "kernels/common/smoke.hpp"
#endif

namespace moefin::cmd {

int info(cli::Args const& args) {
  cli::po::options_description desc("info options");
  desc.add_options()("check", "also run a device round trip (PDL producer/consumer) and verify "
                              "it; exits 1 when there is no usable GPU (to gate GPU jobs)");
  cli::po::variables_map vm;
  if (!cli::parse("info", "[--check]", desc, args, vm))
    return kExitOk;

  BuildInfo const& b = build_info();
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  std::cout << "moefin " << b.version << "\n"
            << "  git commit      " << b.git_commit << "\n"
            << "  build type      " << b.build_type << "\n"
            << "  C++ compiler    " << b.cxx_compiler << "\n"
            << "  CUDA (nvcc)     " << b.cuda_version << ", architectures "
            << (b.cuda_architectures[0] ? b.cuda_architectures : "none") << "\n"
            << "  Kokkos          " << reference::kokkos_version() << ", backend "
            << reference::kokkos_backend() << "\n"
            << "  HDF5            " << maj << "." << min << "." << rel << " (built against "
            << b.hdf5_version << ")\n"
            << "  Boost           " << b.boost_version << "\n";

  DeviceInfo const d = query_device();
  if (!d.present) {
    std::cout << "GPU: no CUDA device (" << d.reason << ")\n";
    if (vm.count("check")) {
      std::cout << "device check: FAILED, no usable GPU (" << d.reason << ")\n";
      return kExitFailure;
    }
    return kExitOk;
  }
  std::cout << "GPU 0: " << d.name << "\n"
            << "  compute capability " << d.compute_capability() << " (" << d.arch() << ")\n"
            << "  SMs             " << d.sm_count << "\n"
            << "  L2              " << d.l2_bytes / (1024 * 1024) << " MiB (" << d.l2_bytes
            << " bytes)\n"
            << "  memory          " << d.global_mem_bytes / (1024 * 1024 * 1024) << " GiB\n"
            << "  max clocks      SM " << d.max_sm_clock_khz / 1000 << " MHz, memory "
            << d.max_mem_clock_khz / 1000 << " MHz\n"
            << "  driver          CUDA " << cuda_version_string(d.driver_version) << ", runtime "
            << cuda_version_string(d.runtime_version) << "\n"
            << "  PCI bus         " << d.pci_bus_id << "\n";
#ifdef MOEFIN_HAVE_CUDA
  if (vm.count("check")) {
    std::string detail;
    bool const ok = run_device_smoke(&detail);
    std::cout << "device check: " << (ok ? "ok, " : "FAILED, ") << detail << "\n";
    return ok ? kExitOk : kExitFailure;
  }
#else
  if (vm.count("check")) {
    std::cout << "device check: FAILED, this moefin was built without CUDA\n";
    return kExitFailure;
  }
#endif
  return kExitOk;
}

} // namespace moefin::cmd
