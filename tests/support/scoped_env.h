// Sets an environment variable for a scope, then restores it (POSIX setenv /
// unsetenv; on Windows the CRT's _putenv_s, where an empty value removes it).
#pragma once

#include <cstdlib>
#include <string>

namespace knn_test {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) had_ = true, old_ = old;
    set(name_, value);
  }
  ~ScopedEnv() { set(name_, had_ ? old_.c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  static void set(const char* name, const char* value) {
#if defined(_WIN32)
    _putenv_s(name, value ? value : "");
#else
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
#endif
  }

  const char* name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace knn_test
