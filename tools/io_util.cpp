// io_util.cpp - see io_util.h.
#include "io_util.h"

#include <cctype>
#include <cstdlib>

namespace knn_cli {
namespace io {

std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool in_field = false;
  bool after_comma = false;
  for (char c : line) {
    if (c == ',') {
      if (in_field || after_comma) out.push_back(cur);
      cur.clear();
      in_field = false;
      after_comma = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_field) {
        out.push_back(cur);
        cur.clear();
        in_field = false;
        after_comma = false;
      }
    } else {
      cur.push_back(c);
      in_field = true;
    }
  }
  if (in_field || after_comma) out.push_back(cur);
  return out;
}

bool parse_double(const std::string& s, double* v) {
  if (s.empty()) return false;
  const char* b = s.c_str();
  char* e = nullptr;
  *v = std::strtod(b, &e);
  return e != b && *e == '\0';
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool LineReader::next(std::string* line) {
  if (pos_ >= data_.size()) return false;
  const char* begin = data_.data() + pos_;
  const size_t left = data_.size() - pos_;
  const void* nl = std::memchr(begin, '\n', left);
  const size_t len = nl ? static_cast<size_t>(static_cast<const char*>(nl) - begin) : left;
  ++line_no_;
  if (len > kMaxLineBytes)
    fail(path_, "line " + std::to_string(line_no_) + " is " + std::to_string(len) +
                    " bytes long, over the limit of " + std::to_string(kMaxLineBytes) + " (not a " +
                    kind_ + " file?)");
  if (const void* nul = std::memchr(begin, '\0', len))
    fail(path_, "line " + std::to_string(line_no_) + ", column " +
                    std::to_string(static_cast<const char*>(nul) - begin + 1) +
                    ": a NUL byte (binary data in a text file?)");
  line->assign(begin, len);
  if (!line->empty() && line->back() == '\r') line->pop_back();
  pos_ += len + 1;
  return true;
}

}  // namespace io
}  // namespace knn_cli
