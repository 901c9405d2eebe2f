// The one exception type the engines throw. The ABI barrier in src/ turns it
// into the status code it carries and the message knn_last_error() returns.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "../include/knn_gpgpu.h"

namespace knn {

class Error : public std::runtime_error {
 public:
  Error(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const noexcept { return status_; }

 private:
  int status_;
};

#if defined(__MINGW32__)
// libstdc++ on MinGW routes vsnprintf to MinGW's C99 printf (%zu, %lld work);
// plain `printf` would make GCC check against msvcrt's older formats.
__attribute__((format(gnu_printf, 1, 2)))
#elif defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
inline std::string
format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char small[512];
  va_list copy;
  va_copy(copy, args);
  const int len = std::vsnprintf(small, sizeof small, fmt, copy);
  va_end(copy);
  std::string out;
  if (len < 0) {
    out = fmt;
  } else if (static_cast<size_t>(len) < sizeof small) {
    out.assign(small, static_cast<size_t>(len));
  } else {
    out.resize(static_cast<size_t>(len) + 1);
    std::vsnprintf(&out[0], out.size(), fmt, args);
    out.resize(static_cast<size_t>(len));
  }
  va_end(args);
  return out;
}

[[noreturn]] inline void fail(int status, const std::string& message) {
  throw Error(status, message);
}

inline void require(bool ok, int status, const char* what) {
  if (!ok) fail(status, what);
}

}  // namespace knn
