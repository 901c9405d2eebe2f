// point_io.h - point-cloud readers and result writers of the knn-gpgpu tool.
//
// Readers return n*3 float32 coordinates (x, y, z per point, file order) and
// throw std::runtime_error with a one-line message naming the file (and the
// line or element where the problem is) on any malformed input. They never
// check coordinates for NaN/Inf: the library does that and names the point.
//
// Formats, chosen by the file extension (case-insensitive):
//   .xyz .txt .csv  text, whitespace and/or comma separated, exactly 3 columns,
//                   an optional non-numeric header line, '#' comment lines
//   .ply            ascii or binary_little_endian; the vertex element's x/y/z
//                   (any scalar type, float/double usually), other properties
//                   and elements skipped
//   .npy            float32 or float64, shape (n, 3), C order
//   .bin .f32       raw little-endian float32, n*3 values
#ifndef KNN_TOOLS_POINT_IO_H
#define KNN_TOOLS_POINT_IO_H

#include <cstdint>
#include <string>
#include <vector>

namespace knn_cli {

std::vector<float> read_points(const std::string& path);

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

// Lower-case extension with the dot (".ply"), "" when none.
std::string extension_of(const std::string& path);

// .npy writers (format 1.0, C order, little endian), shape (rows, cols).
void write_npy_int32(const std::string& path, const int32_t* data, int64_t rows, int64_t cols);
void write_npy_float32(const std::string& path, const float* data, int64_t rows, int64_t cols);

// CSV: a header line "i0,...,i{k-1}" (then ",d0,...,d{k-1}" when distances
// are given), one row per query; distances printed with 9 significant digits
// (float32 round trip), "inf" for missing neighbours.
void write_csv(const std::string& path, const int32_t* indices, const float* sq_dist,
               int64_t rows, int64_t k);

// "out.npy" -> "out_dist.npy".
std::string distance_path_for(const std::string& npy_path);

}  // namespace knn_cli

#endif
