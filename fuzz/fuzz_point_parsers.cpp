// Fuzz target: the knn-gpgpu tool's point file parsers (tools/point_io.h) on
// arbitrary bytes. They must return n*3 coordinates or throw
// std::runtime_error with a message naming the file; nothing else (no crash,
// no other exception, no read past the bytes).
#include <stdexcept>
#include <string>

#include "../tools/point_io.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the parser, the rest is the file.
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    std::vector<float> xyz;
    switch (data[0] % 4) {
      case 0:
        xyz = knn_cli::parse_text_points("fuzz.xyz", bytes);
        break;
      case 1:
        xyz = knn_cli::parse_ply_points("fuzz.ply", bytes);
        break;
      case 2:
        xyz = knn_cli::parse_npy_points("fuzz.npy", bytes);
        break;
      default:
        xyz = knn_cli::parse_raw_points("fuzz.bin", bytes);
        break;
    }
    knn_fuzz::expect(xyz.size() % 3 == 0, "a parser returned a partial point", 0);
  } catch (const std::runtime_error& e) {
    knn_fuzz::expect(std::string(e.what()).rfind("fuzz.", 0) == 0,
                     "a parser's message does not name the file", 0);
  }
  return 0;
}
