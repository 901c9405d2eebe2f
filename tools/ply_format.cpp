// ply_format.cpp - see ply_format.h.
#include "ply_format.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace knn_cli {
namespace ply {
namespace {

using io::fail;

bool type_of(const std::string& name, Type* t) {
  static const struct {
    const char* name;
    Type type;
  } table[] = {
      {"char", Type::I8},   {"int8", Type::I8},     {"uchar", Type::U8},   {"uint8", Type::U8},
      {"short", Type::I16}, {"int16", Type::I16},   {"ushort", Type::U16}, {"uint16", Type::U16},
      {"int", Type::I32},   {"int32", Type::I32},   {"uint", Type::U32},   {"uint32", Type::U32},
      {"float", Type::F32}, {"float32", Type::F32}, {"double", Type::F64}, {"float64", Type::F64}};
  for (const auto& e : table) {
    if (name == e.name) {
      *t = e.type;
      return true;
    }
  }
  return false;
}

}  // namespace

size_t type_size(Type t) {
  switch (t) {
    case Type::I8:
    case Type::U8: return 1;
    case Type::I16:
    case Type::U16: return 2;
    case Type::I32:
    case Type::U32:
    case Type::F32: return 4;
    case Type::F64: return 8;
  }
  return 0;
}

bool is_integer(Type t) { return t != Type::F32 && t != Type::F64; }

size_t Element::find(const std::string& prop) const {
  for (size_t p = 0; p < props.size(); ++p)
    if (props[p].name == prop) return p;
  return props.size();
}

size_t Header::find(const std::string& name) const {
  for (size_t e = 0; e < elements.size(); ++e)
    if (elements[e].name == name) return e;
  return elements.size();
}

Header parse_header(const std::string& path, const std::string& data) {
  io::LineReader lines(path, data, 0, "a PLY");
  std::string line;
  if (!lines.next(&line) || io::trim(line) != "ply") fail(path, "not a PLY file (no 'ply' magic)");
  Header h;
  bool format_seen = false, end_seen = false;
  while (lines.next(&line)) {
    std::istringstream ls(line);
    std::string kw;
    ls >> kw;
    if (kw.empty() || kw == "comment" || kw == "obj_info") continue;
    const std::string where = "PLY header line " + std::to_string(lines.line_no()) + ": ";
    if (kw == "format") {
      std::string fmt, ver;
      ls >> fmt >> ver;
      if (fmt == "ascii") {
        h.format = Format::Ascii;
      } else if (fmt == "binary_little_endian") {
        h.format = Format::BinaryLittleEndian;
      } else if (fmt == "binary_big_endian") {
        h.format = Format::BinaryBigEndian;
      } else {
        fail(path, where + "unknown format '" + excerpt(fmt) +
                       "' (expected ascii, binary_little_endian or binary_big_endian)");
      }
      format_seen = true;
    } else if (kw == "element") {
      Element e;
      std::string count;
      ls >> e.name >> count;
      char* end = nullptr;
      errno = 0;
      const long long c = std::strtoll(count.c_str(), &end, 10);
      if (e.name.empty() || count.empty() || *end != '\0' || c < 0 || errno != 0)
        fail(path, where + "bad element line '" + excerpt(line) + "'");
      e.count = c;
      h.elements.push_back(e);
    } else if (kw == "property") {
      if (h.elements.empty()) fail(path, where + "property before any element");
      Property p;
      std::string t1;
      ls >> t1;
      if (t1 == "list") {
        std::string ct, it;
        ls >> ct >> it >> p.name;
        p.is_list = true;
        if (!type_of(ct, &p.count_type) || !type_of(it, &p.type) || p.name.empty())
          fail(path, where + "bad list property '" + excerpt(line) + "'");
        if (!is_integer(p.count_type))
          fail(path, where + "list property '" + excerpt(p.name) + "' has the count type '" + ct +
                         "' (a list's count is an integer type)");
      } else {
        ls >> p.name;
        if (!type_of(t1, &p.type) || p.name.empty())
          fail(path, where + "bad property '" + excerpt(line) + "'");
      }
      h.elements.back().props.push_back(p);
    } else if (kw == "end_header") {
      end_seen = true;
      break;
    } else {
      fail(path, where + "unknown keyword '" + excerpt(kw) + "'");
    }
  }
  if (!format_seen) fail(path, "PLY header has no format line");
  if (!end_seen) fail(path, "truncated PLY header (no end_header)");
  h.body = lines.pos();
  h.lines = lines.line_no();
  // The first few only, so that a header of thousands of elements still
  // gives a one-line message.
  constexpr size_t kElementsNamed = 4;
  for (size_t e = 0; e < std::min(h.elements.size(), kElementsNamed); ++e)
    h.declared += (e ? ", " : "") + std::to_string(h.elements[e].count) + " '" +
                  excerpt(h.elements[e].name) + "'";
  if (h.elements.size() > kElementsNamed)
    h.declared += ", ... (" + std::to_string(h.elements.size()) + " elements)";
  return h;
}

std::string describe(const Header& h, const Row& row) {
  if (h.format == Format::Ascii) return "PLY line " + std::to_string(row.line);
  return "PLY element '" + excerpt(h.elements[row.element].name) + "' row " +
         std::to_string(row.index) + " (byte offset " + std::to_string(row.offset) + ")";
}

namespace detail {

void ascii_truncated(const std::string& path, const Header& h, size_t e, int64_t r,
                     int64_t last_line) {
  const Element& el = h.elements[e];
  fail(path, "truncated PLY: element '" + excerpt(el.name) + "' ends at " + std::to_string(r) +
                 " of " + std::to_string(el.count) + " (the file ends after line " +
                 std::to_string(last_line) + "; the header declares " + h.declared + ")");
}

void ascii_row_error(const std::string& path, int64_t line, const std::string& what) {
  fail(path, "PLY line " + std::to_string(line) + ": " + what);
}

void ascii_row_length(const std::string& path, const Header& h, const Row& row, size_t values,
                      size_t takes) {
  ascii_row_error(path, row.line,
                  std::to_string(values) + " values, but row " + std::to_string(row.index) +
                      " of element '" + excerpt(h.elements[row.element].name) + "' takes " +
                      std::to_string(takes) + " (its header properties)");
}

void ascii_no_trailing_data(const std::string& path, const Header& h, io::LineReader& lines,
                            int64_t last_line) {
  int64_t extra_lines = 0, first_extra = 0;
  std::string first_text, l;
  while (lines.next(&l)) {
    if (io::trim(l).empty()) continue;
    if (extra_lines++ == 0) {
      first_extra = lines.line_no();
      first_text = io::trim(l);
    }
  }
  if (extra_lines > 0)
    fail(path,
         "the header declares " + h.declared + " but " + std::to_string(extra_lines) +
             (extra_lines == 1 ? " more line of data follows" : " more lines of data follow") +
             " the last element (line " + std::to_string(last_line) + "), from line " +
             std::to_string(first_extra) + " ('" + excerpt(first_text) +
             "'): a header that under-counts?");
}

void binary_truncated(const std::string& path, const Header& h, const Row& row, size_t prop,
                      size_t size) {
  const Element& el = h.elements[row.element];
  fail(path, "truncated PLY: element '" + excerpt(el.name) + "' ends at " +
                 std::to_string(row.index) + " of " + std::to_string(el.count) + " (row " +
                 std::to_string(row.index) + " starts at byte offset " +
                 std::to_string(row.offset) + "; its property '" + excerpt(el.props[prop].name) +
                 "' needs bytes past the file's end, " + std::to_string(size) +
                 "; the header declares " + h.declared + ")");
}

void binary_negative_count(const std::string& path, const Header& h, size_t e) {
  fail(path, "PLY: negative list count in element '" + excerpt(h.elements[e].name) + "'");
}

void binary_no_trailing_data(const std::string& path, const Header& h, size_t pos, size_t size) {
  if (pos < size)
    fail(path, "the header declares " + h.declared + " but " + std::to_string(size - pos) +
                   " more bytes follow the last element, from byte offset " + std::to_string(pos) +
                   " (the file has " + std::to_string(size) + "): a header that under-counts?");
}

}  // namespace detail
}  // namespace ply
}  // namespace knn_cli
