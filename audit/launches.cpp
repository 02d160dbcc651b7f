#include "audit/launches.hpp"

#include "audit/report.hpp"
#include "core/ops/errors.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace moefin::audit {

namespace {

using Json = nlohmann::ordered_json;

struct Reader {
  std::string origin;
  [[noreturn]] void fail(std::string const& ptr, std::string const& what) const {
    throw FileError(origin, (ptr.empty() ? "/" : ptr) + ": " + what);
  }
  void keys(Json const& o, std::string const& ptr, std::set<std::string> const& allowed) const {
    for (auto it = o.begin(); it != o.end(); ++it)
      if (!allowed.count(it.key())) {
        std::string list;
        for (auto const& a : allowed)
          list += (list.empty() ? "" : ", ") + a;
        fail(ptr + "/" + it.key(), "unknown key '" + it.key() + "' (allowed: " + list + ")");
      }
  }
  std::string str(Json const& o, std::string const& key, std::string const& ptr,
                  bool required) const {
    if (!o.contains(key)) {
      if (required)
        fail(ptr + "/" + key, "missing");
      return {};
    }
    if (!o[key].is_string())
      fail(ptr + "/" + key, "not a string");
    return o[key].get<std::string>();
  }
  pdl::Verdict verdict(Json const& v, std::string const& ptr) const {
    if (v.is_string() && v.get<std::string>() == "ordered")
      return pdl::Verdict::kOrdered;
    if (v.is_string() && v.get<std::string>() == "race")
      return pdl::Verdict::kRace;
    fail(ptr, "expected \"ordered\" or \"race\"");
  }
};

} // namespace

Launches parse_launches(std::string const& text, std::string const& origin) {
  Reader r{origin};
  Json j;
  try {
    j = Json::parse(text);
  } catch (Json::exception const& e) {
    std::string w = e.what();
    std::size_t const p = w.find("] ");
    r.fail("/", "not JSON: " + (p == std::string::npos ? w : w.substr(p + 2)));
  }
  if (!j.is_object())
    r.fail("/", "a launches file is a JSON object");
  r.keys(j, "",
         {"name", "description", "source", "buffers", "launches", "iterations", "expected", "check",
          "files"});
  Launches l;
  l.origin = origin;
  l.name = r.str(j, "name", "", true);
  l.description = r.str(j, "description", "", false);
  l.source = r.str(j, "source", "", false);
  if (j.contains("buffers")) {
    if (!j["buffers"].is_object())
      r.fail("/buffers", "not an object (buffer name -> what it holds)");
    for (auto it = j["buffers"].begin(); it != j["buffers"].end(); ++it) {
      if (!it.value().is_string())
        r.fail("/buffers/" + it.key(), "not a string");
      l.buffers.emplace_back(it.key(), it.value().get<std::string>());
    }
  }
  if (!j.contains("launches") || !j["launches"].is_array() || j["launches"].empty())
    r.fail("/launches", "missing, not an array, or empty");
  std::set<std::string> names;
  for (std::size_t i = 0; i < j["launches"].size(); ++i) {
    Json const& x = j["launches"][i];
    std::string const ptr = "/launches/" + std::to_string(i);
    if (!x.is_object())
      r.fail(ptr, "a launch is an object");
    r.keys(x, ptr, {"name", "kernel", "pdl", "threads", "assume", "params", "note"});
    Launch la;
    la.name = r.str(x, "name", ptr, true);
    la.note = r.str(x, "note", ptr, false);
    if (!x.contains("kernel"))
      r.fail(ptr + "/kernel", "missing");
    Json const& kj = x["kernel"];
    if (kj.is_string()) {
      la.alternatives.push_back({kj.get<std::string>(), 0});
    } else if (kj.is_array() && !kj.empty()) {
      for (std::size_t a = 0; a < kj.size(); ++a) {
        std::string const ap = ptr + "/kernel/" + std::to_string(a);
        Alternative alt;
        if (kj[a].is_string()) {
          alt.kernel = kj[a].get<std::string>();
        } else if (kj[a].is_object()) {
          r.keys(kj[a], ap, {"kernel", "threads"});
          alt.kernel = r.str(kj[a], "kernel", ap, true);
          if (kj[a].contains("threads")) {
            if (!kj[a]["threads"].is_number_unsigned() || kj[a]["threads"].get<long long>() < 1 ||
                kj[a]["threads"].get<long long>() > 1024)
              r.fail(ap + "/threads", "not an integer in [1, 1024]");
            alt.threads = kj[a]["threads"].get<int>();
          }
        } else {
          r.fail(ap, "an alternative is a symbol or {\"kernel\", \"threads\"}");
        }
        if (alt.kernel.empty())
          r.fail(ap, "empty kernel name");
        la.alternatives.push_back(alt);
      }
    } else {
      r.fail(ptr + "/kernel", "a symbol, or a non-empty list of alternatives");
    }
    la.kernel = la.alternatives.front().kernel;
    if (la.name.empty() || la.kernel.empty())
      r.fail(ptr, "empty name or kernel");
    if (!names.insert(la.name).second)
      r.fail(ptr + "/name", "duplicate launch name '" + la.name + "'");
    if (x.contains("pdl")) {
      if (!x["pdl"].is_boolean())
        r.fail(ptr + "/pdl", "not true or false");
      la.pdl = x["pdl"].get<bool>();
    }
    if (x.contains("threads")) {
      if (!x["threads"].is_number_unsigned() || x["threads"].get<long long>() < 1 ||
          x["threads"].get<long long>() > 1024)
        r.fail(ptr + "/threads", "not an integer in [1, 1024]");
      la.threads = x["threads"].get<int>();
    }
    if (x.contains("assume")) {
      if (!x["assume"].is_object())
        r.fail(ptr + "/assume", "not an object (parameter name -> integer or boolean)");
      for (auto it = x["assume"].begin(); it != x["assume"].end(); ++it) {
        std::string v;
        if (it.value().is_boolean())
          v = it.value().get<bool>() ? "1" : "0";
        else if (it.value().is_number_integer())
          v = std::to_string(it.value().get<long long>());
        else
          r.fail(ptr + "/assume/" + it.key(), "not an integer or boolean");
        try {
          la.assume.push_back(parse_assume(it.key() + "=" + v, ptr + "/assume"));
        } catch (InputError const& e) {
          r.fail(ptr + "/assume/" + it.key(), e.what());
        }
      }
    }
    if (x.contains("params")) {
      if (!x["params"].is_object())
        r.fail(ptr + "/params", "not an object (parameter name -> buffer)");
      for (auto it = x["params"].begin(); it != x["params"].end(); ++it) {
        std::vector<std::string> bufs;
        if (it.value().is_string())
          bufs.push_back(it.value().get<std::string>());
        else if (it.value().is_array() && !it.value().empty()) {
          for (auto const& b : it.value()) {
            if (!b.is_string())
              r.fail(ptr + "/params/" + it.key(), "not a buffer name or a list of them");
            bufs.push_back(b.get<std::string>());
          }
        } else {
          r.fail(ptr + "/params/" + it.key(), "not a buffer name or a list of them");
        }
        la.params.emplace_back(it.key(), bufs);
      }
    }
    l.launches.push_back(la);
  }
  if (j.contains("iterations")) {
    if (!j["iterations"].is_number_unsigned() || j["iterations"].get<long long>() < 1 ||
        j["iterations"].get<long long>() > 16)
      r.fail("/iterations", "not an integer in [1, 16]");
    l.iterations = j["iterations"].get<int>();
  }
  if (j.contains("expected"))
    l.expected = r.verdict(j["expected"], "/expected");
  if (j.contains("check")) {
    if (!j["check"].is_array())
      r.fail("/check", "not an array");
    for (std::size_t i = 0; i < j["check"].size(); ++i) {
      Json const& c = j["check"][i];
      std::string const ptr = "/check/" + std::to_string(i);
      if (!c.is_object())
        r.fail(ptr, "a check is {\"launch\", \"buffer\", \"where\", \"expected\"}");
      r.keys(c, ptr, {"launch", "buffer", "where", "expected"});
      ReadCheck rc;
      rc.launch = r.str(c, "launch", ptr, true);
      rc.buffer = r.str(c, "buffer", ptr, true);
      std::string const where = r.str(c, "where", ptr, false);
      if (!where.empty() && where != "before_wait" && where != "after_wait")
        r.fail(ptr + "/where", "expected \"before_wait\" or \"after_wait\"");
      rc.before_wait = where != "after_wait";
      if (!names.count(rc.launch))
        r.fail(ptr + "/launch", "no launch named '" + rc.launch + "'");
      if (c.contains("expected"))
        rc.expected = r.verdict(c["expected"], ptr + "/expected");
      l.checks.push_back(rc);
    }
  }
  if (j.contains("files")) {
    if (!j["files"].is_array())
      r.fail("/files", "not an array of paths");
    fs::path const base = fs::path(origin).parent_path();
    for (std::size_t i = 0; i < j["files"].size(); ++i) {
      if (!j["files"][i].is_string())
        r.fail("/files/" + std::to_string(i), "not a path");
      fs::path p = j["files"][i].get<std::string>();
      l.files.push_back((p.is_absolute() ? p : base / p).lexically_normal().string());
    }
  }
  return l;
}

Launches load_launches(std::string const& path) {
  std::ifstream in(path);
  if (!in)
    throw FileError(path, "cannot read the launches file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_launches(ss.str(), path);
}

namespace {

std::vector<Alternative> alternatives_of(Launch const& la) {
  return la.alternatives.empty() ? std::vector<Alternative>{{la.kernel, 0}} : la.alternatives;
}

} // namespace

std::vector<KernelRequest> launch_requests(Launches const& l) {
  std::vector<KernelRequest> out;
  for (Launch const& la : l.launches)
    for (Alternative const& a : alternatives_of(la)) {
      KernelRequest q;
      q.key = l.origin + ": launch '" + la.name + "'";
      q.kernel = a.kernel;
      q.assume = la.assume;
      q.threads = a.threads ? a.threads : la.threads;
      out.push_back(q);
    }
  return out;
}

std::size_t request_index(Launches const& l, std::size_t launch, std::size_t alt) {
  std::size_t i = 0;
  for (std::size_t k = 0; k < launch; ++k)
    i += alternatives_of(l.launches[k]).size();
  return i + alt;
}

std::vector<std::vector<std::string>> launch_fragment(Launches const& l, std::size_t launch,
                                                      AuditedKernel const& k,
                                                      std::vector<std::string>* unmapped) {
  Launch const& la = l.launches[launch];
  std::map<std::uint32_t, std::vector<std::string>> by_offset;
  for (auto const& [pname, bl] : la.params) {
    std::uint32_t off = 0, size = 0;
    if (!k.names.resolve(pname, &off, &size))
      throw FileError(l.origin, "launch '" + la.name + "': '" + pname +
                                    "' is not a parameter of " + short_name(k.facts.name));
    by_offset[off] = bl;
  }
  auto buffer = [&](std::uint32_t off) -> std::vector<std::string> {
    auto it = by_offset.find(off);
    return it == by_offset.end() ? std::vector<std::string>{} : it->second;
  };
  return fragment_paths(k, buffer, unmapped);
}

Composition compose(Launches const& l, std::vector<RequestResult> const& audited,
                    std::vector<std::size_t> const& choice) {
  Composition c;
  Json j;
  j["name"] = l.name;
  if (!l.description.empty())
    j["description"] = l.description;
  j["source"] = "moefin audit of " + l.origin + (l.source.empty() ? "" : "; " + l.source);
  Json bufs = Json::object();
  for (auto const& [b, what] : l.buffers)
    bufs[b] = what;
  for (Launch const& la : l.launches)
    for (auto const& [p, bl] : la.params)
      for (auto const& b : bl)
        if (!bufs.contains(b))
          bufs[b] = "named by the launches file";
  j["buffers"] = bufs;
  Json kernels = Json::array();
  for (std::size_t i = 0; i < l.launches.size(); ++i) {
    Launch const& la = l.launches[i];
    AuditedKernel const& k =
        audited.at(request_index(l, i, choice.empty() ? 0 : choice.at(i))).kernel;
    ComposedKernel ck;
    ck.launch = la.name;
    ck.audited = &k;
    auto const paths_of = launch_fragment(l, i, k, &ck.unmapped);
    Json kj;
    kj["name"] = la.name;
    kj["pdl"] = la.pdl;
    kj["ctas"] = 2;
    Json paths = Json::array();
    for (auto const& p : paths_of)
      paths.push_back(p);
    kj["paths"] = paths;
    kj["note"] = short_name(k.facts.name) + " (" + k.facts.arch +
                 "); trigger: " + trigger_text(k.facts) + (la.note.empty() ? "" : "; " + la.note);
    kernels.push_back(kj);
    c.kernels.push_back(ck);
  }
  j["kernels"] = kernels;
  if (l.iterations > 1)
    j["iterations"] = l.iterations;
  if (l.expected)
    j["expected"] = pdl::verdict_name(*l.expected);
  c.chain = pdl::parse_chain(j.dump(), l.origin + " (composed)");
  return c;
}

namespace {

enum class Class { kNever, kTriggersFirst, kWaitsFirst };

/// The weakest path of a kernel (the verifier's worst case).
Class weakest(pdl::Kernel const& k) {
  Class worst = Class::kWaitsFirst;
  for (pdl::Path const& p : k.paths) {
    int const w = pdl::first_of(p, pdl::OpKind::kWait);
    int const t = pdl::first_of(p, pdl::OpKind::kTrigger);
    Class c = w < 0               ? Class::kNever
              : (t >= 0 && t < w) ? Class::kTriggersFirst
                                  : Class::kWaitsFirst;
    if (static_cast<int>(c) < static_cast<int>(worst))
      worst = c;
  }
  return worst;
}

} // namespace

int linking_kernel(pdl::Chain const& c, int writer, int reader) {
  if (c.graph)
    return -1;
  for (int i = writer + 1; i <= reader; ++i) {
    pdl::Kernel const& k = c.kernels[static_cast<std::size_t>(i)];
    if (!k.pdl)
      return i; // launched after its primary completed
    Class const cl = weakest(k);
    if (i < reader && cl == Class::kWaitsFirst)
      return i;
    if (cl == Class::kNever)
      return -1; // a kernel in between that may not wait breaks the chain of completions
  }
  return -1;
}

} // namespace moefin::audit
