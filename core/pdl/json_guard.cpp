#include "core/pdl/json_guard.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>
#include <vector>

namespace moefin::pdl {

namespace {

using Json = nlohmann::json;

/// The SAX handler: one frame per open container, so memory and stack stay bounded by
/// max_depth whatever the input; the first problem stops the parse.
class Guard {
public:
  Guard(JsonBounds const& b, JsonFault* fault) : b_(b), fault_(fault) {}

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(Json::number_integer_t) { return value(); }
  bool number_unsigned(Json::number_unsigned_t) { return value(); }
  bool number_float(Json::number_float_t v, Json::string_t const&) {
    if (!value())
      return false;
    if (!std::isfinite(v))
      return fail(pointer(), "number out of range");
    return true;
  }
  bool string(Json::string_t& s) {
    if (!value())
      return false;
    if (s.size() > b_.max_string)
      return fail(pointer(), "string of " + std::to_string(s.size()) + " bytes (at most " +
                                 std::to_string(b_.max_string) + ")");
    return true;
  }
  bool binary(Json::binary_t&) { return fail(pointer(), "binary values are not JSON text"); }

  bool start_object(std::size_t) { return open(true); }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(false); }
  bool end_array() { return close(); }

  bool key(Json::string_t& k) {
    Frame& f = frames_.back();
    if (k.size() > b_.max_string)
      return fail(pointer(), "key of " + std::to_string(k.size()) + " bytes (at most " +
                                 std::to_string(b_.max_string) + ")");
    if (f.keys.size() >= b_.max_keys)
      return fail(pointer(), "object with more than " + std::to_string(b_.max_keys) + " keys");
    f.key = k;
    if (!f.keys.insert(k).second)
      return fail(pointer(), "duplicate key '" + pointer_token(k) + "'");
    return true;
  }

  bool parse_error(std::size_t, std::string const&, nlohmann::detail::exception const& ex) {
    // nlohmann prefixes "[json.exception.parse_error.101] "; the rest names line and column.
    std::string what = ex.what();
    auto const close = what.find("] ");
    if (close != std::string::npos)
      what = what.substr(close + 2);
    bool const overflow = ex.id == 406; // "number overflow parsing '1e400'"
    std::string const ptr = frames_.empty() ? "/" : pointer();
    return fail(overflow ? ptr : "/",
                overflow ? "number out of range (" + what + ")" : "invalid JSON: " + what);
  }

private:
  struct Frame {
    bool object = false;
    std::size_t elements = 0; // arrays: values so far
    std::string key;          // objects: the current key
    std::set<std::string> keys;
  };

  /// A value in the current container (arrays count their elements here).
  bool value() {
    if (frames_.empty() || frames_.back().object)
      return true;
    Frame& f = frames_.back();
    if (f.elements >= b_.max_elements)
      return fail(pointer(),
                  "array with more than " + std::to_string(b_.max_elements) + " elements");
    ++f.elements;
    return true;
  }

  bool open(bool object) {
    if (!value())
      return false;
    if (static_cast<int>(frames_.size()) >= b_.max_depth)
      return fail(pointer(), "nested deeper than " + std::to_string(b_.max_depth) + " levels");
    frames_.push_back(Frame{object, 0, {}, {}});
    return true;
  }

  bool close() {
    frames_.pop_back();
    return true;
  }

  /// The pointer of the value being read: keys of objects, indices of arrays.
  std::string pointer() const {
    std::string p;
    for (Frame const& f : frames_)
      p += "/" +
           (f.object ? pointer_token(f.key) : std::to_string(f.elements == 0 ? 0 : f.elements - 1));
    return p.empty() ? "/" : p;
  }

  bool fail(std::string const& ptr, std::string const& what) {
    if (!failed_) {
      failed_ = true;
      fault_->pointer = ptr;
      fault_->what = what;
    }
    return false;
  }

  JsonBounds b_;
  JsonFault* fault_;
  std::vector<Frame> frames_;
  bool failed_ = false;
};

} // namespace

std::string pointer_token(std::string const& key, std::size_t max) {
  std::string out;
  for (char c : key) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else if (static_cast<unsigned char>(c) < 0x20)
      out += '?'; // control characters would break the one-line message
    else
      out += c;
  }
  return out;
}

bool check_json(std::string const& text, JsonBounds const& bounds, JsonFault* fault) {
  Guard g(bounds, fault);
  try {
    return Json::sax_parse(text, &g) && fault->what.empty();
  } catch (Json::exception const& e) {
    fault->pointer = "/";
    fault->what = std::string("invalid JSON: ") + e.what();
    return false;
  }
}

} // namespace moefin::pdl
