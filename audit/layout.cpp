#include "audit/layout.hpp"

#include "audit/text.hpp"
#include "core/ops/errors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace moefin::audit {

namespace {

using Json = nlohmann::json;

bool parse_number(std::string const& s, std::uint64_t* out) {
  if (s.empty())
    return false;
  char* end = nullptr;
  errno = 0;
  if (s[0] == '-') {
    long long const v = std::strtoll(s.c_str(), &end, 0);
    if (*end || errno)
      return false;
    *out = static_cast<std::uint64_t>(v);
    return true;
  }
  unsigned long long const v = std::strtoull(s.c_str(), &end, 0);
  if (*end || errno)
    return false;
  *out = v;
  return true;
}

} // namespace

void load_layout(std::string const& path, Layout& into) {
  std::ifstream in(path);
  if (!in)
    throw FileError(path, "cannot read the layout file");
  std::stringstream ss;
  ss << in.rdbuf();
  Json j;
  try {
    j = Json::parse(ss.str());
  } catch (Json::exception const& e) {
    std::string w = e.what();
    std::size_t const p = w.find("] ");
    throw FileError(path, "not JSON: " + (p == std::string::npos ? w : w.substr(p + 2)));
  }
  auto fail = [&](std::string const& ptr, std::string const& what) {
    throw FileError(path, ptr + ": " + what);
  };
  if (!j.is_object())
    fail("/", "a layout is a JSON object with 'structs' and 'kernels'");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "structs" && it.key() != "kernels" && it.key() != "source")
      fail("/" + it.key(), "unknown key (allowed: source, structs, kernels)");
  if (!j.contains("structs") || !j["structs"].is_object())
    fail("/structs", "missing or not an object");
  for (auto it = j["structs"].begin(); it != j["structs"].end(); ++it) {
    std::string const ptr = "/structs/" + it.key();
    Json const& s = it.value();
    if (!s.is_object() || !s.contains("fields") || !s["fields"].is_array())
      fail(ptr, "a struct is {\"size\": N, \"fields\": [...]}");
    LayoutStruct st;
    if (s.contains("size")) {
      if (!s["size"].is_number_unsigned())
        fail(ptr + "/size", "not a non-negative integer");
      st.size = s["size"].get<std::uint32_t>();
    }
    for (std::size_t i = 0; i < s["fields"].size(); ++i) {
      Json const& f = s["fields"][i];
      std::string const fp = ptr + "/fields/" + std::to_string(i);
      if (!f.is_object() || !f.contains("name") || !f["name"].is_string() ||
          !f.contains("offset") || !f["offset"].is_number_unsigned() || !f.contains("size") ||
          !f["size"].is_number_unsigned())
        fail(fp, "a field is {\"name\": string, \"offset\": N, \"size\": N}");
      st.fields.push_back({f["name"].get<std::string>(), f["offset"].get<std::uint32_t>(),
                           f["size"].get<std::uint32_t>()});
    }
    std::sort(st.fields.begin(), st.fields.end(),
              [](LayoutField const& a, LayoutField const& b) { return a.offset < b.offset; });
    into.structs[it.key()] = st;
  }
  if (j.contains("kernels")) {
    if (!j["kernels"].is_array())
      fail("/kernels", "not an array");
    for (std::size_t i = 0; i < j["kernels"].size(); ++i) {
      Json const& k = j["kernels"][i];
      std::string const kp = "/kernels/" + std::to_string(i);
      if (!k.is_object() || !k.contains("match") || !k["match"].is_string() ||
          !k.contains("params") || !k["params"].is_array())
        fail(kp, "a kernel entry is {\"match\": string, \"params\": [{\"name\", \"type\"}...]}");
      LayoutKernel lk;
      lk.match = k["match"].get<std::string>();
      for (std::size_t p = 0; p < k["params"].size(); ++p) {
        Json const& q = k["params"][p];
        std::string const pp = kp + "/params/" + std::to_string(p);
        if (!q.is_object() || !q.contains("name") || !q["name"].is_string() ||
            !q.contains("type") || !q["type"].is_string())
          fail(pp, "a parameter is {\"name\": string, \"type\": struct name}");
        std::string const type = q["type"].get<std::string>();
        if (!into.structs.count(type))
          fail(pp + "/type", "unknown struct '" + type + "'");
        lk.params.emplace_back(q["name"].get<std::string>(), type);
      }
      into.kernels.push_back(lk);
    }
  }
  into.origins.push_back(path);
}

ParamNames::ParamNames(std::string const& kernel, std::vector<ParamInfo> const& params,
                       Layout const* layout) {
  if (layout)
    for (LayoutKernel const& k : layout->kernels)
      if (k.match.empty() || k.match == "*" || kernel.find(k.match) != std::string::npos) {
        layout_kernel_ = &k;
        break;
      }
  for (ParamInfo const& p : params) {
    std::size_t const ord = static_cast<std::size_t>(p.ordinal);
    LayoutStruct const* st_ptr = nullptr;
    if (layout_kernel_ && ord < layout_kernel_->params.size()) {
      st_ptr = &layout->structs.at(layout_kernel_->params[ord].second);
      // A struct whose fields end past the parameter is not this parameter's type (trailing
      // padding may differ between compilers, so only the fields count).
      std::uint32_t end = 0;
      for (LayoutField const& f : st_ptr->fields)
        end = std::max(end, f.offset + f.size);
      if (end > p.size)
        st_ptr = nullptr;
    }
    if (st_ptr) {
      auto const& pname = layout_kernel_->params[ord].first;
      LayoutStruct const& st = *st_ptr;
      std::string const prefix = pname.empty() ? "" : pname + ".";
      bool any = false;
      for (LayoutField const& f : st.fields) {
        if (f.offset >= p.size)
          continue; // beyond this parameter (a header newer than the binary)
        spans_.push_back({prefix + f.name, p.offset + f.offset, f.size});
        any = true;
      }
      if (!any)
        spans_.push_back(
            {pname.empty() ? "param_" + std::to_string(p.ordinal) : pname, p.offset, p.size});
    } else {
      spans_.push_back({"param_" + std::to_string(p.ordinal), p.offset, p.size});
    }
  }
  std::sort(spans_.begin(), spans_.end(),
            [](Span const& a, Span const& b) { return a.offset < b.offset; });
}

std::string ParamNames::name(std::uint32_t offset) const {
  for (Span const& s : spans_)
    if (offset >= s.offset && offset < s.offset + std::max<std::uint32_t>(s.size, 1))
      return offset == s.offset ? s.name : s.name + "+" + hex(offset - s.offset);
  return "+" + hex(offset);
}

bool ParamNames::resolve(std::string const& text, std::uint32_t* offset,
                         std::uint32_t* size) const {
  std::string name = text;
  std::uint32_t forced = 0;
  std::size_t const colon = name.rfind(':');
  if (colon != std::string::npos) {
    std::uint64_t v = 0;
    if (!parse_number(name.substr(colon + 1), &v) || v == 0 || v > 8)
      return false;
    forced = static_cast<std::uint32_t>(v);
    name = name.substr(0, colon);
  }
  std::uint32_t extra = 0;
  std::string base = name;
  std::size_t const plus = name.find('+', 1);
  if (plus != std::string::npos) {
    std::uint64_t v = 0;
    if (!parse_number(name.substr(plus + 1), &v))
      return false;
    extra = static_cast<std::uint32_t>(v);
    base = name.substr(0, plus);
  }
  std::uint64_t absolute = 0;
  std::string const digits = !base.empty() && base[0] == '+' ? base.substr(1) : base;
  if (parse_number(digits, &absolute) && (digits.rfind("0x", 0) == 0 || base[0] == '+' ||
                                          std::isdigit(static_cast<unsigned char>(digits[0])))) {
    *offset = static_cast<std::uint32_t>(absolute) + extra;
    *size = forced ? forced : 4;
    return true;
  }
  for (Span const& s : spans_)
    if (s.name == base) {
      *offset = s.offset + extra;
      *size = forced ? forced : (extra ? 4 : std::min<std::uint32_t>(s.size, 8));
      return *size > 0;
    }
  return false;
}

AssumeItem parse_assume(std::string const& text, std::string const& flag) {
  std::size_t const eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw InputError(flag + ": '" + text +
                     "' is not NAME=VALUE (NAME a parameter field, param_N[+0xK] or an offset "
                     "like 0x60; VALUE an integer, true or false)");
  AssumeItem a;
  a.text = text;
  a.name = text.substr(0, eq);
  std::string const v = text.substr(eq + 1);
  if (v == "true" || v == "on")
    a.value = 1;
  else if (v == "false" || v == "off")
    a.value = 0;
  else if (!parse_number(v, &a.value))
    throw InputError(flag + ": '" + text + "': value '" + v +
                     "' is not an integer (decimal, 0x hex), true or false");
  return a;
}

bool apply_assume(AssumeItem const& a, ParamNames const& names, std::vector<std::int16_t>& known) {
  std::uint32_t off = 0, size = 0;
  if (!names.resolve(a.name, &off, &size))
    return false;
  if (known.size() < off + size)
    known.resize(off + size, -1);
  for (std::uint32_t i = 0; i < size; ++i)
    known[off + i] = static_cast<std::int16_t>((a.value >> (8 * i)) & 0xffu);
  return true;
}

} // namespace moefin::audit
