// point_io.h - point-cloud readers and result writers of the knn-gpgpu tool.
//
// Readers return n*3 float32 coordinates (x, y, z per point, file order), or
// tables in float32 or float64 (see Precision), and throw std::runtime_error
// with a one-line message naming the file (and the line or element where the
// problem is) on any malformed input, a coordinate that is not finite in the
// precision read included (the message names the line and column, or the
// row, which the library's "point i" cannot). Lines
// of text and PLY files are limited to 64 KiB, and a NUL byte in them is an
// error: both are signs of a file that is not what its name says.
//
// Formats, chosen by the file extension (case-insensitive):
//   .xyz .txt .csv  text, whitespace and/or comma separated, 3 columns (or
//                   more: see PointTable), an optional non-numeric header
//                   line, '#' comment lines
//   .ply            ascii, binary_little_endian or binary_big_endian (ply_format.h);
//                   the vertex element's x/y/z
//                   (any scalar type, float/double usually), other properties
//                   and elements skipped; every element the header declares
//                   is walked, so data missing from it or following it (a
//                   header that over- or under-counts) is an error
//   .npy            float32 or float64, shape (n, 3), C order, and exactly
//                   the bytes the shape takes
//   .bin .f32       raw little-endian float32, n*3 values
// read_points and the parse_*_points functions take exactly 3 columns (knn)
// in float32; read_point_table takes a range of dimensions (radius: the
// file's; pip: 2 or 3) and a precision.
#ifndef KNN_TOOLS_POINT_IO_H
#define KNN_TOOLS_POINT_IO_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace knn_cli {

std::vector<float> read_points(const std::string& path);

// The precision a table is read (and then computed) in. Float32 rounds every
// value to float32; Float64 keeps the file's values (a float32 file's values
// widen exactly); Auto is Float64 when the file holds doubles: decimal text
// (.xyz .txt .csv), a PLY vertex whose x, y or z is a double property, a
// float64 .npy; else Float32 (PLY of float or integer properties, float32
// .npy, raw .bin/.f32).
enum class Precision { Auto, Float32, Float64 };

// Points of any dimension from min_dim to max_dim: text files give the
// column count of their first data line (every line must match), .npy files
// their shape (n, d), PLY files x y z, or x y when there is no z and
// min_dim <= 2; raw files are always 3-D. dim is 0 for a text file with no
// data lines (no dimension to tell).
// A text file with more columns than a max_dim of 3 or less (x y z nx ny
// nz, x y z r g b: a scan's attributes after its coordinates) gives the
// columns its header names x, y, z (x, y for a table of 2; "//X" as
// CloudCompare writes it counts), else its first max_dim columns, and says
// which in `notice`; with a larger max_dim (features, not coordinates) more
// columns are an error. read_point_table caps a .xyz file at 3 columns (the
// name says x y z) when min_dim allows.
struct PointTable {
  std::vector<double> coords;  // n * dim values, row-major; float32 values unless `doubles`
  int dim = 0;
  bool doubles = false;  // read in float64 (else every value is a float32)
  // What the reader chose for the user to know (the columns taken from a
  // wider file), "PATH: ..."; empty when there is nothing to say.
  std::string notice;
  int64_t size() const { return dim > 0 ? static_cast<int64_t>(coords.size()) / dim : 0; }
  // The values as float32 (exact: only for a table read in float32).
  std::vector<float> floats() const;
};
PointTable read_point_table(const std::string& path, int min_dim, int max_dim,
                            Precision precision = Precision::Float32);
PointTable parse_text_table(const std::string& name, const std::string& bytes, int min_dim,
                            int max_dim, Precision precision = Precision::Float32);
PointTable parse_ply_table(const std::string& name, const std::string& bytes, int min_dim,
                           int max_dim, Precision precision = Precision::Float32);
PointTable parse_npy_table(const std::string& name, const std::string& bytes, int min_dim,
                           int max_dim, Precision precision = Precision::Float32);

std::vector<float> read_text_points(const std::string& path);
std::vector<float> read_ply_points(const std::string& path);
std::vector<float> read_npy_points(const std::string& path);
std::vector<float> read_raw_points(const std::string& path);

// The same parsers on a file's bytes already in memory (the readers above
// load the file and call these; the fuzzers in fuzz/ call them directly).
// `name` only labels the messages.
std::vector<float> parse_text_points(const std::string& name, const std::string& bytes);
std::vector<float> parse_ply_points(const std::string& name, const std::string& bytes);
std::vector<float> parse_npy_points(const std::string& name, const std::string& bytes);
std::vector<float> parse_raw_points(const std::string& name, const std::string& bytes);

// The whole file; throws with "PATH: cannot open (reason)" when it cannot.
std::string read_file_bytes(const std::string& path);

// Text from a file as a message shows it: at most 40 bytes (then "..."),
// control bytes as '?', so that a message stays one short line whatever
// the file holds.
std::string excerpt(const std::string& text);

// Lower-case extension with the dot (".ply"), "" when none.
std::string extension_of(const std::string& path);

// .npy writers (format 1.0, C order, little endian), shape (rows, cols), or
// (rows,) when cols < 0.
void write_npy_int32(const std::string& path, const int32_t* data, int64_t rows, int64_t cols);
void write_npy_float32(const std::string& path, const float* data, int64_t rows, int64_t cols);
void write_npy_float64(const std::string& path, const double* data, int64_t rows, int64_t cols);
void write_npy_int64(const std::string& path, const int64_t* data, int64_t rows, int64_t cols);
// Shape (n,).
void write_npy_int32_vector(const std::string& path, const int32_t* data, int64_t n);

// CSV: a header line "i0,...,i{k-1}" (then ",d0,...,d{k-1}" when distances
// are given), one row per query; distances printed with 9 significant digits
// for float32, 17 for float64 (each a round trip: reading the text back
// gives the same value), "inf" for missing neighbours.
void write_csv(const std::string& path, const int32_t* indices, const float* sq_dist, int64_t rows,
               int64_t k);
void write_csv(const std::string& path, const int32_t* indices, const double* sq_dist, int64_t rows,
               int64_t k);

// CSV of rows of any length (CSR: row i is indices[offsets[i] ..
// offsets[i+1])), one line per (row, entry) in row order: header
// "query,index", then ",d" with the squared distances when sq_dist is given
// (as write_csv prints them).
void write_csv_lists(const std::string& path, const int64_t* offsets, int64_t rows,
                     const int32_t* indices, const float* sq_dist);
void write_csv_lists(const std::string& path, const int64_t* offsets, int64_t rows,
                     const int32_t* indices, const double* sq_dist);

// CSV of a float32 or float64 matrix: header "p0,...,p{cols-1}" (p =
// prefix), 9 (float32) or 17 (float64) significant digits, "inf" for
// infinities.
void write_csv_float32(const std::string& path, const char* prefix, const float* data, int64_t rows,
                       int64_t cols);
void write_csv_float64(const std::string& path, const char* prefix, const double* data,
                       int64_t rows, int64_t cols);

// A text file written line by line; every failure (open, write, close)
// throws with the path. close() reports a failed flush; the destructor only
// closes.
class TextFile {
 public:
  explicit TextFile(const std::string& path);
  ~TextFile();
  TextFile(const TextFile&) = delete;
  TextFile& operator=(const TextFile&) = delete;
  void line(const std::string& text);  // appends '\n'
  void close();

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
};

// A CSV field: as it is, or in double quotes (quotes doubled) when it holds
// a comma, a quote or a line break (RFC 4180).
std::string csv_field(const std::string& s);

// "out.npy" -> "out_dist.npy".
std::string distance_path_for(const std::string& npy_path);

}  // namespace knn_cli

#endif
