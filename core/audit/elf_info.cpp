#include "core/audit/elf_info.hpp"

#include "core/audit/text.hpp"
#include "core/errors.hpp"

#include <algorithm>
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

} // namespace moefin::audit
