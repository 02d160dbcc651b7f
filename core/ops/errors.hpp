#pragma once
// Error classes with a fixed meaning for the command line: each maps to one exit status and is
// printed as a single line by the top-level handler (experiments/main.cpp).

#include <stdexcept>
#include <string>

namespace moefin {

/// Unknown subcommand or option, missing argument: usage message, exit 2.
class UsageError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A value outside its allowed range: one line naming the flag, the value and the range, exit 2.
class InputError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// An unreadable, foreign or truncated file: one line naming the file and the problem, exit 1.
class FileError : public std::runtime_error {
public:
  FileError(std::string const& path, std::string const& what)
      : std::runtime_error(path + ": " + what), path_(path) {}
  std::string const& path() const { return path_; }

private:
  std::string path_;
};

/// A failed CUDA call or a device-side check: exit 1.
class DeviceError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1; // a check failed, a file is bad, a race was found
constexpr int kExitUsage = 2;

} // namespace moefin
