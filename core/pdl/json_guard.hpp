#pragma once
// A bounded pre-pass over JSON text, before any document is built from it: nesting depth, the
// length of arrays, objects and strings, duplicate keys and non-finite numbers are checked by
// nlohmann's SAX interface, which keeps one small frame per open container and never recurses.
// What passes can then be parsed into a DOM whose size and depth are known to be small.

#include <cstddef>
#include <string>

namespace moefin::pdl {

struct JsonBounds {
  int max_depth = 8;               // open arrays and objects at once
  std::size_t max_elements = 1024; // elements of one array
  std::size_t max_keys = 64;       // keys of one object
  std::size_t max_string = 16384;  // bytes of one string or key
};

/// Where the JSON text is bad: a JSON pointer ("/kernels/3/paths") and what is wrong.
struct JsonFault {
  std::string pointer;
  std::string what;
};

/// Checks `text` against `bounds`; returns false and fills `fault` at the first problem
/// (including invalid JSON, with nlohmann's line and column).
bool check_json(std::string const& text, JsonBounds const& bounds, JsonFault* fault);

/// A JSON pointer token: "~" and "/" escaped (RFC 6901), cut to `max` characters.
std::string pointer_token(std::string const& key, std::size_t max = 80);

} // namespace moefin::pdl
