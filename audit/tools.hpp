#pragma once
// Where the audit finds cuobjdump and nvdisasm (pinned PyPI wheels unpacked by
// scripts/fetch_released.sh into .deps/tools/bin, or a CUDA install that has them) and nvcc.

#include <string>

namespace moefin::audit {

struct Tools {
  std::string cuobjdump; // absolute paths
  std::string nvdisasm;
  std::string where; // which search step found them, for messages
};

/// Search order: `dir` (--tools), $MOEFIN_TOOLS, `source_dir`/.deps/tools/bin, then PATH and
/// /usr/local/cuda/bin. A directory named by --tools or $MOEFIN_TOOLS must hold both tools.
/// Throws FileError (exit 1) naming the missing tool, where it looked and the set-up command.
Tools find_tools(std::string const& dir, std::string const& source_dir);

/// nvcc for .cu inputs: $CUDACXX, PATH, /usr/local/cuda/bin. Throws FileError when absent.
std::string find_nvcc();

/// The version line a tool prints (`--version`, last non-empty line), or "" when it fails.
std::string tool_version(std::string const& path);

} // namespace moefin::audit
