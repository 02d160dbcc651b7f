// Build shim of moefin's released-kernel audit (tools/audit/released.sh), found before the
// wheel's csrc/ on the include path. The released routing sources include tvm_ffi_utils.h only
// for its host-side check macros (the apache-tvm-ffi package, which the real header needs, is not
// part of the two wheels). The audit compiles those sources to cubins and never runs their host
// code; these macros keep it compiling and would throw if it ever ran.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace moefin_shim {

/// `check(cond) << "message"`: throws std::runtime_error with the message when cond is false.
class Check {
public:
  explicit Check(bool ok) : ok_(ok) {}
  Check(Check const&) = delete;
  ~Check() noexcept(false) {
    if (!ok_)
      throw std::runtime_error("check failed: " + os_.str());
  }
  template <class T> Check& operator<<(T const& v) {
    os_ << v;
    return *this;
  }

private:
  bool ok_;
  std::ostringstream os_;
};

} // namespace moefin_shim

#define TVM_FFI_ICHECK(cond) ::moefin_shim::Check(static_cast<bool>(cond))
#define TVM_FFI_ICHECK_EQ(a, b) TVM_FFI_ICHECK((a) == (b))
#define TVM_FFI_ICHECK_NE(a, b) TVM_FFI_ICHECK((a) != (b))
#define TVM_FFI_ICHECK_LT(a, b) TVM_FFI_ICHECK((a) < (b))
#define TVM_FFI_ICHECK_LE(a, b) TVM_FFI_ICHECK((a) <= (b))
#define TVM_FFI_ICHECK_GT(a, b) TVM_FFI_ICHECK((a) > (b))
#define TVM_FFI_ICHECK_GE(a, b) TVM_FFI_ICHECK((a) >= (b))
#define TVM_FFI_LOG_AND_THROW(kind) ::moefin_shim::Check(false) << #kind << ": "
