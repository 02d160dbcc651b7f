// Provenance: the root attributes every result file carries (build, command line, seed, date,
// host and GPU).
#include "core/store/h5store.hpp"

#include "core/build_info.hpp"
#include "core/device_info.hpp"

#include <unistd.h>

#include <ctime>

namespace moefin::h5 {

namespace {

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0)
    return "unknown";
  return buf;
}

std::string g_command_line = "(not recorded)";

} // namespace

std::string utc_now() {
  std::time_t const t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void set_command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i)
      s += ' ';
    std::string a = argv[i];
    if (a.find_first_of(" \t\"'") != std::string::npos)
      a = "'" + a + "'";
    s += a;
  }
  g_command_line = s;
}

std::string const& command_line() {
  return g_command_line;
}

Provenance collect_provenance(std::uint64_t seed) {
  BuildInfo const& b = build_info();
  DeviceInfo const d = query_device();
  Provenance p;
  p["moefin_schema"] = kSchema;
  p["moefin_version"] = b.version;
  p["git_commit"] = b.git_commit;
  p["command_line"] = command_line();
  p["seed"] = std::to_string(seed);
  p["date_utc"] = utc_now();
  p["host"] = host_name();
  p["compiler"] = b.cxx_compiler;
  p["cuda_compiler_version"] = b.cuda_version;
  p["cuda_architectures"] = b.cuda_architectures;
  p["kokkos_version"] = b.kokkos_version;
  p["hdf5_version"] = b.hdf5_version;
  p["build_type"] = b.build_type;
  p["gpu_name"] = d.present ? d.name : "none";
  p["compute_capability"] = d.compute_capability();
  p["arch"] = d.arch();
  p["sm_count"] = d.present ? std::to_string(d.sm_count) : "none";
  p["l2_bytes"] = d.present ? std::to_string(d.l2_bytes) : "none";
  p["max_sm_clock_mhz"] = d.present ? std::to_string(d.max_sm_clock_khz / 1000) : "none";
  p["max_mem_clock_mhz"] = d.present ? std::to_string(d.max_mem_clock_khz / 1000) : "none";
  p["driver_version"] = d.present ? cuda_version_string(d.driver_version) : "none";
  p["cuda_runtime_version"] = d.present ? cuda_version_string(d.runtime_version) : "none";
  p["gpu_note"] = d.present ? "" : d.reason;
  return p;
}

} // namespace moefin::h5
