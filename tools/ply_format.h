// ply_format.h - the PLY header and the walk over its data, shared by the
// point reader (point_io.cpp: the vertex element's x y z) and the mesh reader
// (mesh_io.cpp: vertices and faces). Internal to tools/.
//
// The three formats (ascii, binary_little_endian, binary_big_endian), every
// scalar type of the format (char/int8 ... double/float64), lists with an
// integer count type. Every element the header declares is walked, those
// after the ones a reader wants too: the header's counts must match the data
// exactly, and a file that holds more (or less) than they say is refused
// instead of read in part.
#ifndef KNN_TOOLS_PLY_FORMAT_H
#define KNN_TOOLS_PLY_FORMAT_H

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io_util.h"

namespace knn_cli {
namespace ply {

enum class Type { I8, U8, I16, U16, I32, U32, F32, F64 };
enum class Format { Ascii, BinaryLittleEndian, BinaryBigEndian };

size_t type_size(Type t);
bool is_integer(Type t);

struct Property {
  std::string name;
  bool is_list = false;
  Type count_type = Type::U8;  // lists only; always an integer type
  Type type = Type::F32;
};

struct Element {
  std::string name;
  int64_t count = 0;
  std::vector<Property> props;
  // The index of the property called `name`, or props.size().
  size_t find(const std::string& prop) const;
};

struct Header {
  Format format = Format::Ascii;
  std::vector<Element> elements;
  size_t body = 0;    // byte offset of the data
  int64_t lines = 0;  // header lines, "ply" and "end_header" included
  // "2 'vertex', 1 'face'": the first few elements, for messages.
  std::string declared;
  // The index of the element called `name`, or elements.size().
  size_t find(const std::string& name) const;
};

// The header of a PLY file, or a message naming its line.
Header parse_header(const std::string& path, const std::string& data);

// Where a row of data is: its element and index, and its line (ascii) or
// the byte offset where it starts (binary).
struct Row {
  size_t element;
  int64_t index;
  int64_t line;   // ascii: the file's line number; binary: 0
  size_t offset;  // binary: the row's first byte; ascii: 0
};

// "PLY line 12" (ascii) or "PLY element 'face' row 3 (byte offset 120)".
std::string describe(const Header& h, const Row& row);

// Walks every row of every element. The visitor gets
//   void scalar(const Row&, size_t property, double value)
//   bool wants_list(size_t element, size_t property)
//   void list(const Row&, size_t property, const std::vector<double>& values)
//          (only for lists it wants; the others are skipped)
//   void row_end(const Row&)
// and may throw to stop. Malformed data (truncation, a bad list count, a
// value that is not a number, data past the last element) throws with
// the line or byte offset.
template <class Visitor>
void walk(const std::string& path, const std::string& data, const Header& h, Visitor& v);

// ---- implementation ------------------------------------------------------------------
namespace detail {

// The value at p in the file's byte order, as double (exact for every type).
inline double load(Type t, const unsigned char* p, bool swap) {
  unsigned char b[8];
  const size_t n = type_size(t);
  std::memcpy(b, p, n);
  if (swap) std::reverse(b, b + n);
  switch (t) {
    case Type::I8: {
      int8_t v;
      std::memcpy(&v, b, 1);
      return v;
    }
    case Type::U8: return b[0];
    case Type::I16: {
      int16_t v;
      std::memcpy(&v, b, 2);
      return v;
    }
    case Type::U16: {
      uint16_t v;
      std::memcpy(&v, b, 2);
      return v;
    }
    case Type::I32: {
      int32_t v;
      std::memcpy(&v, b, 4);
      return v;
    }
    case Type::U32: {
      uint32_t v;
      std::memcpy(&v, b, 4);
      return v;
    }
    case Type::F32: {
      float v;
      std::memcpy(&v, b, 4);
      return v;
    }
    case Type::F64: {
      double v;
      std::memcpy(&v, b, 8);
      return v;
    }
  }
  return 0;
}

[[noreturn]] void ascii_truncated(const std::string& path, const Header& h, size_t e, int64_t r,
                                  int64_t last_line);
[[noreturn]] void ascii_row_error(const std::string& path, int64_t line, const std::string& what);
[[noreturn]] void ascii_row_length(const std::string& path, const Header& h, const Row& row,
                                   size_t values, size_t takes);
void ascii_no_trailing_data(const std::string& path, const Header& h, io::LineReader& lines,
                            int64_t last_line);
[[noreturn]] void binary_truncated(const std::string& path, const Header& h, const Row& row,
                                   size_t prop, size_t size);
[[noreturn]] void binary_negative_count(const std::string& path, const Header& h, size_t e);
void binary_no_trailing_data(const std::string& path, const Header& h, size_t pos, size_t size);

template <class Visitor>
void walk_ascii(const std::string& path, const std::string& data, const Header& h, Visitor& v) {
  io::LineReader lines(path, data, h.body, "a PLY", h.lines);
  auto line_no = [&] { return lines.line_no(); };
  std::string l;
  std::vector<double> list;
  for (size_t e = 0; e < h.elements.size(); ++e) {
    const Element& el = h.elements[e];
    if (el.props.empty()) continue;  // no values, so no lines (as in binary: no bytes)
    for (int64_t r = 0; r < el.count; ++r) {
      do {
        if (!lines.next(&l)) ascii_truncated(path, h, e, r, line_no());
      } while (io::trim(l).empty());
      const std::vector<std::string> tok = io::split_fields(l);
      const Row row{e, r, line_no(), 0};
      size_t t = 0;
      for (size_t p = 0; p < el.props.size(); ++p) {
        const Property& pr = el.props[p];
        if (pr.is_list) {
          double cnt;
          if (t >= tok.size() || !io::parse_double(tok[t], &cnt) || !(cnt >= 0) ||
              cnt > static_cast<double>(tok.size()) ||
              cnt != static_cast<double>(static_cast<size_t>(cnt)))
            ascii_row_error(path, row.line, "bad list count");
          const size_t n = static_cast<size_t>(cnt);
          ++t;
          if (n > tok.size() - t) ascii_row_error(path, row.line, "list shorter than its count");
          if (v.wants_list(e, p)) {
            list.resize(n);
            for (size_t i = 0; i < n; ++i)
              if (!io::parse_double(tok[t + i], &list[i]))
                ascii_row_error(path, row.line, "not a number '" + excerpt(tok[t + i]) + "'");
            v.list(row, p, list);
          }
          t += n;
        } else {
          double d;
          if (t >= tok.size()) ascii_row_error(path, row.line, "too few values");
          if (!io::parse_double(tok[t], &d))
            ascii_row_error(path, row.line, "not a number '" + excerpt(tok[t]) + "'");
          v.scalar(row, p, d);
          ++t;
        }
      }
      if (t != tok.size()) ascii_row_length(path, h, row, tok.size(), t);
      v.row_end(row);
    }
  }
  ascii_no_trailing_data(path, h, lines, line_no());
}

template <class Visitor>
void walk_binary(const std::string& path, const std::string& data, const Header& h, Visitor& v) {
  const bool swap = (h.format == Format::BinaryBigEndian) == io::host_is_little_endian();
  const unsigned char* base = reinterpret_cast<const unsigned char*>(data.data());
  const size_t size = data.size();
  size_t pos = h.body;
  std::vector<double> list;
  for (size_t e = 0; e < h.elements.size(); ++e) {
    const Element& el = h.elements[e];
    if (el.props.empty()) continue;  // takes no bytes, however many rows
    for (int64_t r = 0; r < el.count; ++r) {
      const Row row{e, r, 0, pos};
      for (size_t p = 0; p < el.props.size(); ++p) {
        const Property& pr = el.props[p];
        auto need = [&](size_t bytes) {
          if (pos > size || size - pos < bytes) binary_truncated(path, h, row, p, size);
        };
        if (pr.is_list) {
          need(type_size(pr.count_type));
          const double cnt = load(pr.count_type, base + pos, swap);
          pos += type_size(pr.count_type);
          if (!(cnt >= 0)) binary_negative_count(path, h, e);
          const size_t item = type_size(pr.type);
          // The count is an integer below 2^32, so the product is exact.
          if (cnt * static_cast<double>(item) > static_cast<double>(size - pos))
            binary_truncated(path, h, row, p, size);
          const size_t n = static_cast<size_t>(cnt);
          if (v.wants_list(e, p)) {
            list.resize(n);
            for (size_t i = 0; i < n; ++i) list[i] = load(pr.type, base + pos + i * item, swap);
            v.list(row, p, list);
          }
          pos += n * item;
        } else {
          need(type_size(pr.type));
          v.scalar(row, p, load(pr.type, base + pos, swap));
          pos += type_size(pr.type);
        }
      }
      v.row_end(row);
    }
  }
  binary_no_trailing_data(path, h, pos, size);
}

}  // namespace detail

template <class Visitor>
void walk(const std::string& path, const std::string& data, const Header& h, Visitor& v) {
  if (h.format == Format::Ascii) {
    detail::walk_ascii(path, data, h, v);
  } else {
    detail::walk_binary(path, data, h, v);
  }
}

}  // namespace ply
}  // namespace knn_cli

#endif
