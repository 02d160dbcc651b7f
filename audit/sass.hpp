#pragma once
// The SASS of a cubin as nvdisasm prints it (`nvdisasm -c`): functions, their instructions with
// guard predicates and operands, labels, and the branch targets nvdisasm annotates on indirect
// branches. Only what the audit reads is modelled; every other operand keeps its text.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moefin::audit {

/// Register files. RZ is R255, URZ is UR63, PT and UPT are predicate 7.
enum class RegFile : std::uint8_t { kNone, kR, kUR, kP, kUP, kB, kSR };
inline constexpr int kRZ = 255;
inline constexpr int kURZ = 63;
inline constexpr int kPT = 7;

struct Operand {
  enum class Kind : std::uint8_t { kReg, kImm, kConst, kMem, kLabel, kSpecial, kOther };
  Kind kind = Kind::kOther;
  RegFile file = RegFile::kNone; // kReg
  int reg = -1;
  bool neg = false;     // '-' (registers, constants) or '!' (predicates)
  bool inv = false;     // '~'
  bool abs = false;     // |R|
  bool wide = false;    // R2.64: a register pair
  std::int64_t imm = 0; // kImm: the integer value (float immediates: is_float, imm 0)
  bool is_float = false;
  // kConst: c[bank][index + offset]
  int bank = 0;
  std::int64_t offset = 0;
  RegFile index_file = RegFile::kNone;
  int index_reg = -1;
  // kMem: [base(.64) + ubase + offset], optionally behind desc[UR..]
  RegFile base_file = RegFile::kNone;
  int base_reg = -1;
  bool base_wide = false;
  int ubase_reg = -1; // a uniform register added to the address (not URZ)
  std::string text;   // as printed (kLabel: the label name; kSpecial: SR_TID.X, ...)

  bool is_reg(RegFile f) const { return kind == Kind::kReg && file == f; }
  bool is_zero_reg() const {
    return kind == Kind::kReg &&
           ((file == RegFile::kR && reg == kRZ) || (file == RegFile::kUR && reg == kURZ));
  }
  bool is_true_pred() const {
    return kind == Kind::kReg && (file == RegFile::kP || file == RegFile::kUP) && reg == kPT;
  }
};

struct Instr {
  std::uint32_t addr = 0;
  RegFile pred_file = RegFile::kNone; // guard: @P0, @!UP1; kNone when unguarded
  int pred = -1;
  bool pred_neg = false;
  std::string opcode; // "ISETP.NE.AND"
  std::string op;     // "ISETP"
  std::vector<Operand> ops;
  std::vector<std::string> targets; // indirect branch targets (labels) nvdisasm annotated
  std::size_t line = 0;             // line in the nvdisasm text (1-based)

  bool guarded() const { return pred_file != RegFile::kNone && !(pred == kPT && !pred_neg); }
  /// A branch or exit that may not be taken: guarded, or a predicate operand (BRA.U !UP0, ...).
  bool conditional() const;
  bool has_mod(char const* m) const; // ".AND" style modifier present in the opcode
};

struct SassFunction {
  std::string name;   // from the section (.text.NAME)
  std::string symbol; // the symbol the section defines (.global); differs when names are stripped
  bool entry = false; // a kernel (STO_CUDA_ENTRY), not a device function
  std::vector<Instr> code;
  std::map<std::string, std::size_t> labels; // label or symbol -> index of the instruction after
  std::size_t index_of(std::uint32_t addr) const; // code index of an address, or code.size()
};

struct SassModule {
  std::string arch; // ".target sm_90" -> "sm_90"
  std::vector<SassFunction> functions;
  SassFunction const* find(std::string const& name) const;
};

/// Parses `nvdisasm -c` output. Throws FileError naming `origin` and the line on text that is not
/// nvdisasm output.
SassModule parse_sass(std::string const& text, std::string const& origin);

/// Parses one operand (exposed for tests).
Operand parse_operand(std::string const& text);

} // namespace moefin::audit
