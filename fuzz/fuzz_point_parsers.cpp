// Fuzz target: the knn-gpgpu tool's point file parsers (tools/point_io.h) on
// arbitrary bytes: text (.xyz/.txt/.csv), PLY, .npy and raw, as 3-column
// readers and as tables of a fuzzed column range. They must return whole
// rows of finite coordinates, or throw std::runtime_error with a one-line
// message naming the file; nothing else (no crash, no other exception, no
// read past the bytes, no message that copies a long line).
#include <cmath>
#include <stdexcept>
#include <string>

#include "../tools/point_io.h"
#include "fuzz_support.h"

namespace {

using knn_fuzz::expect;

template <class T>
void expect_rows(const std::vector<T>& coords, int dim) {
  expect(dim > 0 ? coords.size() % static_cast<size_t>(dim) == 0 : coords.empty(),
         "a parser returned a partial row", 0);
  for (T v : coords) expect(std::isfinite(v), "a parser returned a non-finite coordinate", 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // The first byte picks the parser, the second the column range of the
  // table readers, the rest is the file.
  const std::string bytes(reinterpret_cast<const char*>(data) + 2, size - 2);
  const int min_dim = 1 + data[1] % 4;
  const int max_dim = min_dim + (data[1] >> 4) % 4;
  try {
    switch (data[0] % 7) {
      case 0: expect_rows(knn_cli::parse_text_points("fuzz.xyz", bytes), 3); break;
      case 1: expect_rows(knn_cli::parse_ply_points("fuzz.ply", bytes), 3); break;
      case 2: expect_rows(knn_cli::parse_npy_points("fuzz.npy", bytes), 3); break;
      case 3: expect_rows(knn_cli::parse_raw_points("fuzz.bin", bytes), 3); break;
      default: {
        const int which = data[0] % 7 - 4;
        const knn_cli::PointTable t =
            which == 0   ? knn_cli::parse_text_table("fuzz.csv", bytes, min_dim, max_dim)
            : which == 1 ? knn_cli::parse_ply_table("fuzz.ply", bytes, min_dim, max_dim)
                         : knn_cli::parse_npy_table("fuzz.npy", bytes, min_dim, max_dim);
        expect(t.dim == 0 || (t.dim >= min_dim && t.dim <= max_dim) || which == 1,
               "a table outside the asked column range", 0);
        expect_rows(t.coords, t.dim);
        break;
      }
    }
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    expect(what.rfind("fuzz.", 0) == 0, "a parser's message does not name the file", 0);
    expect(what.find('\n') == std::string::npos, "a parser's message is not one line", 0);
    expect(what.size() < 400, "a parser's message copies the file", 0);
  }
  return 0;
}
