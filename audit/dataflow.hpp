#pragma once
// A forward dataflow over the registers of a kernel's CFG: constant propagation (with the
// parameter values a launch is assumed to have, and the warp index when one warp is analysed),
// which parameter a value was loaded from, and which parameters an address derives from by
// additions (pointer + index * size). Edges whose branch predicate is decided are infeasible.
// Anything the evaluator does not model makes its destinations unknown, never a wrong constant.

#include "audit/cfg.hpp"

#include <array>
#include <cstdint>
#include <vector>

namespace moefin::audit {

/// A register's abstract value.
struct Value {
  enum Kind : std::uint8_t {
    kUndef,     // no path reached this point yet
    kConst,     // c
    kParam,     // the parameter bytes [c, c + size) (zero-extended), value unknown
    kParamAddr, // the generic address of parameter byte c (TMA descriptors of grid constants)
    kTid,       // threadIdx.x of a thread of warp c (only when one warp is analysed)
    kUnknown,
  };
  static constexpr std::uint8_t kManyOrigins = 255;
  Kind kind = kUndef;
  std::uint8_t size = 4;
  std::uint8_t norig = 0; // origins in orig, or kManyOrigins
  std::uint32_t c = 0;
  std::array<std::uint32_t, 3> orig{}; // parameter offsets an address may derive from

  static Value constant(std::uint32_t v) {
    Value x;
    x.kind = kConst;
    x.c = v;
    return x;
  }
  static Value unknown() {
    Value x;
    x.kind = kUnknown;
    return x;
  }
  bool is_const() const { return kind == kConst; }
  void add_origin(std::uint32_t off);
  void add_origins(Value const& o);
  friend bool operator==(Value const& a, Value const& b);
};

/// A predicate's abstract value.
struct PredValue {
  enum Kind : std::uint8_t {
    kUndef,
    kTrue,
    kFalse,
    kCmp, // (parameter bytes [offset, offset + size) <op> k) != neg; value unknown
    kUnknown,
  };
  enum Op : std::uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };
  Kind kind = kUndef;
  Op op = kEq;
  bool is_unsigned = false;
  bool neg = false;
  std::uint8_t size = 4;
  std::uint32_t offset = 0;
  std::uint32_t k = 0;
  static PredValue of(bool b) {
    PredValue p;
    p.kind = b ? kTrue : kFalse;
    return p;
  }
  bool known() const { return kind == kTrue || kind == kFalse; }
  friend bool operator==(PredValue const& a, PredValue const& b);
};

char const* cmp_text(PredValue::Op op); // "==", "!=", "<", ...

/// A comparison of a parameter with a constant whose outcome is fixed (a runtime PDL switch
/// resolved to the branch that waits).
struct Constraint {
  std::uint32_t offset = 0;
  std::uint8_t size = 4;
  PredValue::Op op = PredValue::kEq;
  bool is_unsigned = false;
  std::uint32_t k = 0;
  bool truth = true;
};

/// What the evaluator knows about the launch.
struct Environment {
  std::uint32_t param_base = 0x210; // c[0x0] offset of parameter byte 0
  std::uint32_t param_size = 0;     // 0: unknown (every c[0x0] at or above the base is a parameter)
  std::int64_t param_addr_slot = -1; // c[0x0] offset holding the parameter block's generic address
  std::vector<std::int16_t> known;   // known[i] = byte i of the parameter block, or -1
  std::vector<std::uint32_t> constant2; // constant bank 2
  std::vector<Constraint> constraints;
  int warp = -1; // analyse one warp: threadIdx.x / 32 == warp (blockDim = (n, 1, 1))

  /// The parameter bytes [off, off + size) when all are known.
  bool param_value(std::uint32_t off, std::uint32_t size, std::uint64_t* v) const;
};

/// Registers and predicates at one program point. A register last written by an instruction
/// guarded by an undecided predicate also keeps the value it has when that predicate held
/// (`cond`, under guard `key`): ptxas predicates whole chains (@!P0 LDC, @!P0 IMAD, @!P0 LDG),
/// and the chain's own reads must see the chain's values. A chain may change predicate file
/// half-way (@!UP2 ULDC, then @!P5 IADD3 after PLOP3.LUT P5 = UP2): a predicate that holds a
/// copy of another (`same`) names the copied one in its guard key, so both halves share a key.
struct State {
  std::array<Value, 256> r;
  std::array<Value, 64> ur;
  std::array<PredValue, 8> p;
  std::array<PredValue, 8> up;
  std::array<std::uint8_t, 320> key{}; // 0: none; else guard_key() of the writing guard
  std::array<Value, 320> cond;
  // [P0..P7, UP0..UP7]: 0, or the key of the predicate (and sense) this one is a copy of.
  std::array<std::uint8_t, 16> same{};
  bool reached = false;
  static State entry();
  bool merge(State const& other); // join; true when this changed
};

/// The key of a guard (@P3, @!UP1) for State::key in `s`; 0 for none. A guard on a copy of a
/// predicate has the copied predicate's key.
std::uint8_t guard_key(Instr const& ins, State const& s);

/// `s` as `ins` sees it when its guard holds (the guard chain's values substituted).
State guarded_view(Instr const& ins, State const& s);

/// The fixed point: the state entering each reachable node, and which edges are feasible.
struct Dataflow {
  std::vector<State> in;                   // empty after drop_states()
  std::vector<std::vector<bool>> feasible; // [node][edge index]
  std::vector<char> live;                  // [node] reached by the fixed point
  bool reachable(int node) const { return live[static_cast<std::size_t>(node)] != 0; }
  /// Frees the per-node states (about 14 KB each) once a pass has read what it needs: the
  /// warp-by-warp audit runs a pass per warp and would otherwise hold them all.
  void drop_states() { std::vector<State>().swap(in); }
};

/// Runs the analysis to its fixed point.
Dataflow run_dataflow(Cfg const& cfg, Environment const& env);

/// Applies one instruction to `s`.
void step(Instr const& ins, Environment const& env, State& s);

/// The guard of `ins` in state `s`: kTrue when it certainly executes, kFalse never, else unknown.
PredValue guard_value(Instr const& ins, State const& s);

/// The branch condition of a BRA/EXIT (guard and predicate operand together).
PredValue branch_condition(Instr const& ins, State const& s);

/// The value of an operand (registers, immediates, constant bank 0/2); `hi` reads the upper
/// register of a pair.
Value operand_value(Operand const& o, Environment const& env, State const& s, bool hi = false);

} // namespace moefin::audit
