#pragma once
// What `cuobjdump -elf` says about a cubin's kernels: the parameter list (EIATTR_KPARAM_INFO:
// ordinal, offset, size), where the parameter block sits in constant bank 0
// (EIATTR_PARAM_CBANK: 0x210 on sm_90, 0x380 on sm_100), the thread limits and the contents of
// constant bank 2 (jump tables of indirect branches).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moefin::audit {

struct ParamInfo {
  int ordinal = 0;
  std::uint32_t offset = 0; // into the parameter block
  std::uint32_t size = 0;
};

struct ElfKernelInfo {
  std::vector<ParamInfo> params; // ascending ordinal
  bool has_param_base = false;
  std::uint32_t param_base = 0;           // c[0x0] offset of parameter byte 0
  std::uint32_t param_size = 0;           // bytes of the parameter block
  std::vector<std::uint32_t> max_threads; // .maxntid (x, y, z), empty when absent
  std::vector<std::uint32_t> req_threads; // .reqntid (x, y, z), empty when absent
  std::vector<std::uint32_t> constant2;   // words of .nv.constant2.<kernel>
};

struct ElfInfo {
  int sm = 0;          // "sm=90" in the header
  std::string toolkit; // "toolkit=13.0"
  std::map<std::string, ElfKernelInfo> kernels;
};

/// Parses `cuobjdump -elf` text of one cubin. Throws FileError naming `origin` when it is not.
ElfInfo parse_elf_info(std::string const& text, std::string const& origin);

/// Reads the same from the cubin's bytes (the .nv.info.<kernel> attribute records and the
/// .nv.constant2.<kernel> sections of the ELF), without cuobjdump (which rejects some sm_103a
/// cubins of the released wheel as "Invalid ELF" while nvdisasm reads them). Throws FileError
/// naming `origin` when the bytes are not a CUDA ELF.
ElfInfo read_elf_info(std::string const& bytes, std::string const& origin);

} // namespace moefin::audit
