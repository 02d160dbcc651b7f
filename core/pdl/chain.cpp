#include "core/pdl/chain.hpp"

#include "core/pdl/json_guard.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>

namespace moefin::pdl {

namespace {

using Json = nlohmann::ordered_json; // buffers keep the order of the file

using L = ChainLimits;

/// Parsing context: the file name, for errors that name the file and the JSON path.
struct Reader {
  std::string origin;

  [[noreturn]] void fail(std::string const& ptr, std::string const& what) const {
    throw ChainError(origin, ptr.empty() ? "/" : ptr, what);
  }

  static char const* type_of(Json const& j) {
    switch (j.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "an integer";
    case Json::value_t::number_float:
      return "a number";
    default:
      return "an unsupported value";
    }
  }

  void expect_keys(Json const& obj, std::string const& ptr,
                   std::vector<std::string> const& allowed) const {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (auto const& a : allowed)
        ok = ok || a == it.key();
      if (!ok) {
        std::string list;
        for (auto const& a : allowed)
          list += (list.empty() ? "" : ", ") + a;
        fail(ptr + "/" + it.key(), "unknown key '" + it.key() + "' (allowed: " + list + ")");
      }
    }
  }

  Json const& member(Json const& obj, std::string const& ptr, std::string const& key) const {
    auto it = obj.find(key);
    if (it == obj.end())
      fail(ptr + "/" + key, "missing required key '" + key + "'");
    return *it;
  }

  std::string string_of(Json const& j, std::string const& ptr) const {
    if (!j.is_string())
      fail(ptr, std::string("expected a string, found ") + type_of(j));
    return j.get<std::string>();
  }

  std::int64_t int_of(Json const& j, std::string const& ptr, std::int64_t lo,
                      std::int64_t hi) const {
    if (!j.is_number_integer())
      fail(ptr, std::string("expected an integer, found ") + type_of(j));
    if (j.is_number_unsigned() &&
        j.get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail(ptr, "value " + std::to_string(j.get<std::uint64_t>()) + " out of range [" +
                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
    std::int64_t const v = j.get<std::int64_t>();
    if (v < lo || v > hi)
      fail(ptr, "value " + std::to_string(v) + " out of range [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]");
    return v;
  }

  std::string name_of(Json const& j, std::string const& ptr, char const* what) const {
    std::string const s = string_of(j, ptr);
    if (s.size() > static_cast<std::size_t>(L::kNameChars))
      fail(ptr, std::string("a ") + what + " name of " + std::to_string(s.size()) +
                    " characters (at most " + std::to_string(L::kNameChars) + ")");
    bool ok = !s.empty() && (std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_');
    for (char c : s)
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-');
    if (!ok)
      fail(ptr, std::string("'") + pointer_token(s) + "' is not a valid " + what +
                    " name (letters, digits, '_' and '-', starting with a letter)");
    return s;
  }
};

std::vector<std::string> split_words(std::string const& s) {
  std::istringstream is(s);
  std::vector<std::string> words;
  std::string w;
  while (is >> w)
    words.push_back(w);
  return words;
}

std::string list_names(std::vector<std::string> const& names) {
  std::string out;
  for (auto const& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

Op parse_op(Reader const& r, Chain const& c, Json const& j, std::string const& ptr) {
  std::string const text = r.string_of(j, ptr);
  auto const w = split_words(text);
  char const* const grammar =
      "expected 'read BUF', 'write BUF', 'wait', 'trigger' or 'fence gpu|sys'";
  if (w.empty())
    r.fail(ptr, std::string("empty op (") + grammar + ")");
  Op op;
  if (w[0] == "read" || w[0] == "write") {
    op.kind = w[0] == "read" ? OpKind::kRead : OpKind::kWrite;
    if (w.size() != 2)
      r.fail(ptr, "'" + text + "': " + w[0] + " takes exactly one buffer name");
    op.buffer = c.buffer_index(w[1]);
    if (op.buffer < 0)
      r.fail(ptr, "unknown buffer '" + w[1] + "' in '" + text +
                      "' (buffers: " + list_names(c.buffers) + ")");
  } else if (w[0] == "wait" || w[0] == "trigger") {
    op.kind = w[0] == "wait" ? OpKind::kWait : OpKind::kTrigger;
    if (w.size() != 1)
      r.fail(ptr, "'" + text + "': " + w[0] + " takes no argument");
  } else if (w[0] == "fence") {
    op.kind = OpKind::kFence;
    if (w.size() != 2 || (w[1] != "gpu" && w[1] != "sys"))
      r.fail(ptr, "'" + text + "': a fence needs its scope, 'fence gpu' or 'fence sys'");
    op.scope = w[1] == "gpu" ? FenceScope::kGpu : FenceScope::kSys;
  } else {
    r.fail(ptr, "unknown op '" + w[0] + "' (" + grammar + ")");
  }
  return op;
}

Path parse_path(Reader const& r, Chain const& c, Json const& j, std::string const& ptr) {
  if (!j.is_array())
    r.fail(ptr, std::string("a path is an array of ops, found ") + Reader::type_of(j));
  if (j.size() > static_cast<std::size_t>(L::kOps))
    r.fail(ptr, "a path of " + std::to_string(j.size()) + " ops (at most " +
                    std::to_string(L::kOps) + ")");
  Path p;
  for (std::size_t i = 0; i < j.size(); ++i)
    p.push_back(parse_op(r, c, j[i], ptr + "/" + std::to_string(i)));
  return p;
}

Kernel parse_kernel(Reader const& r, Chain const& c, Json const& j, std::string const& ptr,
                    bool graph) {
  if (!j.is_object())
    r.fail(ptr, std::string("a kernel is an object, found ") + Reader::type_of(j));
  r.expect_keys(j, ptr, {"name", "pdl", "ctas", "paths", "path", "note"});
  Kernel k;
  k.name = r.name_of(r.member(j, ptr, "name"), ptr + "/name", "kernel");
  if (j.contains("pdl")) {
    if (graph)
      r.fail(ptr + "/pdl", "'pdl' is for stream order; in a graph the edge ports say it");
    if (!j["pdl"].is_boolean())
      r.fail(ptr + "/pdl",
             std::string("expected true or false, found ") + Reader::type_of(j["pdl"]));
    k.pdl = j["pdl"].get<bool>();
  }
  if (j.contains("ctas"))
    k.ctas = static_cast<int>(r.int_of(j["ctas"], ptr + "/ctas", 1, L::kCtas));
  if (j.contains("note"))
    k.note = r.string_of(j["note"], ptr + "/note");
  bool const one = j.contains("path"), many = j.contains("paths");
  if (one == many)
    r.fail(ptr, one ? "give either 'path' or 'paths', not both"
                    : "missing required key 'paths' (or 'path' for a single path)");
  if (one) {
    k.paths.push_back(parse_path(r, c, j["path"], ptr + "/path"));
  } else {
    Json const& ps = j["paths"];
    if (!ps.is_array() || ps.empty())
      r.fail(ptr + "/paths", "expected a non-empty array of paths");
    if (ps.size() > static_cast<std::size_t>(L::kPaths))
      r.fail(ptr + "/paths", std::to_string(ps.size()) + " paths (at most " +
                                 std::to_string(L::kPaths) + " per kernel)");
    for (std::size_t i = 0; i < ps.size(); ++i)
      k.paths.push_back(parse_path(r, c, ps[i], ptr + "/paths/" + std::to_string(i)));
  }
  return k;
}

int kernel_ref(Reader const& r, Chain const& c, Json const& j, std::string const& ptr) {
  std::string const name = r.string_of(j, ptr);
  int const k = c.kernel_index(name);
  if (k < 0) {
    std::vector<std::string> names;
    for (auto const& kk : c.kernels)
      names.push_back(kk.name);
    r.fail(ptr, "missing kernel '" + name + "' (kernels: " + list_names(names) + ")");
  }
  return k;
}

Edge parse_edge(Reader const& r, Chain const& c, Json const& j, std::string const& ptr) {
  if (!j.is_object())
    r.fail(ptr, std::string("an edge is an object, found ") + Reader::type_of(j));
  r.expect_keys(j, ptr, {"from", "to", "port"});
  Edge e;
  e.from = kernel_ref(r, c, r.member(j, ptr, "from"), ptr + "/from");
  e.to = kernel_ref(r, c, r.member(j, ptr, "to"), ptr + "/to");
  std::string const port = r.string_of(r.member(j, ptr, "port"), ptr + "/port");
  if (port == "programmatic")
    e.port = Port::kProgrammatic;
  else if (port == "launch_completion")
    e.port = Port::kLaunchCompletion;
  else if (port == "default")
    e.port = Port::kDefault;
  else
    r.fail(ptr + "/port",
           "bad port '" + port + "' (expected programmatic, launch_completion or default)");
  if (e.from >= e.to)
    r.fail(ptr, "edge " + c.kernels[e.from].name + " -> " + c.kernels[e.to].name +
                    " goes backwards: list the kernels in a topological order of the edges");
  return e;
}

void parse_measured(Reader const& r, Chain& c, Json const& j, std::string const& ptr) {
  if (!j.is_object())
    r.fail(ptr, std::string("expected an object, found ") + Reader::type_of(j));
  r.expect_keys(j, ptr, {"gpu", "runs", "reads", "note"});
  c.measured_gpu = r.string_of(r.member(j, ptr, "gpu"), ptr + "/gpu");
  std::int64_t const runs = r.int_of(r.member(j, ptr, "runs"), ptr + "/runs", 1, 1LL << 40);
  Json const& reads = r.member(j, ptr, "reads");
  if (!reads.is_array() || reads.empty())
    r.fail(ptr + "/reads", "expected a non-empty array of measured reads");
  if (reads.size() > static_cast<std::size_t>(L::kMeasuredReads))
    r.fail(ptr + "/reads", std::to_string(reads.size()) + " measured reads (at most " +
                               std::to_string(L::kMeasuredReads) + ")");
  for (std::size_t i = 0; i < reads.size(); ++i) {
    std::string const p = ptr + "/reads/" + std::to_string(i);
    Json const& m = reads[i];
    if (!m.is_object())
      r.fail(p, std::string("expected an object, found ") + Reader::type_of(m));
    r.expect_keys(m, p, {"kernel", "buffer", "where", "stale"});
    MeasuredReads mr;
    mr.kernel = kernel_ref(r, c, r.member(m, p, "kernel"), p + "/kernel");
    std::string const buf = r.string_of(r.member(m, p, "buffer"), p + "/buffer");
    mr.buffer = c.buffer_index(buf);
    if (mr.buffer < 0)
      r.fail(p + "/buffer",
             "unknown buffer '" + buf + "' (buffers: " + list_names(c.buffers) + ")");
    std::string const where = r.string_of(r.member(m, p, "where"), p + "/where");
    if (where != "before_wait" && where != "after_wait")
      r.fail(p + "/where", "'" + where + "' is not one of before_wait, after_wait");
    mr.before_wait = where == "before_wait";
    mr.runs = runs;
    mr.stale = r.int_of(r.member(m, p, "stale"), p + "/stale", 0, runs);
    bool found = false;
    Kernel const& k = c.kernels[mr.kernel];
    for (Path const& path : k.paths) {
      int const w = first_of(path, OpKind::kWait);
      for (std::size_t o = 0; o < path.size(); ++o)
        if (path[o].kind == OpKind::kRead && path[o].buffer == mr.buffer &&
            (w < 0 || static_cast<int>(o) < w) == mr.before_wait)
          found = true;
    }
    if (!found)
      r.fail(p, "kernel '" + k.name + "' has no read of '" + buf + "' " +
                    (mr.before_wait ? "before" : "after") + " its wait");
    c.measured.push_back(mr);
  }
}

} // namespace

ChainError::ChainError(std::string const& file, std::string const& pointer, std::string const& what)
    : InputError(file + ": " + (pointer.empty() ? std::string() : pointer + ": ") + what) {}

int Chain::kernel_index(std::string const& n) const {
  for (std::size_t i = 0; i < kernels.size(); ++i)
    if (kernels[i].name == n)
      return static_cast<int>(i);
  return -1;
}

int Chain::buffer_index(std::string const& n) const {
  for (std::size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i] == n)
      return static_cast<int>(i);
  return -1;
}

int first_of(Path const& p, OpKind kind) {
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i].kind == kind)
      return static_cast<int>(i);
  return -1;
}

Chain parse_chain(std::string const& text, std::string const& origin) {
  Reader const r{origin};
  if (text.size() > L::kFileBytes)
    r.fail("", "a file of " + std::to_string(text.size()) + " bytes (at most " +
                   std::to_string(L::kFileBytes) + ")");
  // Depth, sizes, duplicate keys and numbers first, without building anything that scales with
  // the input; only then the document.
  JsonBounds bounds;
  bounds.max_depth = L::kDepth;
  JsonFault fault;
  if (!check_json(text, bounds, &fault))
    r.fail(fault.pointer, fault.what);
  Json j;
  try {
    j = Json::parse(text);
  } catch (Json::exception const& e) {
    // nlohmann prefixes "[json.exception.parse_error.101] "; the rest names line and column.
    std::string what = e.what();
    auto const close = what.find("] ");
    if (close != std::string::npos)
      what = what.substr(close + 2);
    throw ChainError(origin, "/", "invalid JSON: " + what);
  }
  if (!j.is_object())
    r.fail("", std::string("a chain description is a JSON object, found ") + Reader::type_of(j));
  r.expect_keys(j, "",
                {"name", "description", "source", "buffers", "kernels", "edges", "iterations",
                 "expected", "measured"});
  Chain c;
  c.origin = origin;
  c.name = r.name_of(r.member(j, "", "name"), "/name", "chain");
  if (j.contains("description"))
    c.description = r.string_of(j["description"], "/description");
  if (j.contains("source"))
    c.source = r.string_of(j["source"], "/source");

  Json const& bufs = r.member(j, "", "buffers");
  if (!bufs.is_object() || bufs.empty())
    r.fail("/buffers", "expected a non-empty object mapping buffer names to descriptions");
  if (bufs.size() > static_cast<std::size_t>(L::kBuffers))
    r.fail("/buffers",
           std::to_string(bufs.size()) + " buffers (at most " + std::to_string(L::kBuffers) + ")");
  for (auto it = bufs.begin(); it != bufs.end(); ++it) {
    std::string const ptr = "/buffers/" + pointer_token(it.key());
    c.buffers.push_back(r.name_of(Json(it.key()), ptr, "buffer"));
    c.buffer_notes.push_back(r.string_of(it.value(), ptr));
  }

  c.graph = j.contains("edges");
  Json const& ks = r.member(j, "", "kernels");
  if (!ks.is_array() || ks.empty())
    r.fail("/kernels", "expected a non-empty array of kernels");
  if (ks.size() > static_cast<std::size_t>(L::kKernels))
    r.fail("/kernels",
           std::to_string(ks.size()) + " kernels (at most " + std::to_string(L::kKernels) + ")");
  std::set<std::string> names;
  std::size_t total_ops = 0;
  for (std::size_t i = 0; i < ks.size(); ++i) {
    std::string const ptr = "/kernels/" + std::to_string(i);
    c.kernels.push_back(parse_kernel(r, c, ks[i], ptr, c.graph));
    if (!names.insert(c.kernels.back().name).second)
      r.fail(ptr + "/name", "duplicate kernel name '" + c.kernels.back().name + "'");
    for (Path const& p : c.kernels.back().paths)
      total_ops += p.size();
    if (total_ops > static_cast<std::size_t>(L::kTotalOps))
      r.fail(ptr, "more than " + std::to_string(L::kTotalOps) +
                      " ops over all paths of all kernels up to this one");
  }

  if (c.graph) {
    Json const& es = j["edges"];
    if (!es.is_array())
      r.fail("/edges", std::string("expected an array of edges, found ") + Reader::type_of(es));
    std::set<std::pair<int, int>> seen;
    for (std::size_t i = 0; i < es.size(); ++i) {
      std::string const ptr = "/edges/" + std::to_string(i);
      Edge const e = parse_edge(r, c, es[i], ptr);
      if (!seen.insert({e.from, e.to}).second)
        r.fail(ptr, "a second edge " + c.kernels[e.from].name + " -> " + c.kernels[e.to].name +
                        " (one edge, one port, per pair of kernels)");
      c.edges.push_back(e);
    }
  }

  if (j.contains("iterations"))
    c.iterations = static_cast<int>(r.int_of(j["iterations"], "/iterations", 1, L::kIterations));
  std::int64_t const instances = static_cast<std::int64_t>(c.kernels.size()) * c.iterations;
  if (instances > L::kInstances)
    r.fail("/iterations", std::to_string(c.kernels.size()) + " kernels x " +
                              std::to_string(c.iterations) +
                              " iterations = " + std::to_string(instances) +
                              " kernel instances (at most " + std::to_string(L::kInstances) + ")");
  if (std::int64_t const pairs = verifier_pairs(c); pairs > L::kPairs)
    r.fail("", std::to_string(pairs) + " pairs of conflicting accesses to check (at most " +
                   std::to_string(L::kPairs) + "; fewer kernels, iterations or accesses)");
  if (std::int64_t const events = schedule_events(c); events > L::kScheduleEvents)
    r.fail("", std::to_string(events) + " events in one simulated schedule (at most " +
                   std::to_string(L::kScheduleEvents) + "; fewer CTAs, ops or iterations)");
  if (std::int64_t const acc = schedule_accesses(c); acc > L::kScheduleAccesses)
    r.fail("", std::to_string(acc) + " reads and writes in one simulated schedule (at most " +
                   std::to_string(L::kScheduleAccesses) + "; fewer CTAs, accesses or iterations)");
  if (j.contains("expected")) {
    std::string const v = r.string_of(j["expected"], "/expected");
    if (v == "ordered")
      c.expected = Verdict::kOrdered;
    else if (v == "race")
      c.expected = Verdict::kRace;
    else
      r.fail("/expected", "'" + v + "' is not one of ordered, race");
  }
  if (j.contains("measured"))
    parse_measured(r, c, j["measured"], "/measured");
  return c;
}

Chain load_chain(std::string const& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ChainError(path, "", std::string("cannot open the file (") + std::strerror(errno) + ")");
  // At most one byte past the limit is read, so /dev/zero or a huge file costs nothing.
  std::string text;
  std::size_t const cap = ChainLimits::kFileBytes + 1;
  std::vector<char> buf(1 << 16);
  while (text.size() < cap) {
    in.read(buf.data(), static_cast<std::streamsize>(std::min(buf.size(), cap - text.size())));
    std::streamsize const got = in.gcount();
    if (got <= 0)
      break;
    text.append(buf.data(), static_cast<std::size_t>(got));
  }
  if (in.bad() || (!in.eof() && text.size() < cap))
    throw ChainError(path, "/", "cannot read the file (a directory?)");
  if (text.size() > ChainLimits::kFileBytes)
    throw ChainError(path, "/",
                     "larger than " + std::to_string(ChainLimits::kFileBytes) +
                         " bytes (the limit of a chain description)");
  return parse_chain(text, path);
}

std::int64_t verifier_pairs(Chain const& c) {
  // Per kernel and buffer, reads and writes summed over its paths: the verifier pairs every path
  // of the earlier kernel with every path of the later one.
  std::size_t const nb = c.buffers.size(), n = c.kernels.size();
  std::vector<std::int64_t> reads(n * nb, 0), writes(n * nb, 0);
  for (std::size_t k = 0; k < n; ++k)
    for (Path const& p : c.kernels[k].paths)
      for (Op const& op : p)
        if (op.is_access() && op.buffer >= 0 && static_cast<std::size_t>(op.buffer) < nb)
          ++(op.kind == OpKind::kWrite ? writes
                                       : reads)[k * nb + static_cast<std::size_t>(op.buffer)];
  std::int64_t pairs = 0;
  std::size_t const instances = n * static_cast<std::size_t>(std::max(c.iterations, 1));
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t m = a + 1; m < instances; ++m) {
      std::size_t const b = m % n;
      for (std::size_t x = 0; x < nb; ++x) {
        std::int64_t const ra = reads[a * nb + x], wa = writes[a * nb + x];
        std::int64_t const rb = reads[b * nb + x], wb = writes[b * nb + x];
        pairs += wa * rb + ra * wb + wa * wb;
      }
      if (pairs > ChainLimits::kPairs)
        return pairs; // enough to refuse; the counts above cannot overflow before this
    }
  return pairs;
}

std::int64_t schedule_accesses(Chain const& c) {
  std::int64_t per_iteration = 0;
  for (Kernel const& k : c.kernels) {
    std::int64_t most = 0;
    for (Path const& p : k.paths)
      most = std::max<std::int64_t>(
          most, std::count_if(p.begin(), p.end(), [](Op const& o) { return o.is_access(); }));
    per_iteration += static_cast<std::int64_t>(k.ctas) * most;
  }
  return per_iteration * std::max(c.iterations, 1);
}

std::int64_t schedule_events(Chain const& c) {
  std::int64_t per_iteration = 0;
  for (Kernel const& k : c.kernels) {
    std::size_t longest = 0;
    for (Path const& p : k.paths)
      longest = std::max(longest, p.size());
    per_iteration +=
        static_cast<std::int64_t>(k.ctas) * (static_cast<std::int64_t>(longest) + 2) + 4;
  }
  return per_iteration * std::max(c.iterations, 1);
}

char const* port_name(Port p) {
  switch (p) {
  case Port::kProgrammatic:
    return "programmatic";
  case Port::kLaunchCompletion:
    return "launch_completion";
  case Port::kDefault:
    return "default";
  }
  return "?";
}

char const* verdict_name(Verdict v) {
  return v == Verdict::kOrdered ? "ordered" : "race";
}

std::string op_text(Chain const& c, Op const& op) {
  switch (op.kind) {
  case OpKind::kRead:
    return "read " + c.buffers.at(op.buffer);
  case OpKind::kWrite:
    return "write " + c.buffers.at(op.buffer);
  case OpKind::kWait:
    return "wait";
  case OpKind::kTrigger:
    return "trigger";
  case OpKind::kFence:
    return op.scope == FenceScope::kGpu ? "fence gpu" : "fence sys";
  }
  return "?";
}

Chain captured_graph(Chain const& stream, int rounds) {
  if (stream.graph)
    throw std::invalid_argument("captured_graph: " + stream.name + " is already a graph");
  if (rounds < 1)
    throw std::invalid_argument("captured_graph: rounds " + std::to_string(rounds) + " < 1");
  Chain g = stream;
  g.name = stream.name + "_captured";
  g.graph = true;
  g.iterations = 1;
  g.kernels.clear();
  g.edges.clear();
  g.measured.clear(); // measured reads name kernels of the stream chain
  int const n = static_cast<int>(stream.kernels.size());
  for (int r = 0; r < rounds; ++r)
    for (int k = 0; k < n; ++k) {
      Kernel kern = stream.kernels[k];
      if (r > 0)
        kern.name += "_r" + std::to_string(r);
      int const m = r * n + k;
      if (m > 0)
        g.edges.push_back({m - 1, m, kern.pdl ? Port::kProgrammatic : Port::kDefault});
      kern.pdl = true; // unused in graph mode: the edge ports say it
      g.kernels.push_back(std::move(kern));
    }
  return g;
}

std::string to_json(Chain const& c) {
  nlohmann::ordered_json j;
  j["name"] = c.name;
  if (!c.description.empty())
    j["description"] = c.description;
  if (!c.source.empty())
    j["source"] = c.source;
  nlohmann::ordered_json bufs = nlohmann::ordered_json::object();
  for (std::size_t b = 0; b < c.buffers.size(); ++b)
    bufs[c.buffers[b]] = b < c.buffer_notes.size() ? c.buffer_notes[b] : "";
  j["buffers"] = bufs;
  nlohmann::ordered_json ks = nlohmann::ordered_json::array();
  for (Kernel const& k : c.kernels) {
    nlohmann::ordered_json kj;
    kj["name"] = k.name;
    if (!c.graph)
      kj["pdl"] = k.pdl;
    kj["ctas"] = k.ctas;
    nlohmann::ordered_json ps = nlohmann::ordered_json::array();
    for (Path const& p : k.paths) {
      nlohmann::ordered_json pj = nlohmann::ordered_json::array();
      for (Op const& op : p)
        pj.push_back(op_text(c, op));
      ps.push_back(pj);
    }
    kj["paths"] = ps;
    if (!k.note.empty())
      kj["note"] = k.note;
    ks.push_back(kj);
  }
  j["kernels"] = ks;
  if (c.graph) {
    nlohmann::ordered_json es = nlohmann::ordered_json::array();
    for (Edge const& e : c.edges)
      es.push_back({{"from", c.kernels[e.from].name},
                    {"to", c.kernels[e.to].name},
                    {"port", port_name(e.port)}});
    j["edges"] = es;
  }
  j["iterations"] = c.iterations;
  if (c.expected)
    j["expected"] = verdict_name(*c.expected);
  return j.dump(2) + "\n";
}

} // namespace moefin::pdl
