#include "audit/ptx.hpp"

#include "audit/text.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <sstream>

namespace moefin::audit {

namespace {

struct Ins {
  std::string guard;  // "%p1" or "!%p1", empty when unguarded
  std::string opcode; // "ld.global.u32"
  std::vector<std::string> args;
  std::size_t line = 0;
};

using Origin = std::pair<int, std::uint32_t>; // (ordinal, offset)

/// "[%rd3+16]" -> ("%rd3", 16); "[name_param_1+8]" -> ("name_param_1", 8).
std::pair<std::string, std::int64_t> address(std::string const& a) {
  std::string s = a;
  if (!s.empty() && s.front() == '[')
    s = s.substr(1);
  if (!s.empty() && s.back() == ']')
    s.pop_back();
  std::size_t const plus = s.find_first_of("+-", 1);
  if (plus == std::string::npos)
    return {trim(s), 0};
  return {trim(s.substr(0, plus)), std::strtoll(s.c_str() + plus, nullptr, 0)};
}

void analyse(PtxEntry& e, std::vector<Ins> const& body,
             std::map<std::string, std::size_t> const& labels,
             std::map<std::string, int> const& param_ordinal) {
  // Origins of virtual registers, flow-insensitively (PTX registers are virtually single
  // assignment): ld.param gives one, additive and copying operations pass them on.
  std::map<std::string, std::set<Origin>> orig;
  for (bool changed = true; changed;) {
    changed = false;
    for (Ins const& i : body) {
      if (i.args.empty())
        continue;
      std::string const& d = i.args[0];
      std::set<Origin> add;
      if (i.opcode.rfind("ld.param", 0) == 0 && i.args.size() >= 2) {
        auto const [name, off] = address(i.args[1]);
        auto it = param_ordinal.find(name);
        if (it != param_ordinal.end())
          add.insert({it->second, static_cast<std::uint32_t>(off)});
      } else if (i.opcode.rfind("mov", 0) == 0 || i.opcode.rfind("cvta", 0) == 0 ||
                 i.opcode.rfind("add", 0) == 0 || i.opcode.rfind("sub", 0) == 0 ||
                 i.opcode.rfind("or.b64", 0) == 0 || i.opcode.rfind("and.b64", 0) == 0) {
        for (std::size_t k = 1; k < i.args.size(); ++k) {
          auto it = orig.find(i.args[k]);
          if (it != orig.end())
            add.insert(it->second.begin(), it->second.end());
        }
      } else if (i.opcode.rfind("mad", 0) == 0 && i.args.size() >= 4) {
        auto it = orig.find(i.args[3]);
        if (it != orig.end())
          add.insert(it->second.begin(), it->second.end());
      }
      if (!add.empty()) {
        auto& o = orig[d];
        std::size_t const before = o.size();
        o.insert(add.begin(), add.end());
        changed = changed || o.size() != before;
      }
    }
  }
  // Blocks: leaders at labels and after branches; "may not have waited" forward.
  std::size_t const n = body.size();
  std::vector<char> leader(n + 1, 0);
  leader[0] = 1;
  for (auto const& [l, idx] : labels)
    if (idx < n)
      leader[idx] = 1;
  for (std::size_t i = 0; i < n; ++i)
    if (body[i].opcode.rfind("bra", 0) == 0 || body[i].opcode == "ret" || body[i].opcode == "exit")
      leader[i + 1] = 1;
  std::vector<char> mnw(n + 1, 0); // at block starts (indexed by instruction)
  mnw[0] = 1;
  for (bool changed = true; changed;) {
    changed = false;
    char a = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (leader[i])
        a = mnw[i];
      Ins const& ins = body[i];
      if (ins.opcode == "griddepcontrol.wait" && ins.guard.empty())
        a = 0;
      auto flow = [&](std::size_t to) {
        if (a && to <= n && !mnw[to]) {
          mnw[to] = 1;
          changed = true;
        }
      };
      bool const branch = ins.opcode.rfind("bra", 0) == 0;
      bool const stop = ins.opcode == "ret" || ins.opcode == "exit";
      if (branch && !ins.args.empty()) {
        auto it = labels.find(ins.args[0]);
        if (it != labels.end())
          flow(it->second);
      }
      if ((!branch && !stop) || !ins.guard.empty())
        flow(i + 1);
    }
  }
  char a = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (leader[i])
      a = mnw[i];
    Ins const& ins = body[i];
    if (ins.opcode == "griddepcontrol.wait") {
      e.has_wait = true;
      if (ins.guard.empty())
        a = 0;
    }
    if (ins.opcode == "griddepcontrol.launch_dependents")
      e.has_trigger = true;
    bool const global_load =
        (ins.opcode.rfind("ld.global", 0) == 0 || ins.opcode.rfind("ldu.global", 0) == 0 ||
         (ins.opcode.rfind("ld.", 0) == 0 && ins.opcode.rfind("ld.param", 0) != 0 &&
          ins.opcode.rfind("ld.shared", 0) != 0 && ins.opcode.rfind("ld.local", 0) != 0 &&
          ins.opcode.rfind("ld.const", 0) != 0)) &&
        ins.args.size() >= 2;
    if (!global_load)
      continue;
    auto const [reg, off] = address(ins.args[1]);
    PtxLoad l;
    l.line = ins.line;
    l.before_wait = a != 0;
    auto it = orig.find(reg);
    bool const generic = ins.opcode.rfind("ld.global", 0) != 0 && ins.opcode.rfind("ldu", 0) != 0;
    if (it != orig.end() && !it->second.empty()) {
      l.ordinal = it->second.begin()->first;
      l.offset = it->second.begin()->second;
    } else if (generic) {
      continue; // a generic load not from a parameter
    }
    e.loads.push_back(l);
  }
}

} // namespace

std::map<std::string, PtxEntry> parse_ptx(std::string const& text) {
  std::map<std::string, PtxEntry> out;
  std::istringstream in(text);
  std::string line;
  std::size_t lineno = 0;
  std::string entry;
  bool in_params = false, in_body = false;
  int depth = 0;
  std::vector<Ins> body;
  std::map<std::string, std::size_t> labels;
  std::map<std::string, int> ordinal;
  std::string pending; // a statement spread over lines
  while (std::getline(in, line)) {
    ++lineno;
    std::string t = trim(line);
    std::size_t const cm = t.find("//");
    if (cm != std::string::npos)
      t = trim(t.substr(0, cm));
    if (t.empty())
      continue;
    if (!in_body && !in_params && t.find(".entry") != std::string::npos) {
      std::size_t const p = t.find(".entry");
      std::string rest = trim(t.substr(p + 6));
      entry = trim(rest.substr(0, rest.find('(')));
      out[entry] = PtxEntry{};
      ordinal.clear();
      in_params = rest.find('(') != std::string::npos && rest.find(')') == std::string::npos;
      continue;
    }
    if (in_params) {
      if (t.rfind(".param", 0) == 0) {
        std::string s = t;
        if (s.back() == ',')
          s.pop_back();
        std::size_t const br = s.find('[');
        if (br != std::string::npos)
          s = s.substr(0, br);
        std::istringstream ws(s);
        std::string w, last;
        while (ws >> w)
          last = w;
        ordinal[last] = static_cast<int>(out[entry].params.size());
        out[entry].params.push_back(last);
      }
      if (t.find(')') != std::string::npos)
        in_params = false;
      continue;
    }
    if (!entry.empty() && !in_body && t == "{") {
      in_body = true;
      depth = 1;
      body.clear();
      labels.clear();
      continue;
    }
    if (!in_body)
      continue;
    if (t == "{") {
      ++depth;
      continue;
    }
    if (t == "}") {
      if (--depth == 0) {
        analyse(out[entry], body, labels, ordinal);
        in_body = false;
        entry.clear();
      }
      continue;
    }
    if (t.back() == ':' && t.find(' ') == std::string::npos) {
      labels[t.substr(0, t.size() - 1)] = body.size();
      continue;
    }
    if (t[0] == '.')
      continue; // .reg, .shared, .local declarations
    pending += (pending.empty() ? "" : " ") + t;
    if (pending.back() != ';')
      continue;
    std::string stmt = trim(pending.substr(0, pending.size() - 1));
    pending.clear();
    Ins ins;
    ins.line = lineno;
    if (stmt[0] == '@') {
      std::size_t const sp = stmt.find_first_of(" \t");
      ins.guard = stmt.substr(1, sp - 1);
      stmt = trim(stmt.substr(sp));
    }
    std::size_t const sp = stmt.find_first_of(" \t");
    ins.opcode = stmt.substr(0, sp);
    if (sp != std::string::npos)
      ins.args = split_top_level(trim(stmt.substr(sp)), ',');
    body.push_back(std::move(ins));
  }
  return out;
}

} // namespace moefin::audit
