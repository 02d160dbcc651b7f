#include "audit/tools.hpp"

#include "audit/process.hpp"
#include "core/ops/errors.hpp"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <unistd.h>

namespace fs = std::filesystem;

namespace moefin::audit {

namespace {

bool executable(fs::path const& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0;
}

std::string in_path(std::string const& name) {
  char const* path = std::getenv("PATH");
  if (!path)
    return {};
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':'))
    if (!dir.empty() && executable(fs::path(dir) / name))
      return fs::absolute(fs::path(dir) / name).string();
  return {};
}

constexpr char const* kSetup = "run scripts/fetch_released.sh (scripts/setup.sh calls it) to "
                               "install the pinned nvidia-cuda-cuobjdump and "
                               "nvidia-cuda-nvdisasm wheels into .deps/tools/bin";

} // namespace

Tools find_tools(std::string const& dir, std::string const& source_dir) {
  auto both_in = [](fs::path const& d, Tools& t) {
    if (executable(d / "cuobjdump") && executable(d / "nvdisasm")) {
      t.cuobjdump = fs::absolute(d / "cuobjdump").string();
      t.nvdisasm = fs::absolute(d / "nvdisasm").string();
      return true;
    }
    return false;
  };
  auto missing_in = [](fs::path const& d) {
    std::string m;
    for (char const* n : {"cuobjdump", "nvdisasm"})
      if (!executable(d / n))
        m += std::string(m.empty() ? "" : " and ") + n;
    return m;
  };
  Tools t;
  if (!dir.empty()) {
    if (!both_in(dir, t))
      throw FileError(dir, "--tools: no executable " + missing_in(dir) + " here; " + kSetup);
    t.where = "--tools " + dir;
    return t;
  }
  if (char const* env = std::getenv("MOEFIN_TOOLS"); env && *env) {
    if (!both_in(env, t))
      throw FileError(env, "$MOEFIN_TOOLS: no executable " + missing_in(env) + " here; " + kSetup);
    t.where = std::string("$MOEFIN_TOOLS ") + env;
    return t;
  }
  fs::path const deps = fs::path(source_dir) / ".deps" / "tools" / "bin";
  if (!source_dir.empty() && both_in(deps, t)) {
    t.where = deps.string();
    return t;
  }
  t.cuobjdump = in_path("cuobjdump");
  t.nvdisasm = in_path("nvdisasm");
  for (char const* n : {"cuobjdump", "nvdisasm"}) {
    std::string& slot = std::string(n) == "cuobjdump" ? t.cuobjdump : t.nvdisasm;
    if (slot.empty() && executable(fs::path("/usr/local/cuda/bin") / n))
      slot = (fs::path("/usr/local/cuda/bin") / n).string();
  }
  if (t.cuobjdump.empty() || t.nvdisasm.empty()) {
    std::string const what = t.cuobjdump.empty() && t.nvdisasm.empty() ? "cuobjdump and nvdisasm"
                             : t.cuobjdump.empty()                     ? "cuobjdump"
                                                                       : "nvdisasm";
    throw FileError(what, "not found (looked in --tools, $MOEFIN_TOOLS, " + deps.string() +
                              ", PATH, /usr/local/cuda/bin); " + kSetup);
  }
  t.where = "the CUDA install (PATH)";
  return t;
}

std::string find_nvcc() {
  if (char const* env = std::getenv("CUDACXX"); env && *env && executable(env))
    return env;
  std::string p = in_path("nvcc");
  if (p.empty() && executable("/usr/local/cuda/bin/nvcc"))
    p = "/usr/local/cuda/bin/nvcc";
  if (p.empty())
    throw FileError("nvcc", "not found ($CUDACXX, PATH, /usr/local/cuda/bin): .cu inputs need it");
  return p;
}

std::string tool_version(std::string const& path) {
  ProcessResult const r = run_process({path, "--version"});
  if (r.status != 0)
    return {};
  std::string last, line;
  std::stringstream ss(r.out);
  while (std::getline(ss, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos)
      last = line;
  return last;
}

} // namespace moefin::audit
