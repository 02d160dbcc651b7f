#pragma once
// SHA-256 (FIPS 180-4) of a file, for the provenance of every audited cubin.

#include <string>

namespace moefin::audit {

/// Lower-case hex digest of `data`.
std::string sha256_hex(std::string const& data);

/// Digest of a file's bytes; throws FileError when it cannot be read.
std::string sha256_file(std::string const& path);

} // namespace moefin::audit
