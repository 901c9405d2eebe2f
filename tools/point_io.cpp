// point_io.cpp - see point_io.h.
#include "point_io.h"

#include "io_util.h"
#include "ply_format.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace knn_cli {
namespace {

using io::fail;
using io::finite_coordinate;
using io::LineReader;
using io::parse_double;
using io::reads_doubles;
using io::split_fields;
using io::trim;

// The file in one buffer of its size (a stream copy would hold it twice);
// what cannot seek (a pipe) is read to its end.
std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  std::string bytes;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : -1;
  if (size >= 0) {
    bytes.resize(static_cast<size_t>(size));
    in.seekg(0);
    if (size > 0 && !in.read(&bytes[0], size)) fail(path, "read error");
  } else {
    in.clear();
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) fail(path, "read error");
    bytes = ss.str();
  }
  return bytes;
}

// "3 columns (x y z)", "2 or 3 columns (x y [z])", "1 to 16 columns".
std::string column_range_text(int min_dim, int max_dim) {
  if (min_dim == 3 && max_dim == 3) return "3 columns (x y z)";
  if (min_dim == 2 && max_dim == 2) return "2 columns (x y)";
  if (min_dim == max_dim) return std::to_string(min_dim) + " columns";
  if (min_dim == 2 && max_dim == 3) return "2 or 3 columns (x y [z])";
  return std::to_string(min_dim) + " to " + std::to_string(max_dim) + " columns";
}

// ---- NPY header ------------------------------------------------------------------------
// The header is a Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (1000, 3), }
// parsed as one: keys are whole string literals, so a value that happens to
// contain "'descr'" is a value, not a key. Exactly the three keys numpy
// writes, each once.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

class NpyHeaderParser {
 public:
  NpyHeaderParser(const std::string& path, const std::string& text) : path_(path), s_(text) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (!peek('}')) {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr" && !have_descr) {
        h.descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order" && !have_order) {
        h.fortran_order = boolean();
        have_order = true;
      } else if (key == "shape" && !have_shape) {
        h.shape = tuple();
        have_shape = true;
      } else if (key == "descr" || key == "fortran_order" || key == "shape") {
        bad("the key '" + key + "' appears twice");
      } else {
        bad("unexpected key '" + excerpt(key) +
            "' (a .npy header has 'descr', 'fortran_order', "
            "'shape')");
      }
      if (!peek(',')) break;
      expect(',');
    }
    expect('}');
    skip_space();
    if (i_ != s_.size()) bad("text after the closing '}'");
    for (const auto& [have, key] : {std::pair<bool, const char*>{have_descr, "descr"},
                                    {have_order, "fortran_order"},
                                    {have_shape, "shape"}})
      if (!have) fail(path_, ".npy header has no '" + std::string(key) + "'");
    return h;
  }

 private:
  [[noreturn]] void bad(const std::string& what) {
    fail(path_, "bad .npy header at byte " + std::to_string(i_) + ": " + what);
  }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool peek(char c) {
    skip_space();
    return i_ < s_.size() && s_[i_] == c;
  }
  void expect(char c) {
    if (!peek(c)) bad(std::string("expected '") + c + "'");
    ++i_;
  }
  // 'text' or "text"; numpy writes no escapes, so a backslash is refused.
  std::string string_literal() {
    skip_space();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) bad("expected a quoted string");
    const char quote = s_[i_++];
    const size_t end = s_.find(quote, i_);
    if (end == std::string::npos) bad("unterminated string");
    std::string text = s_.substr(i_, end - i_);
    if (text.find('\\') != std::string::npos) bad("escapes in strings are not supported");
    i_ = end + 1;
    return text;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] :
         {std::pair<const char*, bool>{"True", true}, {"False", false}}) {
      const size_t len = std::strlen(word);
      if (s_.compare(i_, len, word) == 0) {
        i_ += len;
        return value;
      }
    }
    bad("expected True or False");
  }
  // (), (n,), (n, d), ...: non-negative integers that fit in 64 bits.
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(');
    while (!peek(')')) {
      const size_t start = i_;
      uint64_t v = 0;
      bool overflow = false;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        const unsigned digit = static_cast<unsigned>(s_[i_++] - '0');
        overflow = overflow || v > (static_cast<uint64_t>(INT64_MAX) - digit) / 10;
        if (!overflow) v = v * 10 + digit;
      }
      if (i_ == start) bad("expected a non-negative integer in the shape");
      if (overflow)
        fail(path_, ".npy shape dimension " + excerpt(s_.substr(start, i_ - start)) +
                        " does not fit in 64 bits");
      dims.push_back(static_cast<int64_t>(v));
      if (!peek(',')) break;
      expect(',');
    }
    expect(')');
    return dims;
  }

  const std::string& path_;
  const std::string& s_;
  size_t i_ = 0;
};

NpyHeader parse_npy_header(const std::string& path, const std::string& text) {
  return NpyHeaderParser(path, text).parse();
}

}  // namespace

std::string read_file_bytes(const std::string& path) { return read_whole_file(path); }

std::string excerpt(const std::string& text) {
  constexpr size_t kShown = 40;
  std::string s = text.substr(0, kShown);
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return text.size() > kShown ? s + "..." : s;
}

std::string extension_of(const std::string& path) {
  const size_t slash = path.find_last_of("/\\");
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string ext = path.substr(dot);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

std::vector<float> read_points(const std::string& path) {
  const std::string ext = extension_of(path);
  if (ext == ".xyz" || ext == ".txt" || ext == ".csv") return read_text_points(path);
  if (ext == ".ply") return read_ply_points(path);
  if (ext == ".npy") return read_npy_points(path);
  if (ext == ".bin" || ext == ".f32") return read_raw_points(path);
  fail(path, "unknown point file type '" + ext + "' (expected .xyz .txt .csv .ply .npy .bin .f32)");
}

std::vector<float> PointTable::floats() const {
  return std::vector<float>(coords.begin(), coords.end());
}

PointTable read_point_table(const std::string& path, int min_dim, int max_dim,
                            Precision precision) {
  const std::string ext = extension_of(path);
  // A .xyz file's name says its coordinates: columns after the third are
  // attributes (normals, colours, intensity), not more dimensions.
  if (ext == ".xyz") max_dim = std::max(min_dim, std::min(max_dim, 3));
  if (ext == ".xyz" || ext == ".txt" || ext == ".csv")
    return parse_text_table(path, read_whole_file(path), min_dim, max_dim, precision);
  if (ext == ".ply")
    return parse_ply_table(path, read_whole_file(path), min_dim, max_dim, precision);
  if (ext == ".npy")
    return parse_npy_table(path, read_whole_file(path), min_dim, max_dim, precision);
  if (ext == ".bin" || ext == ".f32") {
    // Raw files carry no shape: always x y z.
    if (min_dim > 3 || max_dim < 3)
      fail(path, "raw float32 files hold 3 coordinates per point; this command needs " +
                     column_range_text(min_dim, max_dim) + " (use a text or .npy file)");
    PointTable t;
    t.dim = 3;
    const std::vector<float> raw = read_raw_points(path);
    t.coords.assign(raw.begin(), raw.end());
    t.doubles = reads_doubles(precision, false);
    return t;
  }
  fail(path, "unknown point file type '" + ext + "' (expected .xyz .txt .csv .ply .npy .bin .f32)");
}

std::vector<float> read_text_points(const std::string& path) {
  return parse_text_points(path, read_whole_file(path));
}

std::vector<float> parse_text_points(const std::string& path, const std::string& data) {
  return parse_text_table(path, data, 3, 3).floats();
}

namespace {

// Which columns of a text file hold the coordinates, given the field count
// of its data lines: all of them up to max_dim; past that (a scan's
// attributes after x y z; max_dim is 3 or less then) the columns its header
// names x y z (or x y for a table of 2), else the first max_dim, said in
// *notice.
std::vector<size_t> coordinate_columns(const std::string& path,
                                       const std::vector<std::string>& header, size_t columns,
                                       int min_dim, int max_dim, std::string* notice) {
  std::vector<size_t> use;
  if (columns <= static_cast<size_t>(max_dim)) {
    for (size_t c = 0; c < columns; ++c) use.push_back(c);
    return use;
  }
  const char* axis_names[3] = {"x", "y", "z"};
  if (header.size() == columns) {
    size_t named[3] = {columns, columns, columns};
    for (size_t c = 0; c < columns; ++c) {
      std::string name = header[c];
      if (name.compare(0, 2, "//") == 0) name.erase(0, 2);  // CloudCompare's "//X"
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      for (int a = 0; a < 3; ++a)
        if (name == axis_names[a] && named[a] == columns) named[a] = c;
    }
    const int axes =
        max_dim >= 3 && named[2] < columns ? 3 : (min_dim <= 2 && max_dim >= 2 ? 2 : 0);
    bool all_named = axes > 0;
    for (int a = 0; a < axes; ++a) all_named = all_named && named[a] < columns;
    if (all_named) {
      std::string which, names;
      for (int a = 0; a < axes; ++a) {
        use.push_back(named[a]);
        which += (a ? ", " : "") + std::to_string(named[a] + 1);
        names += std::string(a ? " '" : "'") + excerpt(header[named[a]]) + "'";
      }
      *notice = path + ": " + std::to_string(columns) + " columns, using columns " + which + " (" +
                names + ") as " + (axes == 3 ? "x y z" : "x y");
      return use;
    }
  }
  for (int c = 0; c < max_dim; ++c) use.push_back(static_cast<size_t>(c));
  *notice = path + ": " + std::to_string(columns) + " columns, using the first " +
            std::to_string(max_dim) +
            (max_dim == 3   ? " as x y z"
             : max_dim == 2 ? " as x y"
                            : "");
  return use;
}

}  // namespace

PointTable parse_text_table(const std::string& path, const std::string& data, int min_dim,
                            int max_dim, Precision precision) {
  LineReader in(path, data);
  PointTable t;
  t.doubles = reads_doubles(precision, true);  // decimal text: doubles
  std::string line;
  std::vector<std::string> header;  // the header line's fields, when there is one
  bool seen_content = false;
  int64_t first_data_line = 0;
  size_t columns = 0;       // fields of every data line: those of the first
  std::vector<size_t> use;  // the coordinate columns among them
  while (in.next(&line)) {
    const int64_t line_no = in.line_no();
    const std::string tl = trim(line);
    if (tl.empty() || tl[0] == '#') continue;
    const std::vector<std::string> f = split_fields(tl);
    if (columns == 0) {
      // A first line with no number at all is a header.
      bool any_number = false;
      for (const auto& field : f) {
        double d;
        any_number = any_number || parse_double(field, &d);
      }
      if (!seen_content && !any_number) {
        seen_content = true;
        header = f;
        continue;
      }
      seen_content = true;
      // More columns than a table of coordinates (x y z at most) takes are
      // attributes; a table of features (radius: up to the index API's
      // dimension) takes every column, and a wider file is not one.
      if (f.size() < static_cast<size_t>(min_dim) ||
          (max_dim > 3 && f.size() > static_cast<size_t>(max_dim)))
        fail(path, "line " + std::to_string(line_no) + ": expected " +
                       column_range_text(min_dim, max_dim) + ", found " + std::to_string(f.size()));
      columns = f.size();
      first_data_line = line_no;
      use = coordinate_columns(path, header, columns, min_dim, max_dim, &t.notice);
      t.dim = static_cast<int>(use.size());
    } else if (f.size() != columns) {
      const std::string want = columns == use.size() && min_dim == max_dim
                                   ? column_range_text(min_dim, max_dim)
                                   : std::to_string(columns) + " columns (as on line " +
                                         std::to_string(first_data_line) + ")";
      fail(path, "line " + std::to_string(line_no) + ": expected " + want + ", found " +
                     std::to_string(f.size()));
    }
    const int64_t point = t.size();
    for (size_t i = 0; i < use.size(); ++i) {
      const std::string& field = f[use[i]];
      double v = 0;
      if (!parse_double(field, &v))
        fail(path, "line " + std::to_string(line_no) + ": not a number in '" + excerpt(tl) + "'");
      t.coords.push_back(finite_coordinate(path, v, t.doubles, [&] {
        return "line " + std::to_string(line_no) + ", column " + std::to_string(use[i] + 1) +
               " ('" + excerpt(field) + "', point " + std::to_string(point) + ")";
      }));
    }
  }
  return t;
}

std::vector<float> read_ply_points(const std::string& path) {
  return parse_ply_points(path, read_whole_file(path));
}

std::vector<float> parse_ply_points(const std::string& path, const std::string& data) {
  return parse_ply_table(path, data, 3, 3).floats();
}

namespace {

// The vertex element's coordinates, row by row (ply::walk's visitor).
struct PlyPointVisitor {
  const std::string& path;
  const ply::Header& header;
  size_t vertex;  // the element
  int col[3];     // x, y, z's properties
  int dim;
  bool doubles;
  std::vector<double>& xyz;
  double v[3] = {0, 0, 0};

  void scalar(const ply::Row& row, size_t p, double d) {
    if (row.element != vertex) return;
    for (int k = 0; k < dim; ++k)
      if (static_cast<int>(p) == col[k]) v[k] = d;
  }
  bool wants_list(size_t, size_t) const { return false; }
  void list(const ply::Row&, size_t, const std::vector<double>&) {}
  void row_end(const ply::Row& row) {
    if (row.element != vertex) return;
    static const char* const names[3] = {"x", "y", "z"};
    for (int d = 0; d < dim; ++d)
      xyz.push_back(finite_coordinate(path, v[d], doubles, [&] {
        return (header.format == ply::Format::Ascii ? "PLY line " + std::to_string(row.line) + ": "
                                                    : std::string("PLY ")) +
               names[d] + " of vertex " + std::to_string(row.index);
      }));
  }
};

}  // namespace

PointTable parse_ply_table(const std::string& path, const std::string& data, int min_dim,
                           int max_dim, Precision precision) {
  const ply::Header h = ply::parse_header(path, data);
  const size_t vi = h.find("vertex");
  if (vi == h.elements.size()) fail(path, "PLY file has no vertex element");
  int col[3] = {-1, -1, -1};
  const char* names[3] = {"x", "y", "z"};
  const ply::Element& ve = h.elements[vi];
  for (size_t p = 0; p < ve.props.size(); ++p) {
    for (int d = 0; d < 3; ++d) {
      if (ve.props[p].name == names[d]) {
        if (ve.props[p].is_list)
          fail(path, std::string("PLY vertex property ") + names[d] + " is a list");
        col[d] = static_cast<int>(p);
      }
    }
  }
  // x and y always; z when the caller takes 3 columns, and only when it is
  // there if the caller also takes 2 (pip reads x y files).
  int dim = max_dim >= 3 ? 3 : 2;
  if (dim == 3 && col[2] < 0 && min_dim <= 2) dim = 2;
  if (min_dim > 3 || max_dim < 2) fail(path, "PLY files hold 2 or 3 coordinates (x y [z])");
  for (int d = 0; d < dim; ++d)
    if (col[d] < 0)
      fail(path, std::string("PLY vertex element has no '") + names[d] + "' property");

  PointTable table;
  table.dim = dim;
  bool double_property = false;
  for (int d = 0; d < dim; ++d) double_property |= ve.props[col[d]].type == ply::Type::F64;
  table.doubles = reads_doubles(precision, double_property);
  // A vertex takes at least 3 bytes, so the file size bounds the reservation
  // (a corrupt count does not allocate gigabytes up front).
  table.coords.reserve(
      static_cast<size_t>(std::min<int64_t>(ve.count, static_cast<int64_t>(data.size() / 3))) *
      dim);
  PlyPointVisitor visitor{path, h, vi, {col[0], col[1], col[2]}, dim, table.doubles, table.coords};
  ply::walk(path, data, h, visitor);
  return table;
}

std::vector<float> read_npy_points(const std::string& path) {
  return parse_npy_points(path, read_whole_file(path));
}

std::vector<float> parse_npy_points(const std::string& path, const std::string& data) {
  return parse_npy_table(path, data, 3, 3).floats();
}

PointTable parse_npy_table(const std::string& path, const std::string& data, int min_dim,
                           int max_dim, Precision precision) {
  if (data.size() < 10 || std::memcmp(data.data(), "\x93NUMPY", 6) != 0)
    fail(path, "not a .npy file (no \\x93NUMPY magic)");
  const unsigned char major = static_cast<unsigned char>(data[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(data[8]) | (static_cast<unsigned char>(data[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12) fail(path, "truncated .npy header");
    for (int i = 3; i >= 0; --i)
      header_len = (header_len << 8) | static_cast<unsigned char>(data[8 + i]);
    header_start = 12;
  } else {
    fail(path, "unsupported .npy version " + std::to_string(major));
  }
  if (data.size() - header_start < header_len) fail(path, "truncated .npy header");
  const NpyHeader h = parse_npy_header(path, data.substr(header_start, header_len));
  size_t item = 0;
  bool f64 = false;
  if (h.descr == "<f4" || h.descr == "=f4") {
    item = 4;
  } else if (h.descr == "<f8" || h.descr == "=f8") {
    item = 8;
    f64 = true;
  } else {
    fail(path, ".npy dtype '" + excerpt(h.descr) +
                   "' is not supported (float32 or float64, little endian)");
  }
  if (!io::host_is_little_endian()) fail(path, ".npy reading needs a little-endian host");
  if (h.fortran_order) fail(path, ".npy array is in Fortran order (need C order)");
  std::string shape;
  for (size_t i = 0; i < h.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(h.shape[i]);
  if (h.shape.size() == 1) shape += ",";
  const std::vector<int64_t>& dims = h.shape;
  if (dims.size() != 2 || dims[1] < min_dim || dims[1] > max_dim) {
    const std::string want = min_dim == max_dim ? "(n, " + std::to_string(min_dim) + ")"
                                                : "(n, d) with d from " + std::to_string(min_dim) +
                                                      " to " + std::to_string(max_dim);
    fail(path, ".npy shape (" + shape + ") is not " + want);
  }
  const int64_t n = dims[0];
  const int dim = static_cast<int>(dims[1]);
  const size_t body = header_start + header_len;
  const size_t have = data.size() - body, row_bytes = static_cast<size_t>(dim) * item;
  if (static_cast<unsigned long long>(n) > have / row_bytes)
    fail(path, "truncated .npy data: shape says " + std::to_string(n) + " points, file holds " +
                   std::to_string(have / row_bytes) + " (" + std::to_string(have) +
                   " data bytes after the header, at byte offset " + std::to_string(body) + ")");
  // The shape takes the data exactly: more bytes are data it does not
  // describe (a wrong shape, or two arrays), not something to skip.
  const size_t takes = static_cast<size_t>(n) * row_bytes;
  if (have != takes)
    fail(path, ".npy shape (" + shape + ") of " + h.descr + " takes " + std::to_string(takes) +
                   " data bytes, but " + std::to_string(have) +
                   " follow the header: " + std::to_string(have - takes) +
                   " bytes more than the shape describes, from "
                   "byte offset " +
                   std::to_string(body + takes));
  PointTable table;
  table.dim = dim;
  table.doubles = reads_doubles(precision, f64);
  std::vector<double>& xyz = table.coords;
  xyz.resize(static_cast<size_t>(n) * dim);
  const char* p = data.data() + body;
  for (size_t i = 0; i < xyz.size(); ++i) {
    double d;
    if (f64) {
      std::memcpy(&d, p + i * 8, 8);
    } else {
      float f;
      std::memcpy(&f, p + i * 4, 4);
      d = f;
    }
    xyz[i] = finite_coordinate(path, d, table.doubles, [&] {
      return ".npy row " + std::to_string(i / dim) + ", column " + std::to_string(i % dim);
    });
  }
  return table;
}

std::vector<float> read_raw_points(const std::string& path) {
  return parse_raw_points(path, read_whole_file(path));
}

std::vector<float> parse_raw_points(const std::string& path, const std::string& data) {
  if (data.size() % 12 != 0)
    fail(path, "raw float32 file size " + std::to_string(data.size()) +
                   " is not a multiple of 12 bytes (3 floats per point)");
  if (!io::host_is_little_endian()) fail(path, "raw float32 reading needs a little-endian host");
  std::vector<float> xyz(data.size() / 4);
  if (!xyz.empty()) std::memcpy(xyz.data(), data.data(), data.size());
  for (size_t i = 0; i < xyz.size(); ++i)
    finite_coordinate(path, xyz[i], false, [&] {
      return "point " + std::to_string(i / 3) + ", coordinate " + std::to_string(i % 3) +
             " (byte " + std::to_string(i * 4) + ")";
    });
  return xyz;
}

// ---- Writers ------------------------------------------------------------------------
namespace {

// cols < 0: a one-dimensional array of `rows` values.
void write_npy(const std::string& path, const char* descr, const void* data, size_t item,
               int64_t rows, int64_t cols) {
  const std::string shape =
      cols < 0 ? std::to_string(rows) + "," : std::to_string(rows) + ", " + std::to_string(cols);
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  // Magic (6) + version (2) + length (2) + header + '\n', padded to 64 bytes.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail(path, std::string("cannot create (") + std::strerror(errno) + ")");
  const unsigned char pre[10] = {0x93,
                                 'N',
                                 'U',
                                 'M',
                                 'P',
                                 'Y',
                                 1,
                                 0,
                                 static_cast<unsigned char>(header.size() & 0xff),
                                 static_cast<unsigned char>(header.size() >> 8)};
  const size_t bytes = static_cast<size_t>(rows) * static_cast<size_t>(cols < 0 ? 1 : cols) * item;
  bool ok = std::fwrite(pre, 1, 10, f) == 10 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            (bytes == 0 || std::fwrite(data, 1, bytes, f) == bytes);
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) fail(path, "write error");
}

}  // namespace

void write_npy_int32(const std::string& path, const int32_t* data, int64_t rows, int64_t cols) {
  write_npy(path, "<i4", data, 4, rows, cols);
}

void write_npy_float32(const std::string& path, const float* data, int64_t rows, int64_t cols) {
  write_npy(path, "<f4", data, 4, rows, cols);
}

void write_npy_float64(const std::string& path, const double* data, int64_t rows, int64_t cols) {
  write_npy(path, "<f8", data, 8, rows, cols);
}

void write_npy_int64(const std::string& path, const int64_t* data, int64_t rows, int64_t cols) {
  write_npy(path, "<i8", data, 8, rows, cols);
}

void write_npy_int32_vector(const std::string& path, const int32_t* data, int64_t n) {
  write_npy(path, "<i4", data, 4, n, -1);
}

namespace {

// A value that reads back as itself: 9 significant digits for a float32, 17
// for a double (printf's %.9g / %.17g).
template <class T>
const char* round_trip_format() {
  return sizeof(T) == sizeof(float) ? "%.9g" : "%.17g";
}

template <class T>
void write_csv_rows(const std::string& path, const int32_t* indices, const T* sq_dist, int64_t rows,
                    int64_t k) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) fail(path, std::string("cannot create (") + std::strerror(errno) + ")");
  std::string line;
  for (int64_t j = 0; j < k; ++j) line += (j ? ",i" : "i") + std::to_string(j);
  if (sq_dist)
    for (int64_t j = 0; j < k; ++j) line += ",d" + std::to_string(j);
  line += '\n';
  bool ok = std::fputs(line.c_str(), f) >= 0;
  char buf[64];
  for (int64_t i = 0; i < rows && ok; ++i) {
    line.clear();
    const size_t row = static_cast<size_t>(i) * static_cast<size_t>(k);
    for (int64_t j = 0; j < k; ++j) {
      if (j) line += ',';
      line += std::to_string(indices[row + j]);
    }
    if (sq_dist) {
      for (int64_t j = 0; j < k; ++j) {
        const T d = sq_dist[row + j];
        if (std::isinf(d)) {
          line += ",inf";
        } else {
          std::snprintf(buf, sizeof buf, round_trip_format<T>(), static_cast<double>(d));
          line += ',';
          line += buf;
        }
      }
    }
    line += '\n';
    ok = std::fputs(line.c_str(), f) >= 0;
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) fail(path, "write error");
}

template <class T>
void write_csv_list_rows(const std::string& path, const int64_t* offsets, int64_t rows,
                         const int32_t* indices, const T* sq_dist) {
  TextFile f(path);
  f.line(sq_dist ? "query,index,d" : "query,index");
  char buf[64];
  std::string line;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = offsets[i]; j < offsets[i + 1]; ++j) {
      line = std::to_string(i) + "," + std::to_string(indices[j]);
      if (sq_dist) {
        std::snprintf(buf, sizeof buf, round_trip_format<T>(), static_cast<double>(sq_dist[j]));
        line += ',';
        line += buf;
      }
      f.line(line);
    }
  }
  f.close();
}

template <class T>
void write_csv_matrix(const std::string& path, const char* prefix, const T* data, int64_t rows,
                      int64_t cols) {
  TextFile f(path);
  std::string line;
  for (int64_t j = 0; j < cols; ++j)
    line += (j ? "," : "") + std::string(prefix) + std::to_string(j);
  f.line(line);
  char buf[64];
  for (int64_t i = 0; i < rows; ++i) {
    line.clear();
    for (int64_t j = 0; j < cols; ++j) {
      const T d = data[static_cast<size_t>(i) * static_cast<size_t>(cols) + static_cast<size_t>(j)];
      if (j) line += ',';
      if (std::isinf(d)) {
        line += d > 0 ? "inf" : "-inf";
      } else {
        std::snprintf(buf, sizeof buf, round_trip_format<T>(), static_cast<double>(d));
        line += buf;
      }
    }
    f.line(line);
  }
  f.close();
}

}  // namespace

void write_csv(const std::string& path, const int32_t* indices, const float* sq_dist, int64_t rows,
               int64_t k) {
  write_csv_rows(path, indices, sq_dist, rows, k);
}

void write_csv(const std::string& path, const int32_t* indices, const double* sq_dist, int64_t rows,
               int64_t k) {
  write_csv_rows(path, indices, sq_dist, rows, k);
}

void write_csv_lists(const std::string& path, const int64_t* offsets, int64_t rows,
                     const int32_t* indices, const float* sq_dist) {
  write_csv_list_rows(path, offsets, rows, indices, sq_dist);
}

void write_csv_lists(const std::string& path, const int64_t* offsets, int64_t rows,
                     const int32_t* indices, const double* sq_dist) {
  write_csv_list_rows(path, offsets, rows, indices, sq_dist);
}

void write_csv_float32(const std::string& path, const char* prefix, const float* data, int64_t rows,
                       int64_t cols) {
  write_csv_matrix(path, prefix, data, rows, cols);
}

void write_csv_float64(const std::string& path, const char* prefix, const double* data,
                       int64_t rows, int64_t cols) {
  write_csv_matrix(path, prefix, data, rows, cols);
}

TextFile::TextFile(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) fail(path, std::string("cannot create (") + std::strerror(errno) + ")");
}

TextFile::~TextFile() {
  if (f_) std::fclose(f_);
}

void TextFile::line(const std::string& text) {
  if (!f_) fail(path_, "write after close");
  if (std::fwrite(text.data(), 1, text.size(), f_) != text.size() || std::fputc('\n', f_) == EOF)
    fail(path_, "write error");
}

void TextFile::close() {
  if (!f_) return;
  std::FILE* f = f_;
  f_ = nullptr;
  if (std::fclose(f) != 0) fail(path_, "write error");
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

std::string distance_path_for(const std::string& npy_path) {
  const std::string ext = extension_of(npy_path);
  return npy_path.substr(0, npy_path.size() - ext.size()) + "_dist" + (ext.empty() ? ".npy" : ext);
}

}  // namespace knn_cli
