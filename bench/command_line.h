// Command-line handling shared by the CPU benchmarks and the demo: a mistake
// prints "<program>: <message>" and the usage text to stderr and exits with
// status 2; --help (or -h) prints the usage text and exits 0.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace knn_bench {

struct CommandLine {
  const char* program;
  const char* usage;

  [[noreturn]] void fail(const std::string& message) const {
    std::fprintf(stderr, "%s: %s\n%s", program, message.c_str(), usage);
    std::exit(2);
  }

  void exit_if_help(const std::string& arg) const {
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", usage);
      std::exit(0);
    }
  }

  // The value that follows option argv[*i]; *i moves on to it.
  std::string value_after(int argc, char** argv, int* i) const {
    if (*i + 1 >= argc) fail(std::string("missing value after ") + argv[*i]);
    return argv[++*i];
  }

  // A whole number in [min, max]; 1e6 notation is accepted.
  int64_t count(const std::string& text, const char* what, int64_t min, int64_t max) const {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || v != std::floor(v) || v < static_cast<double>(min) ||
        v > static_cast<double>(max))
      fail(std::string("bad ") + what + " '" + text + "'");
    return static_cast<int64_t>(v);
  }
};

}  // namespace knn_bench
