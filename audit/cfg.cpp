#include "audit/cfg.hpp"

#include "audit/text.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

namespace moefin::audit {

namespace {

bool is_branch(std::string const& op) {
  return op == "BRA" || op == "JMP" || op == "BRX" || op == "JMX";
}

bool is_exit(std::string const& op) {
  return op == "EXIT" || op == "KILL";
}

bool is_trap(Instr const& i) {
  return i.op == "BPT" && i.has_mod("TRAP");
}

/// Blocks of one function: leaders are index 0, every label any branch of the function may
/// reach, and every instruction after a block-ending one.
struct FunctionBlocks {
  std::vector<std::size_t> starts; // sorted
  std::size_t block_of(std::size_t index) const {
    auto it = std::upper_bound(starts.begin(), starts.end(), index);
    return static_cast<std::size_t>(it - starts.begin()) - 1;
  }
};

FunctionBlocks split(SassFunction const& f) {
  std::set<std::size_t> leaders = {0};
  for (auto const& [label, index] : f.labels)
    if (index < f.code.size())
      leaders.insert(index); // a label may be a branch target
  for (std::size_t i = 0; i < f.code.size(); ++i)
    if (ends_block(f.code[i]) && i + 1 < f.code.size())
      leaders.insert(i + 1);
  FunctionBlocks b;
  b.starts.assign(leaders.begin(), leaders.end());
  return b;
}

std::string label_of(Instr const& i) {
  for (auto const& o : i.ops)
    if (o.kind == Operand::Kind::kLabel)
      return o.text;
  return {};
}

struct Builder {
  SassModule const& module;
  Cfg cfg;
  std::map<SassFunction const*, FunctionBlocks> blocks;
  // (function, block, context) -> node
  std::map<std::tuple<SassFunction const*, std::size_t, int>, int> index;
  struct Context {
    int parent = -1;
    SassFunction const* ret_fn = nullptr; // where RET goes: the instruction after the call
    std::size_t ret_index = 0;
    int depth = 0;
    SassFunction const* callee = nullptr;
  };
  std::vector<Context> contexts;
  std::map<std::tuple<int, SassFunction const*, std::size_t>, int> context_of_call;
  std::vector<int> work;

  explicit Builder(SassModule const& m) : module(m) { contexts.push_back({}); }

  FunctionBlocks const& blocks_of(SassFunction const& f) {
    auto it = blocks.find(&f);
    if (it == blocks.end())
      it = blocks.emplace(&f, split(f)).first;
    return it->second;
  }

  int node(SassFunction const& f, std::size_t code_index, int ctx) {
    FunctionBlocks const& fb = blocks_of(f);
    std::size_t const b = fb.block_of(code_index);
    auto key = std::make_tuple(&f, b, ctx);
    auto it = index.find(key);
    if (it != index.end())
      return it->second;
    Node n;
    n.fn = &f;
    n.begin = fb.starts[b];
    n.end = b + 1 < fb.starts.size() ? fb.starts[b + 1] : f.code.size();
    n.context = ctx;
    int const id = static_cast<int>(cfg.nodes.size());
    cfg.nodes.push_back(std::move(n));
    index.emplace(key, id);
    work.push_back(id);
    return id;
  }

  /// Where a label leads: the same function first (local labels and inlined subroutines), else
  /// a function of the module with that name.
  bool resolve(SassFunction const& f, std::string const& label, SassFunction const** tf,
               std::size_t* ti) {
    auto it = f.labels.find(label);
    if (it != f.labels.end() && it->second < f.code.size()) {
      *tf = &f;
      *ti = it->second;
      return true;
    }
    if (SassFunction const* g = module.find(label)) {
      *tf = g;
      *ti = 0;
      return true;
    }
    return false;
  }

  void add(int from, int to, EdgeKind k, std::uint32_t addr = 0) {
    auto& s = cfg.nodes[from].succ;
    for (auto const& e : s)
      if (e.to == to && e.kind == k && e.target_addr == addr)
        return;
    s.push_back({to, k, addr});
  }

  void expand(int id) {
    Node const n = cfg.nodes[id]; // copy: node() may grow the vector
    SassFunction const& f = *n.fn;
    Instr const& last = f.code[n.end - 1];
    bool const has_next = n.end < f.code.size();
    auto fall = [&] {
      if (has_next)
        add(id, node(f, n.end, n.context), EdgeKind::kFall);
    };
    if (!ends_block(last)) {
      fall();
      return;
    }
    if (is_exit(last.op) || is_trap(last)) {
      if (last.guarded())
        fall();
      return;
    }
    if (last.op == "BRA" || last.op == "JMP") {
      SassFunction const* tf = nullptr;
      std::size_t ti = 0;
      if (resolve(f, label_of(last), &tf, &ti) && tf == &f)
        add(id, node(f, ti, n.context), EdgeKind::kTaken);
      else
        cfg.notes.push_back("branch at " + hex(last.addr) + " to an unknown target: not followed");
      if (last.conditional())
        fall();
      return;
    }
    if (last.op == "BRX" || last.op == "JMX") {
      std::vector<std::size_t> targets;
      for (auto const& l : last.targets) {
        auto it = f.labels.find(l);
        if (it != f.labels.end() && it->second < f.code.size())
          targets.push_back(it->second);
      }
      if (!targets.empty()) {
        ++cfg.indirect_annotated;
      } else {
        // No annotation: every labelled instruction of the function may be the target.
        ++cfg.indirect_unannotated;
        for (auto const& [label, index] : f.labels)
          if (index < f.code.size())
            targets.push_back(index);
      }
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      for (std::size_t t : targets)
        add(id, node(f, t, n.context), EdgeKind::kIndirect, f.code[t].addr);
      if (last.guarded())
        fall();
      return;
    }
    if (last.op == "CALL") {
      SassFunction const* tf = nullptr;
      std::size_t ti = 0;
      bool const known = resolve(f, label_of(last), &tf, &ti);
      Context const& c = contexts[n.context];
      bool recursive = false;
      for (int p = n.context; p > 0; p = contexts[p].parent)
        if (contexts[p].callee == tf && known)
          recursive = true;
      if (!known || recursive || c.depth >= 16) {
        cfg.notes.push_back("call at " + hex(last.addr) +
                            (known ? " nests too deep or recurses" : " to an unknown function") +
                            ": taken as returning without effect");
        fall();
        return;
      }
      auto key = std::make_tuple(n.context, &f, n.end - 1);
      auto it = context_of_call.find(key);
      int ctx;
      if (it == context_of_call.end()) {
        ctx = static_cast<int>(contexts.size());
        Context nc;
        nc.parent = n.context;
        nc.ret_fn = &f;
        nc.ret_index = n.end;
        nc.depth = c.depth + 1;
        nc.callee = tf;
        contexts.push_back(nc);
        context_of_call.emplace(key, ctx);
      } else {
        ctx = it->second;
      }
      add(id, node(*tf, ti, ctx), EdgeKind::kCall);
      if (last.guarded())
        fall();
      return;
    }
    if (last.op == "RET") {
      Context const c = contexts[n.context];
      if (n.context > 0 && c.ret_index < c.ret_fn->code.size())
        add(id, node(*c.ret_fn, c.ret_index, c.parent), EdgeKind::kReturn);
      if (last.guarded())
        fall();
      return;
    }
    fall();
  }
};

} // namespace

bool ends_block(Instr const& ins) {
  return is_branch(ins.op) || is_exit(ins.op) || ins.op == "CALL" || ins.op == "RET" ||
         is_trap(ins);
}

Cfg build_cfg(SassModule const& module, SassFunction const& kernel) {
  Builder b(module);
  if (kernel.code.empty())
    return b.cfg;
  b.node(kernel, 0, 0);
  while (!b.work.empty()) {
    int const id = b.work.back();
    b.work.pop_back();
    b.expand(id);
  }
  return std::move(b.cfg);
}

} // namespace moefin::audit
