#include "audit/elf_info.hpp"

#include "audit/text.hpp"
#include "core/ops/errors.hpp"

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <sstream>

namespace moefin::audit {

namespace {

std::vector<std::uint32_t> hex_words(std::string const& s) {
  std::vector<std::uint32_t> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w)
    if (w.rfind("0x", 0) == 0)
      out.push_back(static_cast<std::uint32_t>(std::strtoull(w.c_str() + 2, nullptr, 16)));
  return out;
}

/// The hex number after `key` in `s` ("Offset  : 0x60"), or -1.
long long field(std::string const& s, std::string const& key) {
  std::size_t p = s.find(key);
  if (p == std::string::npos)
    return -1;
  p = s.find("0x", p);
  if (p == std::string::npos)
    return -1;
  return static_cast<long long>(std::strtoull(s.c_str() + p + 2, nullptr, 16));
}

} // namespace

ElfInfo parse_elf_info(std::string const& text, std::string const& origin) {
  ElfInfo info;
  std::istringstream in(text);
  std::string line;
  bool header = false;
  std::string section;   // current section name
  std::string attribute; // current EIATTR
  while (std::getline(in, line)) {
    std::string const t = trim(line);
    if (t.find("ELF: type=") != std::string::npos) {
      header = true;
      std::size_t p = t.find("sm=");
      if (p != std::string::npos)
        info.sm = std::atoi(t.c_str() + p + 3);
      p = t.find("toolkit=");
      if (p != std::string::npos)
        info.toolkit = t.substr(p + 8, t.find(',', p) - p - 8);
      continue;
    }
    if (t.empty())
      continue;
    // A section dump starts with its name on a line of its own at column 0.
    if (line[0] == '.' && t.find(' ') == std::string::npos && t.find('\t') == std::string::npos) {
      section = t;
      attribute.clear();
      continue;
    }
    if (t.rfind(".section", 0) == 0) {
      section = trim(t.substr(8));
      attribute.clear();
      continue;
    }
    if (section.rfind(".nv.info.", 0) == 0) {
      std::string const kernel = section.substr(9);
      ElfKernelInfo& k = info.kernels[kernel];
      if (t.rfind("Attribute:", 0) == 0) {
        attribute = trim(t.substr(10));
        continue;
      }
      if (t.rfind("Value:", 0) != 0)
        continue;
      std::string const v = trim(t.substr(6));
      if (attribute == "EIATTR_KPARAM_INFO" || attribute == "EIATTR_KPARAM_INFO_V2") {
        ParamInfo p;
        p.ordinal = static_cast<int>(field(v, "Ordinal"));
        p.offset = static_cast<std::uint32_t>(field(v, "Offset"));
        p.size = static_cast<std::uint32_t>(field(v, "Size"));
        if (p.ordinal >= 0)
          k.params.push_back(p);
      } else if (attribute == "EIATTR_PARAM_CBANK") {
        auto const w = hex_words(v);
        if (w.size() >= 2) {
          k.has_param_base = true;
          k.param_base = w[1] & 0xffffu;
          k.param_size = w[1] >> 16;
        }
      } else if (attribute == "EIATTR_MAX_THREADS") {
        k.max_threads = hex_words(v);
      } else if (attribute == "EIATTR_REQNTID") {
        k.req_threads = hex_words(v);
      }
      continue;
    }
    if (section.rfind(".nv.constant2.", 0) == 0) {
      auto const w = hex_words(t);
      auto& c2 = info.kernels[section.substr(14)].constant2;
      c2.insert(c2.end(), w.begin(), w.end());
    }
  }
  if (!header)
    throw FileError(origin, "not a CUDA ELF (cuobjdump -elf printed no ELF header)");
  for (auto& [name, k] : info.kernels) {
    std::sort(k.params.begin(), k.params.end(),
              [](ParamInfo const& a, ParamInfo const& b) { return a.ordinal < b.ordinal; });
    k.params.erase(
        std::unique(k.params.begin(), k.params.end(),
                    [](ParamInfo const& a, ParamInfo const& b) { return a.ordinal == b.ordinal; }),
        k.params.end());
  }
  return info;
}

namespace {

template <class T> T load(std::string const& b, std::size_t off, std::string const& origin) {
  if (off + sizeof(T) > b.size())
    throw FileError(origin, "truncated CUDA ELF (offset " + std::to_string(off) + ")");
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

// EIATTR codes of the records the audit reads (the same names cuobjdump -elf prints).
constexpr unsigned char kMaxThreads = 0x05;
constexpr unsigned char kParamCbank = 0x0a;
constexpr unsigned char kKparamInfo = 0x17;
constexpr unsigned char kKparamInfoV2 = 0x45;
// Record formats: NVAL (no value), BVAL (a byte), HVAL (16 bits), SVAL (sized payload).
constexpr unsigned char kNval = 1, kBval = 2, kHval = 3, kSval = 4;

} // namespace

ElfInfo read_elf_info(std::string const& b, std::string const& origin) {
  if (b.size() < 64 || b.compare(0, 4, "\x7f" "ELF") != 0 || b[4] != 2)
    throw FileError(origin, "not a 64-bit ELF");
  if (load<std::uint16_t>(b, 18, origin) != 190)
    throw FileError(origin, "not a CUDA ELF (e_machine is not EM_CUDA)");
  ElfInfo info;
  auto const abi = static_cast<unsigned char>(b[8]);
  auto const flags = load<std::uint32_t>(b, 0x30, origin);
  info.sm = static_cast<int>(abi >= 8 ? (flags >> 8) & 0xffu : flags & 0xffu);
  auto const shoff = load<std::uint64_t>(b, 0x28, origin);
  auto const shentsize = load<std::uint16_t>(b, 0x3a, origin);
  auto const shnum = load<std::uint16_t>(b, 0x3c, origin);
  auto const shstrndx = load<std::uint16_t>(b, 0x3e, origin);
  struct Section {
    std::uint32_t name;
    std::uint64_t off, size;
  };
  std::vector<Section> secs;
  for (std::uint16_t i = 0; i < shnum; ++i) {
    std::size_t const o = shoff + static_cast<std::size_t>(i) * shentsize;
    secs.push_back({load<std::uint32_t>(b, o, origin), load<std::uint64_t>(b, o + 0x18, origin),
                    load<std::uint64_t>(b, o + 0x20, origin)});
  }
  if (shstrndx >= secs.size())
    throw FileError(origin, "CUDA ELF without section names");
  auto name_of = [&](Section const& s) {
    std::size_t const at = secs[shstrndx].off + s.name;
    if (at >= b.size())
      throw FileError(origin, "CUDA ELF section name out of range");
    return std::string(b.c_str() + at);
  };
  for (Section const& s : secs) {
    std::string const n = name_of(s);
    if (s.off + s.size > b.size())
      throw FileError(origin, "CUDA ELF section " + n + " past the end of the file");
    if (n.rfind(".nv.constant2.", 0) == 0) {
      auto& c2 = info.kernels[n.substr(14)].constant2;
      for (std::uint64_t k = 0; k + 4 <= s.size; k += 4)
        c2.push_back(load<std::uint32_t>(b, s.off + k, origin));
      continue;
    }
    if (n.rfind(".nv.info.", 0) != 0)
      continue;
    ElfKernelInfo& k = info.kernels[n.substr(9)];
    std::size_t i = s.off, end = s.off + s.size;
    while (i + 2 <= end) {
      auto const fmt = static_cast<unsigned char>(b[i]);
      auto const attr = static_cast<unsigned char>(b[i + 1]);
      i += 2;
      if (fmt == kNval || fmt == kBval || fmt == kHval) {
        i += 2;
        continue;
      }
      if (fmt != kSval)
        throw FileError(origin, n + ": unknown attribute format " + std::to_string(fmt));
      std::size_t const size = load<std::uint16_t>(b, i, origin);
      i += 2;
      std::size_t const p = i;
      i += size;
      if (i > end)
        throw FileError(origin, n + ": attribute past the section's end");
      if ((attr == kKparamInfo || attr == kKparamInfoV2) && size >= 12) {
        ParamInfo pi;
        pi.ordinal = load<std::uint16_t>(b, p + 4, origin);
        pi.offset = load<std::uint16_t>(b, p + 6, origin);
        std::uint32_t const last = load<std::uint32_t>(b, p + 8, origin);
        pi.size = attr == kKparamInfo ? last >> 18 : last;
        k.params.push_back(pi);
      } else if (attr == kParamCbank && size >= 8) {
        std::uint32_t const v = load<std::uint32_t>(b, p + 4, origin);
        k.has_param_base = true;
        k.param_base = v & 0xffffu;
        k.param_size = v >> 16;
      } else if (attr == kMaxThreads && size >= 12) {
        k.max_threads = {load<std::uint32_t>(b, p, origin), load<std::uint32_t>(b, p + 4, origin),
                         load<std::uint32_t>(b, p + 8, origin)};
      }
    }
  }
  for (auto& [name, k] : info.kernels) {
    std::sort(k.params.begin(), k.params.end(),
              [](ParamInfo const& x, ParamInfo const& y) { return x.ordinal < y.ordinal; });
    k.params.erase(std::unique(k.params.begin(), k.params.end(),
                               [](ParamInfo const& x, ParamInfo const& y) {
                                 return x.ordinal == y.ordinal;
                               }),
                   k.params.end());
  }
  return info;
}

} // namespace moefin::audit
