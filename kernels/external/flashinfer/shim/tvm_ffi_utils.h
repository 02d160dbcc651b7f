#pragma once
// Host-only stand-in for the released sources' "tvm_ffi_utils.h" (FlashInfer's binding layer,
// which needs the apache-tvm-ffi headers that neither wheel ships). The routing sources use only
// its three check macros, each followed by `<< message`; here they throw std::runtime_error with
// the streamed message, so a failed check reaches moefin's one-line error handling.

#include <sstream>
#include <stdexcept>
#include <string>

namespace moefin::external::shim {

/// Collects a streamed message and throws it when the full expression ends.
class CheckFailure {
public:
  explicit CheckFailure(char const* what) { stream_ << "flashinfer: " << what; }
  CheckFailure(CheckFailure const&) = delete;
  CheckFailure& operator=(CheckFailure const&) = delete;
  ~CheckFailure() noexcept(false) { throw std::runtime_error(stream_.str()); }
  template <typename T> CheckFailure& operator<<(T const& value) {
    stream_ << value;
    return *this;
  }

private:
  std::ostringstream stream_;
};

} // namespace moefin::external::shim

// `if (ok) {} else CheckFailure(...) << msg;` keeps the trailing `<< msg` of the call sites legal.
#define TVM_FFI_ICHECK(cond)                                                                       \
  if (cond) {                                                                                      \
  } else                                                                                           \
    ::moefin::external::shim::CheckFailure("check failed: " #cond ": ")
#define TVM_FFI_ICHECK_LE(a, b) TVM_FFI_ICHECK((a) <= (b))
#define TVM_FFI_LOG_AND_THROW(kind) ::moefin::external::shim::CheckFailure(#kind ": ")
