// io_util.h - what the tool's file readers share (point_io.cpp, ply_format.cpp,
// mesh_io.cpp): the error they throw, the line reader with its limits, the
// field splitting and number parsing of text files, and the check of a
// coordinate in the precision it is read in. Internal to tools/.
#ifndef KNN_TOOLS_IO_UTIL_H
#define KNN_TOOLS_IO_UTIL_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "point_io.h"

namespace knn_cli {
namespace io {

// Every reader's error: "PATH: what", with what cut to a bounded length.
// The messages quote the file (names, counts, excerpts of 40 bytes), and a
// hostile header can fill every quoted part at once; the bound keeps the
// message one short line whatever the file holds.
constexpr size_t kMessageLimit = 320;
[[noreturn]] inline void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(
      path + ": " + (what.size() > kMessageLimit ? what.substr(0, kMessageLimit) + "..." : what));
}

inline bool host_is_little_endian() {
  const uint16_t one = 1;
  unsigned char b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

// Splits on whitespace and commas; empty fields between two commas count.
std::vector<std::string> split_fields(const std::string& line);

// The whole of s as a double (strtod's syntax: "1e3", "nan", "inf" too).
bool parse_double(const std::string& s, double* v);

std::string trim(const std::string& s);

// The longest line a text, PLY, STL or OBJ file may have. A point of 16
// coordinates in full precision takes under 500 bytes; a longer line is not
// such a file's, and refusing it before splitting keeps the time and memory
// of a rejection bounded (a 100 MB line is one memchr, not a copy).
constexpr size_t kMaxLineBytes = size_t{1} << 16;

// Lines of a text file, without copying the file: each line's bytes are
// checked for the limits above (and for NUL bytes) before anything else
// looks at them.
class LineReader {
 public:
  // From byte `pos`, which is after `lines_before` lines; `kind` names what
  // the file should be in the message of a line over the limit ("not a
  // point file?", "not an STL file?").
  LineReader(const std::string& path, const std::string& data, size_t pos = 0,
             const char* kind = "a point", int64_t lines_before = 0)
      : path_(path), data_(data), pos_(pos), kind_(kind), line_no_(lines_before) {}
  // The next line without its '\n' (and '\r'); false at the end.
  bool next(std::string* line);
  int64_t line_no() const { return line_no_; }
  size_t pos() const { return pos_; }

 private:
  const std::string& path_;
  const std::string& data_;
  size_t pos_;
  const char* kind_;
  int64_t line_no_;
};

// A coordinate as the library will hold it: the double itself, or rounded
// to float32 (`doubles` false); refuses what is not finite in that precision
// (NaN, infinity, or a double beyond float's range), naming where it is in
// the file: the library could only name the point. `where` makes that
// place's text, only when needed (a file has millions of values).
template <class Where>
double finite_coordinate(const std::string& path, double v, bool doubles, const Where& where) {
  const double kept = doubles ? v : static_cast<double>(static_cast<float>(v));
  if (!std::isfinite(kept))
    fail(path, where() + (doubles ? " is not a finite float64 coordinate"
                                  : " is not a finite float32 coordinate"));
  return kept;
}

// Whether a file read with `precision` is read in float64; `holds_doubles`:
// the file's values are doubles (what Precision::Auto follows).
inline bool reads_doubles(Precision precision, bool holds_doubles) {
  return precision == Precision::Float64 || (precision == Precision::Auto && holds_doubles);
}

}  // namespace io
}  // namespace knn_cli

#endif
