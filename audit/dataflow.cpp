#include "audit/dataflow.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <string_view>
#include <unordered_set>

namespace moefin::audit {

namespace {

/// `s == lit` without strlen: the evaluator compares opcodes with literals for every
/// instruction of every pass (one pass per warp), so the length check decides most of them.
template <std::size_t N> bool is(std::string const& s, char const (&lit)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), lit, N - 1) == 0;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Lattice

void Value::add_origin(std::uint32_t off) {
  if (norig == kManyOrigins)
    return;
  for (std::uint8_t i = 0; i < norig; ++i)
    if (orig[i] == off)
      return;
  if (norig == orig.size()) {
    norig = kManyOrigins;
    return;
  }
  orig[norig++] = off;
}

void Value::add_origins(Value const& o) {
  if (o.norig == kManyOrigins) {
    norig = kManyOrigins;
    return;
  }
  for (std::uint8_t i = 0; i < o.norig; ++i)
    add_origin(o.orig[i]);
}

bool operator==(Value const& a, Value const& b) {
  if (a.kind != b.kind || a.norig != b.norig)
    return false;
  if ((a.kind == Value::kConst || a.kind == Value::kParam || a.kind == Value::kParamAddr ||
       a.kind == Value::kTid) &&
      (a.c != b.c || a.size != b.size))
    return false;
  if (a.norig != Value::kManyOrigins)
    for (std::uint8_t i = 0; i < a.norig; ++i)
      if (std::find(b.orig.begin(), b.orig.begin() + b.norig, a.orig[i]) ==
          b.orig.begin() + b.norig)
        return false;
  return true;
}

bool operator==(PredValue const& a, PredValue const& b) {
  if (a.kind != b.kind)
    return false;
  if (a.kind != PredValue::kCmp)
    return true;
  return a.op == b.op && a.is_unsigned == b.is_unsigned && a.neg == b.neg && a.size == b.size &&
         a.offset == b.offset && a.k == b.k;
}

char const* cmp_text(PredValue::Op op) {
  switch (op) {
  case PredValue::kEq:
    return "==";
  case PredValue::kNe:
    return "!=";
  case PredValue::kLt:
    return "<";
  case PredValue::kLe:
    return "<=";
  case PredValue::kGt:
    return ">";
  case PredValue::kGe:
    return ">=";
  }
  return "?";
}

namespace {

Value join(Value const& a, Value const& b) {
  if (a.kind == Value::kUndef)
    return b;
  if (b.kind == Value::kUndef)
    return a;
  if (a == b)
    return a;
  Value v = Value::unknown();
  bool const same = a.kind == b.kind && a.c == b.c && a.size == b.size && a.kind != Value::kUnknown;
  if (same)
    v = a; // equal payloads, different origins
  v.norig = 0;
  v.add_origins(a);
  v.add_origins(b);
  return v;
}

PredValue join(PredValue const& a, PredValue const& b) {
  if (a.kind == PredValue::kUndef)
    return b;
  if (b.kind == PredValue::kUndef)
    return a;
  if (a == b)
    return a;
  PredValue p;
  p.kind = PredValue::kUnknown;
  return p;
}

PredValue pred_unknown() {
  PredValue p;
  p.kind = PredValue::kUnknown;
  return p;
}

PredValue negate(PredValue p) {
  if (p.kind == PredValue::kTrue)
    p.kind = PredValue::kFalse;
  else if (p.kind == PredValue::kFalse)
    p.kind = PredValue::kTrue;
  else if (p.kind == PredValue::kCmp)
    p.neg = !p.neg;
  return p;
}

PredValue pred_and(PredValue const& a, PredValue const& b) {
  if (a.kind == PredValue::kFalse || b.kind == PredValue::kFalse)
    return PredValue::of(false);
  if (a.kind == PredValue::kTrue)
    return b;
  if (b.kind == PredValue::kTrue)
    return a;
  return pred_unknown();
}

PredValue pred_or(PredValue const& a, PredValue const& b) {
  if (a.kind == PredValue::kTrue || b.kind == PredValue::kTrue)
    return PredValue::of(true);
  if (a.kind == PredValue::kFalse)
    return b;
  if (b.kind == PredValue::kFalse)
    return a;
  return pred_unknown();
}

PredValue pred_xor(PredValue const& a, PredValue const& b) {
  if (a.known() && b.known())
    return PredValue::of((a.kind == PredValue::kTrue) != (b.kind == PredValue::kTrue));
  if (a.kind == PredValue::kFalse)
    return b;
  if (b.kind == PredValue::kFalse)
    return a;
  if (a.kind == PredValue::kTrue)
    return negate(b);
  if (b.kind == PredValue::kTrue)
    return negate(a);
  return pred_unknown();
}

// ---------------------------------------------------------------------------------------------
// Operands

bool is_pred(Operand const& o) {
  return o.kind == Operand::Kind::kReg && (o.file == RegFile::kP || o.file == RegFile::kUP);
}

bool is_gpr(Operand const& o) {
  return o.kind == Operand::Kind::kReg && (o.file == RegFile::kR || o.file == RegFile::kUR);
}

PredValue read_pred(Operand const& o, State const& s) {
  if (!is_pred(o))
    return pred_unknown();
  PredValue p =
      o.reg == kPT ? PredValue::of(true) : (o.file == RegFile::kP ? s.p[o.reg] : s.up[o.reg]);
  if (p.kind == PredValue::kUndef)
    p = pred_unknown();
  return o.neg ? negate(p) : p;
}

std::uint8_t pred_key(RegFile f, int reg, bool neg);

/// Index of P0..P7, UP0..UP7 in State::same.
std::size_t pred_index(RegFile f, int reg) {
  return (f == RegFile::kUP ? 8u : 0u) + static_cast<std::size_t>(reg);
}

/// The key of the opposite sense (P3 <-> !P3).
std::uint8_t flip_key(std::uint8_t k) {
  return static_cast<std::uint8_t>(k > 16 ? k - 16 : k + 16);
}

/// The key of predicate `reg` (negated: `neg`) in `s`: the copied predicate's when it is a copy.
std::uint8_t canonical_key(State const& s, RegFile f, int reg, bool neg) {
  if (reg >= 0 && reg < kPT)
    if (std::uint8_t const k = s.same[pred_index(f, reg)])
      return neg ? flip_key(k) : k;
  return pred_key(f, reg, neg);
}

void write_pred(Operand const& o, PredValue p, State& s) {
  if (!is_pred(o) || o.reg == kPT || o.reg < 0 || o.reg > 7)
    return;
  (o.file == RegFile::kP ? s.p : s.up)[o.reg] = p;
  // Values kept under this predicate no longer describe it.
  std::uint8_t const k1 = pred_key(o.file, o.reg, false), k2 = pred_key(o.file, o.reg, true);
  for (auto& k : s.key)
    if (k == k1 || k == k2)
      k = 0;
  // Nor does it copy another predicate any more, and its copies no longer copy it.
  s.same[pred_index(o.file, o.reg)] = 0;
  for (auto& k : s.same)
    if (k == k1 || k == k2)
      k = 0;
}

Value* slot(State& s, RegFile f, int reg) {
  if (f == RegFile::kR && reg >= 0 && reg < kRZ)
    return &s.r[reg];
  if (f == RegFile::kUR && reg >= 0 && reg < kURZ)
    return &s.ur[reg];
  return nullptr;
}

std::size_t key_index(RegFile f, int reg) {
  return f == RegFile::kR ? static_cast<std::size_t>(reg) : 256u + static_cast<std::size_t>(reg);
}

void write(State& s, Operand const& d, Value const& v, int plus = 0) {
  if (!is_gpr(d))
    return;
  if (Value* x = slot(s, d.file, d.reg + plus))
    if ((d.file == RegFile::kR && d.reg != kRZ) || (d.file == RegFile::kUR && d.reg != kURZ)) {
      *x = v;
      s.key[key_index(d.file, d.reg + plus)] = 0;
    }
}

std::uint8_t pred_key(RegFile f, int reg, bool neg) {
  return static_cast<std::uint8_t>(1 + (f == RegFile::kUP ? 8 : 0) + reg + (neg ? 16 : 0));
}

Value param_load(Environment const& env, std::int64_t cb_off, std::uint32_t size, bool hi) {
  if (hi)
    cb_off += 4;
  if (cb_off < 0)
    return Value::unknown();
  auto const off = static_cast<std::uint32_t>(cb_off);
  if (env.param_addr_slot >= 0 && off == static_cast<std::uint32_t>(env.param_addr_slot)) {
    Value v;
    v.kind = Value::kParamAddr;
    v.c = 0;
    v.add_origin(0);
    return v;
  }
  if (off < env.param_base || (env.param_size && off >= env.param_base + env.param_size))
    return Value::unknown();
  std::uint32_t const p = off - env.param_base;
  std::uint64_t known = 0;
  if (env.param_value(p, size, &known))
    return Value::constant(static_cast<std::uint32_t>(known));
  Value v;
  v.kind = Value::kParam;
  v.c = p;
  v.size = static_cast<std::uint8_t>(size);
  v.add_origin(hi ? p - 4 : p); // the pointer starts at the pair's low word
  return v;
}

std::uint32_t load_size(Instr const& ins) {
  if (ins.has_mod("U8") || ins.has_mod("S8"))
    return 1;
  if (ins.has_mod("U16") || ins.has_mod("S16"))
    return 2;
  return 4;
}

Value apply_mods(Value v, Operand const& o) {
  if (o.neg) {
    if (v.is_const())
      v.c = 0u - v.c;
    else
      v = Value::unknown();
  }
  if (o.inv) {
    if (v.is_const())
      v.c = ~v.c;
    else
      v = Value::unknown();
  }
  if (o.abs) {
    if (v.is_const())
      v.c = static_cast<std::uint32_t>(std::abs(static_cast<std::int32_t>(v.c)));
    else
      v = Value::unknown();
  }
  return v;
}

} // namespace

bool Environment::param_value(std::uint32_t off, std::uint32_t size, std::uint64_t* v) const {
  std::uint64_t x = 0;
  for (std::uint32_t i = 0; i < size; ++i) {
    std::size_t const b = static_cast<std::size_t>(off) + i;
    if (b >= known.size() || known[b] < 0)
      return false;
    x |= static_cast<std::uint64_t>(known[b]) << (8 * i);
  }
  *v = x;
  return true;
}

Value operand_value(Operand const& o, Environment const& env, State const& s, bool hi) {
  switch (o.kind) {
  case Operand::Kind::kReg: {
    if (o.is_zero_reg())
      return apply_mods(Value::constant(0), o);
    if (o.file != RegFile::kR && o.file != RegFile::kUR)
      return Value::unknown();
    int const r = o.reg + (hi ? 1 : 0);
    Value const* v = nullptr;
    if (o.file == RegFile::kR && r < kRZ)
      v = &s.r[r];
    else if (o.file == RegFile::kUR && r < kURZ)
      v = &s.ur[r];
    if (!v || v->kind == Value::kUndef)
      return Value::unknown();
    return apply_mods(*v, o);
  }
  case Operand::Kind::kImm:
    if (o.is_float)
      return Value::unknown();
    return Value::constant(hi ? static_cast<std::uint32_t>(static_cast<std::uint64_t>(o.imm) >> 32)
                              : static_cast<std::uint32_t>(o.imm));
  case Operand::Kind::kConst: {
    std::int64_t off = o.offset;
    if (o.index_reg >= 0) {
      Operand idx;
      idx.kind = Operand::Kind::kReg;
      idx.file = o.index_file;
      idx.reg = o.index_reg;
      Value const iv = operand_value(idx, env, s);
      if (!iv.is_const())
        return Value::unknown();
      off += static_cast<std::int32_t>(iv.c);
    }
    Value v = Value::unknown();
    if (o.bank == 0)
      v = param_load(env, off, 4, hi);
    else if (o.bank == 2) {
      std::int64_t const w = (off + (hi ? 4 : 0)) / 4;
      if (off % 4 == 0 && w >= 0 && static_cast<std::size_t>(w) < env.constant2.size())
        v = Value::constant(env.constant2[static_cast<std::size_t>(w)]);
    }
    return apply_mods(v, o);
  }
  case Operand::Kind::kSpecial:
    return is(o.text, "SRZ") ? Value::constant(0) : Value::unknown();
  default:
    return Value::unknown();
  }
}

State State::entry() {
  State s;
  for (auto& v : s.r)
    v = Value::unknown();
  for (auto& v : s.ur)
    v = Value::unknown();
  for (auto& p : s.p)
    p = pred_unknown();
  for (auto& p : s.up)
    p = pred_unknown();
  s.p[kPT] = PredValue::of(true);
  s.up[kPT] = PredValue::of(true);
  s.reached = true;
  return s;
}

bool State::merge(State const& o) {
  if (!o.reached)
    return false;
  if (!reached) {
    *this = o;
    return true;
  }
  bool changed = false;
  for (std::size_t i = 0; i < r.size(); ++i) {
    Value const j = join(r[i], o.r[i]);
    if (!(j == r[i])) {
      r[i] = j;
      changed = true;
    }
  }
  for (std::size_t i = 0; i < ur.size(); ++i) {
    Value const j = join(ur[i], o.ur[i]);
    if (!(j == ur[i])) {
      ur[i] = j;
      changed = true;
    }
  }
  for (std::size_t i = 0; i < same.size(); ++i)
    if (same[i] != 0 && same[i] != o.same[i]) {
      same[i] = 0;
      changed = true;
    }
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (key[i] == 0)
      continue;
    if (key[i] != o.key[i]) {
      key[i] = 0;
      changed = true;
      continue;
    }
    Value const j = join(cond[i], o.cond[i]);
    if (!(j == cond[i])) {
      cond[i] = j;
      changed = true;
    }
  }
  for (std::size_t i = 0; i < p.size(); ++i) {
    PredValue const j = join(p[i], o.p[i]);
    if (!(j == p[i])) {
      p[i] = j;
      changed = true;
    }
    PredValue const k = join(up[i], o.up[i]);
    if (!(k == up[i])) {
      up[i] = k;
      changed = true;
    }
  }
  return changed;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Instruction semantics

struct Ops {
  std::vector<Operand const*> gpr; // register/immediate/constant sources in order
  std::vector<Operand const*> pred;
};

bool is_source(Operand const& o) {
  return is_gpr(o) || o.kind == Operand::Kind::kImm || o.kind == Operand::Kind::kConst ||
         o.kind == Operand::Kind::kSpecial;
}

/// Additive result: exact when every term is a constant (or one is a parameter address and the
/// others constants); the origins of every additive term otherwise.
Value additive(std::vector<Value> const& terms, std::uint32_t sum_if_const) {
  bool all_const = true;
  int paddr = -1;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    if (terms[i].kind == Value::kParamAddr && paddr < 0)
      paddr = static_cast<int>(i);
    else if (!terms[i].is_const())
      all_const = false;
  }
  if (all_const && paddr < 0)
    return Value::constant(sum_if_const);
  Value v = Value::unknown();
  if (all_const && paddr >= 0) {
    std::uint32_t off = terms[static_cast<std::size_t>(paddr)].c;
    for (std::size_t i = 0; i < terms.size(); ++i)
      if (static_cast<int>(i) != paddr)
        off += terms[i].c;
    v.kind = Value::kParamAddr;
    v.c = off;
    v.add_origin(off);
    return v;
  }
  for (auto const& t : terms)
    v.add_origins(t);
  return v;
}

Value from_u64(std::uint64_t x, bool hi) {
  return Value::constant(static_cast<std::uint32_t>(hi ? x >> 32 : x));
}

bool cmp(PredValue::Op op, std::uint32_t a, std::uint32_t b, bool uns) {
  if (uns) {
    switch (op) {
    case PredValue::kEq:
      return a == b;
    case PredValue::kNe:
      return a != b;
    case PredValue::kLt:
      return a < b;
    case PredValue::kLe:
      return a <= b;
    case PredValue::kGt:
      return a > b;
    case PredValue::kGe:
      return a >= b;
    }
  }
  auto const x = static_cast<std::int32_t>(a), y = static_cast<std::int32_t>(b);
  switch (op) {
  case PredValue::kEq:
    return x == y;
  case PredValue::kNe:
    return x != y;
  case PredValue::kLt:
    return x < y;
  case PredValue::kLe:
    return x <= y;
  case PredValue::kGt:
    return x > y;
  case PredValue::kGe:
    return x >= y;
  }
  return false;
}

bool parse_cmp(Instr const& ins, PredValue::Op* op) {
  static constexpr std::pair<char const*, PredValue::Op> kOps[] = {
      {"EQ", PredValue::kEq}, {"NE", PredValue::kNe}, {"LT", PredValue::kLt},
      {"LE", PredValue::kLe}, {"GT", PredValue::kGt}, {"GE", PredValue::kGe}};
  for (auto const& [name, o] : kOps)
    if (ins.has_mod(name)) {
      *op = o;
      return true;
    }
  return false;
}

PredValue::Op swapped(PredValue::Op op) {
  switch (op) {
  case PredValue::kLt:
    return PredValue::kGt;
  case PredValue::kLe:
    return PredValue::kGe;
  case PredValue::kGt:
    return PredValue::kLt;
  case PredValue::kGe:
    return PredValue::kLe;
  default:
    return op;
  }
}

PredValue constrained(PredValue p, Environment const& env) {
  if (p.kind != PredValue::kCmp)
    return p;
  for (Constraint const& c : env.constraints) {
    if (c.offset != p.offset || c.size != p.size || c.k != p.k)
      continue;
    bool truth;
    if (c.op == p.op && c.is_unsigned == p.is_unsigned)
      truth = c.truth;
    else if ((c.op == PredValue::kEq && p.op == PredValue::kNe) ||
             (c.op == PredValue::kNe && p.op == PredValue::kEq))
      truth = !c.truth;
    else
      continue;
    return PredValue::of(truth != p.neg);
  }
  return p;
}

void clobber(Instr const& ins, State& s) {
  // Destinations: the leading registers of the operand list; wide forms cover more.
  int width = 1;
  if (ins.has_mod("64") || ins.has_mod("WIDE") || ins.has_mod("U64") || ins.has_mod("S64") ||
      ins.has_mod("F64") || is(ins.op, "DADD") || is(ins.op, "DMUL") || is(ins.op, "DFMA") ||
      is(ins.op, "DMNMX"))
    width = 2;
  if (is(ins.op, "R2P") || is(ins.op, "R2UP")) {
    Operand p;
    p.kind = Operand::Kind::kReg;
    p.file = is(ins.op, "R2P") ? RegFile::kP : RegFile::kUP;
    for (p.reg = 0; p.reg < kPT; ++p.reg)
      write_pred(p, pred_unknown(), s);
  }
  if (ins.has_mod("128"))
    width = 4;
  bool all = ins.op.find("MMA") != std::string::npos || is(ins.op, "LDTM") || is(ins.op, "LDSM") ||
             is(ins.op, "MOVM") || ins.op.rfind("TLD", 0) == 0 || ins.op.rfind("TEX", 0) == 0 ||
             is(ins.op, "LDL") || is(ins.op, "SUATOM") || is(ins.op, "SULD");
  if (all) {
    for (auto& v : s.r)
      v = Value::unknown();
  }
  bool first = true;
  for (Operand const& o : ins.ops) {
    if (is_pred(o)) {
      write_pred(o, pred_unknown(), s);
      continue;
    }
    if (!is_gpr(o) || !first)
      break;
    for (int k = 0; k < width; ++k)
      write(s, o, Value::unknown(), k);
    first = false;
  }
}

bool no_destination(std::string const& op) {
  static char const* const kOps[] = {
      "ST",         "STG",        "STS",       "STL",      "RED",         "REDG",
      "BRA",        "BRX",        "JMP",       "JMX",      "EXIT",        "KILL",
      "BAR",        "MEMBAR",     "ACQBULK",   "PREEXIT",  "NOP",         "WARPSYNC",
      "BSSY",       "BSYNC",      "DEPBAR",    "ERRBAR",   "CCTL",        "CCTLL",
      "FENCE",      "YIELD",      "NANOSLEEP", "CALL",     "RET",         "BPT",
      "UTMALDG",    "UTMASTG",    "UTMAPF",    "UTMAREDG", "UBLKCP",      "UBLKRED",
      "UBLKPF",     "UTMACCTL",   "UTCBAR",    "UTCMMA",   "UTCHMMA",     "UTCQMMA",
      "UTCOMMA",    "UTCIMMA",    "LDGDEPBAR", "ARRIVES",  "WARPGROUP",   "BREAK",
      "USETMAXREG", "UVIRTCOUNT", "STSM",      "STTM",     "UCGABAR_ARV", "UCGABAR_WAIT",
      "CGAERRBAR",  "LDGSTS"};
  static std::unordered_set<std::string_view> const kSet(std::begin(kOps), std::end(kOps));
  return kSet.count(op) != 0;
}

} // namespace

PredValue guard_value(Instr const& ins, State const& s) {
  if (!ins.guarded())
    return PredValue::of(true);
  Operand g;
  g.kind = Operand::Kind::kReg;
  g.file = ins.pred_file;
  g.reg = ins.pred;
  g.neg = ins.pred_neg;
  return read_pred(g, s);
}

PredValue branch_condition(Instr const& ins, State const& s) {
  PredValue c = guard_value(ins, s);
  for (Operand const& o : ins.ops)
    if (is_pred(o)) {
      PredValue const q = read_pred(o, s);
      if (c.kind == PredValue::kTrue)
        c = q;
      else
        c = pred_and(c, q);
      break;
    }
  return c;
}

std::uint8_t guard_key(Instr const& ins, State const& s) {
  if (!ins.guarded())
    return 0;
  return canonical_key(s, ins.pred_file, ins.pred, ins.pred_neg);
}

namespace {
void exec(Instr const& ins, Environment const& env, State& s);
}

State guarded_view(Instr const& ins, State const& s) {
  State t = s;
  std::uint8_t const gk = guard_key(ins, s);
  if (gk == 0)
    return t;
  for (std::size_t i = 0; i < t.key.size(); ++i)
    if (t.key[i] == gk) {
      (i < 256 ? t.r[i] : t.ur[i - 256]) = t.cond[i];
      t.key[i] = 0;
    }
  return t;
}

void step(Instr const& ins, Environment const& env, State& s) {
  PredValue const g = guard_value(ins, s);
  if (g.kind == PredValue::kFalse)
    return;
  if (g.kind == PredValue::kTrue) {
    exec(ins, env, s);
    return;
  }
  // May execute. It reads the values its own guard's chain wrote; every register it changes
  // becomes the join of old and new, and keeps the new value under this guard.
  std::uint8_t const gk = guard_key(ins, s);
  State t = guarded_view(ins, s);
  exec(ins, env, t);
  // The view before exec, read from `s` (guarded_view substitutes the chain's values and
  // clears their keys; predicates it leaves alone), so the view is not copied twice.
  for (std::size_t i = 0; i < 320; ++i) {
    Value const& nv = i < 256 ? t.r[i] : t.ur[i - 256];
    bool const chained = gk != 0 && s.key[i] == gk;
    Value const& bv = chained ? s.cond[i] : (i < 256 ? s.r[i] : s.ur[i - 256]);
    std::uint8_t const bk = chained ? 0 : s.key[i];
    if (nv == bv && t.key[i] == bk)
      continue;
    Value& sv = i < 256 ? s.r[i] : s.ur[i - 256];
    sv = join(sv, nv);
    s.key[i] = gk;
    s.cond[i] = nv;
  }
  for (std::size_t i = 0; i < 8; ++i) {
    if (!(t.p[i] == s.p[i])) {
      Operand o;
      o.kind = Operand::Kind::kReg;
      o.file = RegFile::kP;
      o.reg = static_cast<int>(i);
      write_pred(o, join(s.p[i], t.p[i]), s);
    }
    if (!(t.up[i] == s.up[i])) {
      Operand o;
      o.kind = Operand::Kind::kReg;
      o.file = RegFile::kUP;
      o.reg = static_cast<int>(i);
      write_pred(o, join(s.up[i], t.up[i]), s);
    }
  }
  // A copy holds after the instruction only if it holds whether or not the instruction ran.
  for (std::size_t i = 0; i < s.same.size(); ++i)
    if (s.same[i] != t.same[i])
      s.same[i] = 0;
}

namespace {

void exec(Instr const& ins, Environment const& env, State& s) {
  std::string const& op = ins.op;
  auto const& o = ins.ops;
  if (no_destination(op) || o.empty())
    return;
  auto val = [&](std::size_t i, bool hi = false) {
    return i < o.size() ? operand_value(o[i], env, s, hi) : Value::unknown();
  };
  // Source operands after the destinations (registers, immediates, constants; not predicates).
  auto sources = [&](std::size_t from) {
    std::vector<std::size_t> v;
    for (std::size_t i = from; i < o.size(); ++i)
      if (is_source(o[i]))
        v.push_back(i);
    return v;
  };
  auto preds_after = [&](std::size_t from) {
    std::vector<std::size_t> v;
    for (std::size_t i = from; i < o.size(); ++i)
      if (is_pred(o[i]))
        v.push_back(i);
    return v;
  };
  bool const uniform_op = op.size() > 1 && op[0] == 'U';
  std::string const base = uniform_op && !is(op, "UMOV") ? op.substr(1) : op;

  if (is(op, "MOV") || is(op, "MOV32I") || is(op, "UMOV") || is(op, "R2UR") || is(op, "IMOV")) {
    if (is(op, "R2UR") && !is(ins.opcode, "R2UR")) {
      clobber(ins, s);
      return;
    }
    write(s, o[0], val(1));
    return;
  }
  if (is(op, "S2R") || is(op, "S2UR") || is(op, "CS2R")) {
    Value v = Value::unknown();
    if (o.size() > 1 && o[1].kind == Operand::Kind::kSpecial) {
      if (is(o[1].text, "SRZ"))
        v = Value::constant(0);
      else if (is(o[1].text, "SR_TID.X") && env.warp >= 0) {
        v.kind = Value::kTid;
        v.c = static_cast<std::uint32_t>(env.warp);
      }
    }
    write(s, o[0], v);
    if (is(op, "CS2R") && !ins.has_mod("32"))
      write(s, o[0], v.kind == Value::kConst ? v : Value::unknown(), 1);
    return;
  }
  if (is(op, "LDC") || is(op, "ULDC") || is(op, "LDCU")) {
    if (o.size() < 2 || o[1].kind != Operand::Kind::kConst) {
      clobber(ins, s);
      return;
    }
    Operand const& c = o[1];
    std::int64_t off = c.offset;
    bool index_ok = true;
    if (c.index_reg >= 0) {
      Operand idx;
      idx.kind = Operand::Kind::kReg;
      idx.file = c.index_file;
      idx.reg = c.index_reg;
      Value const iv = operand_value(idx, env, s);
      index_ok = iv.is_const();
      off += static_cast<std::int32_t>(iv.c);
    }
    int const words = ins.has_mod("128") ? 4 : ins.has_mod("64") ? 2 : 1;
    for (int w = 0; w < words; ++w) {
      Value v = Value::unknown();
      if (!index_ok && c.bank == 0 && off >= env.param_base &&
          (!env.param_size || off < env.param_base + env.param_size))
        v.add_origin(static_cast<std::uint32_t>(off) - env.param_base); // an indexed array
      if (index_ok && c.bank == 0) {
        v = param_load(env, off + 4 * w, w == 0 ? load_size(ins) : 4, false);
        if (words == 2 && w == 1 && v.kind == Value::kParam) {
          v.norig = 0;
          v.add_origin(v.c - 4);
        }
        if (w == 1 && words == 2 && env.param_addr_slot >= 0 && off == env.param_addr_slot)
          v = Value::unknown(); // upper half of the parameter block's address
      } else if (index_ok && c.bank == 2 && off % 4 == 0) {
        std::int64_t const wi = off / 4 + w;
        if (wi >= 0 && static_cast<std::size_t>(wi) < env.constant2.size())
          v = Value::constant(env.constant2[static_cast<std::size_t>(wi)]);
      }
      write(s, o[0], v, w);
    }
    return;
  }
  if (is(base, "IMAD")) {
    auto src = sources(1);
    if (src.size() < 3) {
      clobber(ins, s);
      return;
    }
    bool const wide = ins.has_mod("WIDE");
    bool const hi = ins.has_mod("HI");
    bool const x = ins.has_mod("X");
    Value const a = val(src[0]), b = val(src[1]);
    Value const c = val(src[2]);
    if (wide) {
      Value const ch = val(src[2], true);
      Value lo = Value::unknown(), hv = Value::unknown();
      if (a.is_const() && b.is_const() && c.is_const() && ch.is_const()) {
        std::uint64_t const add = (static_cast<std::uint64_t>(ch.c) << 32) | c.c;
        std::uint64_t prod;
        if (ins.has_mod("U32"))
          prod = static_cast<std::uint64_t>(a.c) * b.c;
        else
          prod =
              static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<std::int32_t>(a.c)) *
                                         static_cast<std::int32_t>(b.c));
        lo = from_u64(prod + add, false);
        hv = from_u64(prod + add, true);
      } else if (a.is_const() && b.is_const() && c.kind == Value::kParamAddr) {
        lo = additive({c, Value::constant(a.c * b.c)}, 0);
      } else {
        lo.add_origins(c);
        hv.add_origins(c);
      }
      write(s, o[0], lo);
      write(s, o[0], hv, 1);
      return;
    }
    if (hi || x) {
      Value v = Value::unknown();
      if (!hi && x)
        v.add_origins(c);
      write(s, o[0], v);
      return;
    }
    Value prod = Value::unknown();
    if (a.is_const() && b.is_const())
      prod = Value::constant(a.c * b.c);
    else if (a.is_const() && a.c == 1)
      prod = b;
    else if (b.is_const() && b.c == 1)
      prod = a;
    else if ((a.is_const() && a.c == 0) || (b.is_const() && b.c == 0))
      prod = Value::constant(0);
    Value r = additive({prod, c}, prod.c + c.c);
    if (a.kind == Value::kTid && b.is_const() && c.is_const() && b.c == 1 && c.c == 0)
      r = a;
    write(s, o[0], r);
    return;
  }
  if (is(base, "IADD3") || is(base, "IADD") || is(base, "IADD32I")) {
    auto src = sources(1);
    std::vector<Value> t;
    std::uint64_t sum = 0;
    bool plain = true;
    for (std::size_t i : src) {
      t.push_back(val(i));
      sum += t.back().c;
      plain = plain && !o[i].neg;
    }
    auto preds = preds_after(1);
    bool const x = ins.has_mod("X");
    if (x) {
      // The high word of a 64-bit addition: carries come from the low word's predicates.
      std::vector<std::size_t> cin;
      for (std::size_t i : preds)
        if (i > src.back())
          cin.push_back(i);
      bool carries_known = true;
      for (std::size_t i : cin) {
        PredValue const p = read_pred(o[i], s);
        if (!p.known())
          carries_known = false;
        else if (p.kind == PredValue::kTrue)
          ++sum;
      }
      Value v = carries_known ? additive(t, static_cast<std::uint32_t>(sum)) : Value::unknown();
      if (v.kind == Value::kParamAddr)
        v = Value::unknown();
      if (!carries_known)
        for (auto const& y : t)
          v.add_origins(y);
      write(s, o[0], v);
      for (std::size_t i : preds)
        if (i < src.front())
          write_pred(o[i], pred_unknown(), s);
      return;
    }
    Value const v = additive(t, static_cast<std::uint32_t>(sum));
    write(s, o[0], v);
    // Carry-outs: the predicates between the destination and the first source.
    int nc = 0;
    for (std::size_t i : preds)
      if (!src.empty() && i < src.front()) {
        PredValue p = pred_unknown();
        if (v.is_const() && plain)
          p = PredValue::of(((sum >> (32 + nc)) & 1u) != 0);
        write_pred(o[i], p, s);
        ++nc;
      }
    return;
  }
  if (is(base, "VIADD")) {
    auto src = sources(1);
    if (src.size() < 2) {
      clobber(ins, s);
      return;
    }
    Value const a = val(src[0]), b = val(src[1]);
    write(s, o[0], additive({a, b}, a.c + b.c));
    return;
  }
  if (is(base, "VIADDMNMX") || is(base, "IMNMX") || is(base, "VIMNMX")) {
    auto src = sources(1);
    auto preds = preds_after(1);
    bool const uns = ins.has_mod("U32");
    PredValue const sel = preds.empty() ? pred_unknown() : read_pred(o[preds.back()], s);
    Value r = Value::unknown();
    std::uint32_t x = 0, y = 0;
    bool ok = false;
    if (is(base, "VIADDMNMX") && src.size() >= 3) {
      Value const a = val(src[0]), b = val(src[1]), c = val(src[2]);
      ok = a.is_const() && b.is_const() && c.is_const();
      x = a.c + b.c;
      y = c.c;
    } else if (!is(base, "VIADDMNMX") && src.size() >= 2) {
      Value const a = val(src[src.size() - 2]), b = val(src[src.size() - 1]);
      ok = a.is_const() && b.is_const();
      x = a.c;
      y = b.c;
    }
    if (ok && sel.known()) {
      bool const x_less = cmp(PredValue::kLt, x, y, uns);
      bool const want_min = sel.kind == PredValue::kTrue;
      r = Value::constant(want_min == x_less ? x : y);
    }
    write(s, o[0], r);
    return;
  }
  if (is(base, "LEA")) {
    auto src = sources(1);
    bool const hi = ins.has_mod("HI");
    bool const x = ins.has_mod("X");
    if (src.size() < (hi ? 4u : 3u)) {
      clobber(ins, s);
      return;
    }
    Value const a = val(src[0]), b = val(src[1]);
    Value const sh = val(src.back());
    Value r = Value::unknown();
    if (!hi && !x) {
      if (a.is_const() && sh.is_const())
        r = additive({Value::constant(a.c << (sh.c & 31)), b}, (a.c << (sh.c & 31)) + b.c);
      else
        r.add_origins(b);
      // Carry-out predicate.
      for (std::size_t i : preds_after(1))
        if (i < src.front())
          write_pred(o[i], pred_unknown(), s);
    } else {
      Value const c = val(src[2]);
      if (!x && a.is_const() && c.is_const() && sh.is_const() && b.is_const()) {
        std::uint64_t const v = (static_cast<std::uint64_t>(c.c) << 32) | a.c;
        r = Value::constant(static_cast<std::uint32_t>((v << (sh.c & 31)) >> 32) + b.c);
      } else {
        r.add_origins(b);
      }
      for (std::size_t i : preds_after(1))
        if (i < src.front())
          write_pred(o[i], pred_unknown(), s);
    }
    write(s, o[0], r);
    return;
  }
  if (is(base, "SHF")) {
    auto src = sources(1);
    if (src.size() < 3) {
      clobber(ins, s);
      return;
    }
    Value const a = val(src[0]), sh = val(src[1]), b = val(src[2]);
    bool const left = ins.has_mod("L");
    bool const hi = ins.has_mod("HI");
    bool const sgn = ins.has_mod("S32") || ins.has_mod("S64");
    Value r = Value::unknown();
    if (a.is_const() && sh.is_const() && b.is_const()) {
      std::uint64_t const v = (static_cast<std::uint64_t>(b.c) << 32) | a.c;
      unsigned const n = sh.c & 63u;
      std::uint64_t res;
      if (left)
        res = v << n;
      else if (sgn)
        res = static_cast<std::uint64_t>(static_cast<std::int64_t>(v) >> n);
      else
        res = v >> n;
      r = from_u64(res, hi);
    } else if (!left && hi && a.is_const() && a.c == 0 && sh.is_const() && b.kind == Value::kTid &&
               !sgn && (sh.c & 63u) >= 5 && (sh.c & 63u) < 32) {
      r = Value::constant(b.c >> ((sh.c & 63u) - 5)); // the warp index from threadIdx.x
    }
    write(s, o[0], r);
    return;
  }
  if (is(base, "LOP3") || is(base, "LOP")) {
    // [P,] d, a, b, c, lut [, P]
    std::size_t di = 0;
    Operand const* pdst = nullptr;
    if (is_pred(o[0])) {
      pdst = &o[0];
      di = 1;
    }
    auto src = sources(di + 1);
    if (di >= o.size() || src.size() < 4) {
      clobber(ins, s);
      return;
    }
    Value const a = val(src[0]), b = val(src[1]), c = val(src[2]), l = val(src[3]);
    Value r = Value::unknown();
    if (a.is_const() && b.is_const() && c.is_const() && l.is_const()) {
      std::uint32_t res = 0;
      for (int bit = 0; bit < 32; ++bit) {
        unsigned const idx =
            (((a.c >> bit) & 1u) << 2) | (((b.c >> bit) & 1u) << 1) | ((c.c >> bit) & 1u);
        res |= ((l.c >> idx) & 1u) << bit;
      }
      r = Value::constant(res);
    } else if (l.is_const() && l.c == 0xc0 &&
               (a.kind == Value::kParam || b.kind == Value::kParam)) {
      // a & b: masking a parameter word to its low byte or half word.
      Value const& pv = a.kind == Value::kParam ? a : b;
      Value const& mv = a.kind == Value::kParam ? b : a;
      if (mv.is_const() && (mv.c == 0xff || mv.c == 0xffff || mv.c == 0xffffffffu)) {
        std::uint32_t const sz = mv.c == 0xff ? 1 : mv.c == 0xffff ? 2 : 4;
        std::uint64_t kv = 0;
        if (env.param_value(pv.c, sz, &kv))
          r = Value::constant(static_cast<std::uint32_t>(kv));
        else {
          r = pv;
          r.size = static_cast<std::uint8_t>(std::min<std::uint32_t>(pv.size, sz));
        }
      }
    } else {
      int nonconst = 0;
      Value const* only = nullptr;
      for (Value const* v : {&a, &b, &c})
        if (!v->is_const()) {
          ++nonconst;
          only = v;
        }
      if (nonconst == 1)
        r.add_origins(*only); // alignment masks keep the pointer's origin
    }
    write(s, o[di], r);
    if (pdst) {
      PredValue p = pred_unknown();
      if (r.is_const())
        p = PredValue::of(r.c != 0);
      else if (r.kind == Value::kParam) {
        p.kind = PredValue::kCmp;
        p.op = PredValue::kNe;
        p.offset = r.c;
        p.size = r.size;
        p.k = 0;
        p.is_unsigned = true;
        p = constrained(p, env);
      }
      write_pred(*pdst, p, s);
    }
    return;
  }
  if (is(base, "SEL") || is(op, "FSEL")) {
    auto src = sources(1);
    auto preds = preds_after(1);
    if (src.size() < 2 || preds.empty() || is(op, "FSEL")) {
      clobber(ins, s);
      return;
    }
    PredValue const p = read_pred(o[preds.back()], s);
    Value const a = val(src[0]), b = val(src[1]);
    write(s, o[0], p.kind == PredValue::kTrue ? a : p.kind == PredValue::kFalse ? b : join(a, b));
    return;
  }
  if (is(base, "ISETP")) {
    // Pd, Pd2, a, b, Pcombine [, Pex]
    auto preds = preds_after(0);
    auto src = sources(0);
    PredValue::Op cop;
    if (preds.size() < 3 || src.size() < 2 || !parse_cmp(ins, &cop)) {
      clobber(ins, s);
      return;
    }
    bool const uns = ins.has_mod("U32");
    bool const ex = ins.has_mod("EX");
    Value const a = val(src[0]), b = val(src[1]);
    PredValue res = pred_unknown();
    PredValue const pex = ex && preds.size() >= 4 ? read_pred(o[preds[3]], s) : pred_unknown();
    if (a.is_const() && b.is_const()) {
      bool const c = cmp(cop, a.c, b.c, uns);
      if (!ex)
        res = PredValue::of(c);
      else {
        bool const eq = a.c == b.c;
        switch (cop) {
        case PredValue::kEq:
          res = eq ? pex : PredValue::of(false);
          break;
        case PredValue::kNe:
          res = eq ? pex : PredValue::of(true);
          break;
        default:
          res = eq ? pex : PredValue::of(c);
          break;
        }
      }
    } else if (!ex && (a.kind == Value::kParam || b.kind == Value::kParam) &&
               (a.is_const() || b.is_const())) {
      Value const& pv = a.kind == Value::kParam ? a : b;
      Value const& kv = a.kind == Value::kParam ? b : a;
      res.kind = PredValue::kCmp;
      res.op = a.kind == Value::kParam ? cop : swapped(cop);
      res.is_unsigned = uns;
      res.offset = pv.c;
      res.size = pv.size;
      res.k = kv.c;
      res = constrained(res, env);
    }
    PredValue const comb = read_pred(o[preds[2]], s);
    PredValue d1 = pred_unknown(), d2 = pred_unknown();
    if (ins.has_mod("AND")) {
      d1 = pred_and(res, comb);
      d2 = pred_and(negate(res), comb);
    } else if (ins.has_mod("OR")) {
      d1 = pred_or(res, comb);
      d2 = pred_or(negate(res), comb);
    } else if (ins.has_mod("XOR")) {
      d1 = pred_xor(res, comb);
      d2 = pred_xor(negate(res), comb);
    }
    write_pred(o[preds[0]], d1, s);
    write_pred(o[preds[1]], d2, s);
    return;
  }
  if (is(base, "PLOP3")) {
    // Pd, Pd2, a, b, c, lut, lut2
    auto preds = preds_after(0);
    auto src = sources(0);
    if (preds.size() < 5 || src.size() < 2) {
      clobber(ins, s);
      return;
    }
    std::array<PredValue, 3> const in = {read_pred(o[preds[2]], s), read_pred(o[preds[3]], s),
                                         read_pred(o[preds[4]], s)};
    Value const l1 = val(src[0]), l2 = val(src[1]);
    std::array<std::uint8_t, 2> copy{}; // the key of the predicate a result copies, or 0
    for (int d = 0; d < 2; ++d) {
      Value const& l = d == 0 ? l1 : l2;
      PredValue r = pred_unknown();
      if (l.is_const()) {
        // The result is known if it is the same for every unknown input, and a copy of input j
        // (or of its negation) if it equals it (its negation) for every unknown input.
        auto fits = [](PredValue const& p, int v) {
          return !p.known() || (p.kind == PredValue::kTrue) == (v == 1);
        };
        int seen = -1;
        bool same = true;
        std::array<bool, 3> is_copy = {true, true, true}, is_neg = {true, true, true};
        for (int v = 0; v < 8; ++v) {
          int const bits[3] = {(v >> 2) & 1, (v >> 1) & 1, v & 1};
          if (!fits(in[0], bits[0]) || !fits(in[1], bits[1]) || !fits(in[2], bits[2]))
            continue;
          int const bit = static_cast<int>((l.c >> v) & 1u);
          if (seen < 0)
            seen = bit;
          else if (seen != bit)
            same = false;
          for (std::size_t j = 0; j < 3; ++j) {
            is_copy[j] = is_copy[j] && bit == bits[j];
            is_neg[j] = is_neg[j] && bit != bits[j];
          }
        }
        if (same && seen >= 0)
          r = PredValue::of(seen == 1);
        else
          for (std::size_t j = 0; j < 3; ++j) {
            Operand const& x = o[preds[2 + j]];
            if (in[j].known() || x.reg < 0 || x.reg >= kPT || !(is_copy[j] || is_neg[j]))
              continue;
            // The input as read is the register's value negated when x.neg.
            r = is_copy[j] ? in[j] : negate(in[j]);
            copy[static_cast<std::size_t>(d)] =
                canonical_key(s, x.file, x.reg, x.neg != is_neg[j]);
            break;
          }
      }
      write_pred(o[preds[static_cast<std::size_t>(d)]], r, s);
    }
    // After both writes: a copy of a predicate this instruction overwrote copies nothing now.
    for (std::size_t d = 0; d < 2; ++d) {
      Operand const& dst = o[preds[d]];
      std::uint8_t const k = copy[d];
      if (k == 0 || dst.reg < 0 || dst.reg >= kPT)
        continue;
      bool clobbered = false;
      for (std::size_t e = 0; e < 2; ++e) {
        Operand const& w = o[preds[e]];
        if (w.reg >= 0 && w.reg < kPT &&
            (k == pred_key(w.file, w.reg, false) || k == pred_key(w.file, w.reg, true)))
          clobbered = true;
      }
      if (!clobbered)
        s.same[pred_index(dst.file, dst.reg)] = k;
    }
    return;
  }
  if (is(op, "SHFL")) {
    // Pd, d, a, b, c: an index shuffle of a warp-uniform constant is that constant.
    std::size_t di = is_pred(o[0]) ? 1 : 0;
    if (di >= o.size()) {
      clobber(ins, s);
      return;
    }
    if (di == 1)
      write_pred(o[0], pred_unknown(), s);
    Value const a = val(di + 1);
    write(s, o[di], ins.has_mod("IDX") && a.is_const() ? a : Value::unknown());
    return;
  }
  if (is(op, "HFMA2")) {
    // HFMA2.MMA d, -RZ, RZ, 0, 0 is how ptxas writes a zero.
    auto src = sources(1);
    bool zero = src.size() == 4;
    for (std::size_t k = 0; zero && k < src.size(); ++k) {
      Value const v = val(src[k]);
      zero = v.is_const() && v.c == 0;
    }
    write(s, o[0], zero ? Value::constant(0) : Value::unknown());
    return;
  }
  clobber(ins, s);
}

} // namespace

Dataflow run_dataflow(Cfg const& cfg, Environment const& env) {
  Dataflow df;
  std::size_t const n = cfg.nodes.size();
  df.in.resize(n);
  df.feasible.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    df.feasible[i].assign(cfg.nodes[i].succ.size(), false);
  if (n == 0)
    return df;
  df.in[0] = State::entry();
  std::deque<int> work = {0};
  std::vector<char> queued(n, 0);
  queued[0] = 1;
  while (!work.empty()) {
    int const id = work.front();
    work.pop_front();
    queued[static_cast<std::size_t>(id)] = 0;
    Node const& nd = cfg.nodes[static_cast<std::size_t>(id)];
    State s = df.in[static_cast<std::size_t>(id)];
    for (std::size_t i = nd.begin; i < nd.end; ++i)
      step(nd.fn->code[i], env, s);
    Instr const& last = nd.last();
    PredValue cond = PredValue::of(true);
    bool const branch = is(last.op, "BRA") || is(last.op, "JMP");
    bool const stop =
        is(last.op, "EXIT") || is(last.op, "KILL") || (is(last.op, "BPT") && last.has_mod("TRAP"));
    if (branch)
      cond = branch_condition(last, s);
    else
      cond = guard_value(last, s);
    // Indirect branches: the target when the index is known.
    std::int64_t target = -1;
    if ((is(last.op, "BRX") || is(last.op, "JMX")) && !last.ops.empty()) {
      Value const r = operand_value(last.ops[0], env, s);
      if (r.is_const()) {
        std::int64_t imm = 0;
        for (std::size_t k = 1; k < last.ops.size(); ++k)
          if (last.ops[k].kind == Operand::Kind::kImm)
            imm = last.ops[k].imm;
        target = static_cast<std::int64_t>(r.c) + imm +
                 (is(last.op, "BRX") ? static_cast<std::int64_t>(last.addr) + 16 : 0);
        bool any = false;
        for (auto const& e : nd.succ)
          any = any || (e.kind == EdgeKind::kIndirect && e.target_addr == target);
        if (!any)
          target = -1; // not one of the known targets: keep them all
      }
    }
    bool const unresolved_call = is(last.op, "CALL");
    for (std::size_t k = 0; k < nd.succ.size(); ++k) {
      Edge const& e = nd.succ[k];
      bool ok = true;
      switch (e.kind) {
      case EdgeKind::kFall:
        if (branch || stop || is(last.op, "CALL") || is(last.op, "RET") || is(last.op, "BRX") ||
            is(last.op, "JMX"))
          ok = cond.kind != PredValue::kTrue || (is(last.op, "CALL") && nd.succ.size() == 1);
        break;
      case EdgeKind::kTaken:
      case EdgeKind::kCall:
        ok = cond.kind != PredValue::kFalse;
        break;
      case EdgeKind::kIndirect:
        ok = cond.kind != PredValue::kFalse && (target < 0 || e.target_addr == target);
        break;
      case EdgeKind::kReturn:
        ok = true;
        break;
      }
      if (!ok)
        continue;
      df.feasible[static_cast<std::size_t>(id)][k] = true;
      // A callee we could not follow may change any register.
      bool const opaque = unresolved_call && e.kind == EdgeKind::kFall && nd.succ.size() == 1;
      if (df.in[static_cast<std::size_t>(e.to)].merge(opaque ? State::entry() : s) &&
          !queued[static_cast<std::size_t>(e.to)]) {
        queued[static_cast<std::size_t>(e.to)] = 1;
        work.push_back(e.to);
      }
    }
  }
  df.live.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    df.live[i] = df.in[i].reached ? 1 : 0;
  return df;
}

} // namespace moefin::audit
