#pragma once
// Names for the bytes of a kernel's parameter block: a struct layout file (`--layout`, written
// by tools/audit/struct_layout.py from a header: struct fields with offsets and sizes, and
// which structs the parameters of which kernels have), else the parameter ordinals of the ELF
// parameter info or the PTX parameter list. And the --assume values resolved through them.

#include "audit/elf_info.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moefin::audit {

struct LayoutField {
  std::string name;
  std::uint32_t offset = 0;
  std::uint32_t size = 0;
};

struct LayoutStruct {
  std::uint32_t size = 0;
  std::vector<LayoutField> fields; // ascending offset
};

struct LayoutKernel {
  std::string match; // a substring of the kernel symbol ("" or "*": every kernel)
  std::vector<std::pair<std::string, std::string>> params; // (name, struct) by ordinal
};

struct Layout {
  std::vector<std::string> origins; // the files it came from
  std::map<std::string, LayoutStruct> structs;
  std::vector<LayoutKernel> kernels;
};

/// Reads a layout file and adds it to `into`. Throws FileError naming the file and the JSON
/// path on anything malformed.
void load_layout(std::string const& path, Layout& into);

/// The names of one kernel's parameter bytes.
class ParamNames {
public:
  ParamNames() = default;
  ParamNames(std::string const& kernel, std::vector<ParamInfo> const& params, Layout const* layout);

  /// "k.trigger", "params.ptrRouteMap", "p.buf+0x8", "param_1+0x10", "+0x60".
  std::string name(std::uint32_t offset) const;
  /// The bytes a name stands for: a field, "param_N[+0xK]", "0xOFF", "+0xOFF"; an optional
  /// ":SIZE" suffix sets the size. False when the name means nothing for this kernel.
  bool resolve(std::string const& name, std::uint32_t* offset, std::uint32_t* size) const;
  /// Whether names come from a layout (else from parameter ordinals).
  bool from_layout() const { return layout_kernel_ != nullptr; }

private:
  struct Span {
    std::string name;
    std::uint32_t offset = 0, size = 0;
  };
  std::vector<Span> spans_; // fields and whole parameters, ascending offset
  LayoutKernel const* layout_kernel_ = nullptr;
};

/// One --assume item: NAME=VALUE (VALUE: an integer, true or false).
struct AssumeItem {
  std::string name;
  std::uint64_t value = 0;
  std::string text; // as given
};

/// Parses "NAME=VALUE". Throws InputError naming `flag` when malformed.
AssumeItem parse_assume(std::string const& text, std::string const& flag = "--assume");

/// Writes the assumed bytes into `known` (grown as needed). False when a name means nothing
/// for this kernel (the caller decides whether that is an error).
bool apply_assume(AssumeItem const& a, ParamNames const& names, std::vector<std::int16_t>& known);

} // namespace moefin::audit
