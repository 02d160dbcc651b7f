#include "audit/sass.hpp"

#include "audit/text.hpp"
#include "core/ops/errors.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace moefin::audit {

namespace {

bool parse_int(std::string s, std::int64_t* out) {
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s = s.substr(1);
  }
  if (s.empty())
    return false;
  char* end = nullptr;
  unsigned long long v = 0;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
    v = std::strtoull(s.c_str() + 2, &end, 16);
  else if (std::isdigit(static_cast<unsigned char>(s[0])))
    v = std::strtoull(s.c_str(), &end, 10);
  else
    return false;
  if (!end || *end != '\0')
    return false;
  *out = neg ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
  return true;
}

/// "R12", "UR4", "P3", "UP0", "PT", "RZ", "B1" with suffixes stripped by the caller.
bool parse_reg(std::string const& s, RegFile* file, int* reg) {
  auto num = [&](std::size_t from, int* out) {
    if (from >= s.size())
      return false;
    for (std::size_t i = from; i < s.size(); ++i)
      if (!std::isdigit(static_cast<unsigned char>(s[i])))
        return false;
    *out = std::atoi(s.c_str() + from);
    return true;
  };
  if (s == "RZ") {
    *file = RegFile::kR;
    *reg = kRZ;
    return true;
  }
  if (s == "URZ") {
    *file = RegFile::kUR;
    *reg = kURZ;
    return true;
  }
  if (s == "PT") {
    *file = RegFile::kP;
    *reg = kPT;
    return true;
  }
  if (s == "UPT") {
    *file = RegFile::kUP;
    *reg = kPT;
    return true;
  }
  if (s.rfind("UR", 0) == 0 && num(2, reg)) {
    *file = RegFile::kUR;
    return true;
  }
  if (s.rfind("UP", 0) == 0 && num(2, reg)) {
    *file = RegFile::kUP;
    return true;
  }
  if (s[0] == 'R' && num(1, reg)) {
    *file = RegFile::kR;
    return true;
  }
  if (s[0] == 'P' && num(1, reg)) {
    *file = RegFile::kP;
    return true;
  }
  if (s[0] == 'B' && num(1, reg)) {
    *file = RegFile::kB;
    return true;
  }
  return false;
}

/// Splits "R2.64.reuse" into "R2" and whether ".64" was among the suffixes.
std::string strip_suffixes(std::string const& s, bool* wide) {
  std::size_t const dot = s.find('.');
  if (dot == std::string::npos)
    return s;
  std::string const rest = s.substr(dot);
  if (wide)
    *wide = rest.find(".64") != std::string::npos || rest.find(".U64") != std::string::npos;
  return s.substr(0, dot);
}

/// Splits the text inside c[..][..] or [..] at '+' and '-' (keeping the sign with the term).
std::vector<std::string> terms(std::string const& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if ((ch == '+' || ch == '-') && !cur.empty()) {
      out.push_back(trim(cur));
      cur.clear();
      if (ch == '-')
        cur = "-";
      continue;
    }
    cur += ch;
  }
  if (!trim(cur).empty())
    out.push_back(trim(cur));
  return out;
}

void parse_address(std::string const& inner, Operand& o) {
  for (std::string t : terms(inner)) {
    std::int64_t v = 0;
    if (parse_int(t, &v)) {
      o.offset += v;
      continue;
    }
    bool wide = false;
    std::string const r = strip_suffixes(t, &wide);
    RegFile f;
    int reg;
    if (parse_reg(r, &f, &reg)) {
      if (f == RegFile::kUR) {
        if (reg != kURZ)
          o.ubase_reg = reg;
      } else if (o.base_reg < 0) {
        o.base_file = f;
        o.base_reg = reg;
        o.base_wide = wide;
      }
    }
  }
}

} // namespace

bool Instr::has_mod(char const* m) const {
  // ".M" followed by '.' or the end, without building the needle (called per instruction of
  // every dataflow pass).
  std::size_t const len = std::strlen(m);
  std::size_t pos = 0;
  while ((pos = opcode.find(m, pos, len)) != std::string::npos) {
    std::size_t const end = pos + len;
    if (pos > 0 && opcode[pos - 1] == '.' && (end == opcode.size() || opcode[end] == '.'))
      return true;
    pos = pos + 1;
  }
  return false;
}

bool Instr::conditional() const {
  if (guarded())
    return true;
  for (auto const& o : ops)
    if (o.kind == Operand::Kind::kReg && (o.file == RegFile::kP || o.file == RegFile::kUP) &&
        !(o.reg == kPT && !o.neg))
      return true;
  return false;
}

std::size_t SassFunction::index_of(std::uint32_t addr) const {
  auto it = std::lower_bound(code.begin(), code.end(), addr,
                             [](Instr const& i, std::uint32_t a) { return i.addr < a; });
  return it != code.end() && it->addr == addr ? static_cast<std::size_t>(it - code.begin())
                                              : code.size();
}

SassFunction const* SassModule::find(std::string const& name) const {
  for (auto const& f : functions)
    if (f.name == name)
      return &f;
  return nullptr;
}

Operand parse_operand(std::string const& raw) {
  Operand o;
  o.text = raw;
  std::string s = trim(raw);
  if (s.size() >= 2 && s.front() == '`') {
    // `(.L_x_18) or `($__internal_0_$...)
    std::size_t const b = s.find('('), e = s.rfind(')');
    o.kind = Operand::Kind::kLabel;
    o.text = b != std::string::npos && e != std::string::npos && e > b ? s.substr(b + 1, e - b - 1)
                                                                       : s.substr(1);
    return o;
  }
  while (!s.empty() && (s[0] == '-' || s[0] == '!' || s[0] == '~' || s[0] == '|')) {
    if (s[0] == '-' && s.size() > 1 && std::isdigit(static_cast<unsigned char>(s[1])))
      break; // a negative immediate
    if (s[0] == '-' || s[0] == '!')
      o.neg = true;
    else if (s[0] == '~')
      o.inv = true;
    else
      o.abs = true;
    s = s.substr(1);
  }
  if (!s.empty() && s.back() == '|') {
    s.pop_back();
    o.abs = true;
  }
  if (s.rfind("c[", 0) == 0 || s.rfind("cx[", 0) == 0) {
    o.kind = Operand::Kind::kConst;
    std::size_t const b1 = s.find('['), e1 = s.find(']', b1);
    std::size_t const b2 = s.find('[', e1), e2 = s.find(']', b2 == std::string::npos ? e1 : b2);
    if (e1 == std::string::npos || b2 == std::string::npos || e2 == std::string::npos)
      return o;
    std::int64_t bank = 0;
    if (parse_int(s.substr(b1 + 1, e1 - b1 - 1), &bank))
      o.bank = static_cast<int>(bank);
    else
      o.bank = -1; // a register-indexed bank (cx[UR4])
    for (std::string t : terms(s.substr(b2 + 1, e2 - b2 - 1))) {
      std::int64_t v = 0;
      if (parse_int(t, &v)) {
        o.offset += v;
        continue;
      }
      RegFile f;
      int reg;
      if (parse_reg(strip_suffixes(t, nullptr), &f, &reg) && reg != kRZ &&
          !(f == RegFile::kUR && reg == kURZ)) {
        o.index_file = f;
        o.index_reg = reg;
      }
    }
    return o;
  }
  std::size_t const br = s.find('[');
  if (br != std::string::npos && (br == 0 || s.rfind("desc[", 0) == 0)) {
    o.kind = Operand::Kind::kMem;
    std::size_t b = br;
    if (s.rfind("desc[", 0) == 0) {
      std::size_t const e = s.find(']');
      b = e == std::string::npos ? std::string::npos : s.find('[', e);
    }
    if (b == std::string::npos)
      return o;
    std::size_t const e = s.find(']', b);
    parse_address(s.substr(b + 1, e == std::string::npos ? std::string::npos : e - b - 1), o);
    return o;
  }
  if (s.rfind("SR_", 0) == 0 || s == "SRZ") {
    o.kind = Operand::Kind::kSpecial;
    o.text = s;
    return o;
  }
  std::int64_t v = 0;
  if (parse_int(s, &v)) {
    o.kind = Operand::Kind::kImm;
    o.imm = o.neg ? -v : v;
    o.neg = false;
    return o;
  }
  bool wide = false;
  std::string const r = strip_suffixes(s, &wide);
  if (parse_reg(r, &o.file, &o.reg)) {
    o.kind = Operand::Kind::kReg;
    o.wide = wide;
    return o;
  }
  if (!s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '+' ||
                     s.find("INF") != std::string::npos || s.find("NAN") != std::string::npos)) {
    o.kind = Operand::Kind::kImm;
    o.is_float = true;
    return o;
  }
  o.kind = Operand::Kind::kOther;
  return o;
}

SassModule parse_sass(std::string const& text, std::string const& origin) {
  SassModule m;
  std::istringstream in(text);
  std::string line;
  std::size_t lineno = 0;
  SassFunction* cur = nullptr;
  std::vector<std::string> pending; // labels waiting for their instruction
  std::vector<std::string> entries; // functions marked STO_CUDA_ENTRY
  bool saw_header = false;
  while (std::getline(in, line)) {
    ++lineno;
    std::string const t = trim(line);
    if (t.empty())
      continue;
    if (t.rfind("//----", 0) == 0) {
      saw_header = true;
      cur = nullptr;
      pending.clear();
      std::size_t const p = t.find(".text.");
      if (p != std::string::npos) {
        std::string name = t.substr(p + 6);
        name = trim(name.substr(0, name.find(' ')));
        m.functions.emplace_back();
        cur = &m.functions.back();
        cur->name = name;
      }
      continue;
    }
    if (t.rfind(".target", 0) == 0) {
      saw_header = true;
      std::istringstream ts(t);
      std::string dir, arch;
      ts >> dir >> arch;
      m.arch = arch;
      continue;
    }
    if (t.rfind(".other", 0) == 0 && t.find("STO_CUDA_ENTRY") != std::string::npos) {
      std::string rest = trim(t.substr(6));
      entries.push_back(trim(rest.substr(0, rest.find(','))));
      continue;
    }
    if (!cur)
      continue;
    if (t.rfind(".global", 0) == 0 && cur->symbol.empty() && cur->code.empty()) {
      std::istringstream ts(t);
      std::string dir, sym;
      ts >> dir >> sym;
      cur->symbol = sym;
      continue;
    }
    if (t[0] == '.' && t.back() != ':')
      continue; // .section, .align, .type, .size, .weak ...
    if (t.back() == ':' && t.find("/*") == std::string::npos) {
      pending.push_back(t.substr(0, t.size() - 1));
      continue;
    }
    if (t.rfind("/*", 0) != 0)
      continue;
    std::size_t const close = t.find("*/");
    if (close == std::string::npos)
      continue;
    Instr ins;
    ins.line = lineno;
    std::int64_t addr = 0;
    if (!parse_int("0x" + trim(t.substr(2, close - 2)), &addr))
      throw FileError(origin, "line " + std::to_string(lineno) +
                                  ": not nvdisasm output (bad address): " + t.substr(0, 80));
    ins.addr = static_cast<std::uint32_t>(addr);
    std::string body = trim(t.substr(close + 2));
    // Indirect branch targets: (*"BRANCH_TARGETS .L_x_1,.L_x_2"*)
    std::size_t const ann = body.find("(*\"");
    if (ann != std::string::npos) {
      std::size_t const end = body.find("\"*)", ann);
      std::string a =
          body.substr(ann + 3, end == std::string::npos ? std::string::npos : end - ann - 3);
      if (a.rfind("BRANCH_TARGETS", 0) == 0) {
        std::stringstream ts(trim(a.substr(14)));
        std::string tg;
        while (std::getline(ts, tg, ','))
          if (!trim(tg).empty())
            ins.targets.push_back(trim(tg));
      }
      body = trim(body.substr(0, ann)) + (end == std::string::npos ? "" : body.substr(end + 3));
    }
    body = trim(body);
    if (!body.empty() && body.back() == ';')
      body = trim(body.substr(0, body.size() - 1));
    if (!body.empty() && body[0] == '@') {
      std::size_t const sp = body.find_first_of(" \t");
      std::string g = body.substr(1, sp - 1);
      if (!g.empty() && g[0] == '!') {
        ins.pred_neg = true;
        g = g.substr(1);
      }
      if (!parse_reg(g, &ins.pred_file, &ins.pred))
        throw FileError(origin, "line " + std::to_string(lineno) + ": bad guard '" + g + "'");
      body = trim(body.substr(sp == std::string::npos ? body.size() : sp));
    }
    std::size_t const sp = body.find_first_of(" \t");
    ins.opcode = body.substr(0, sp);
    ins.op = ins.opcode.substr(0, ins.opcode.find('.'));
    std::string const rest = sp == std::string::npos ? std::string() : trim(body.substr(sp));
    if (ins.op == "BRX" || ins.op == "JMX") {
      std::istringstream ts(rest);
      std::string tok;
      while (ts >> tok)
        ins.ops.push_back(parse_operand(tok));
    } else if (!rest.empty()) {
      for (auto const& o : split_top_level(rest, ','))
        ins.ops.push_back(parse_operand(o));
    }
    for (auto const& l : pending)
      cur->labels[l] = cur->code.size();
    pending.clear();
    cur->code.push_back(std::move(ins));
  }
  if (!saw_header)
    throw FileError(origin, "not nvdisasm output (no .target line and no section headers)");
  for (auto& f : m.functions) {
    if (f.symbol.empty())
      f.symbol = f.name;
    f.entry = std::find(entries.begin(), entries.end(), f.symbol) != entries.end();
  }
  // Sections without code (a .text of an empty function) keep no entry.
  m.functions.erase(std::remove_if(m.functions.begin(), m.functions.end(),
                                   [](SassFunction const& f) { return f.code.empty(); }),
                    m.functions.end());
  return m;
}

} // namespace moefin::audit
