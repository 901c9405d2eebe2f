// test_cli.cpp - the knn-gpgpu tool run as a user runs it, its results compared
// with the library's own API (mpBuildKdTree + mpQueryAll for indices,
// knn_brute_force for squared distances). File writers and output parsers
// here are written independently of the tool's own reader code.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#if KNN_CLI_HAVE_JSON
#include <nlohmann/json.hpp>
#endif

#include "knn_gpgpu.h"

namespace {

struct RunResult {
  int rc = -1;  // exit status, or 1000 + signal when killed
  std::string out, err;
};

std::string test_dir() {
  static std::string dir;
  if (dir.empty()) {
    std::string base = ::testing::TempDir();
    if (base.empty() || base.back() != '/') base += '/';
    char tmpl[4096];
    std::snprintf(tmpl, sizeof tmpl, "%sknn_cli_test_XXXXXX", base.c_str());
    const char* made = mkdtemp(tmpl);
    dir = made ? made : "/tmp";
  }
  return dir;
}

// Removes the scratch folder when the test program ends.
class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    const std::string d = test_dir();
    if (d.find("knn_cli_test_") != std::string::npos) {
      const std::string cmd = "rm -rf '" + d + "'";
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", d.c_str());
    }
  }
};
::testing::Environment* const kCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

std::string path_of(const std::string& name) { return test_dir() + "/" + name; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunResult run_cli(const std::string& args) {
  const std::string o = path_of("stdout.txt"), e = path_of("stderr.txt");
  const std::string cmd =
      std::string("'") + KNN_CLI_PATH + "' " + args + " >'" + o + "' 2>'" + e + "'";
  const int st = std::system(cmd.c_str());
  RunResult r;
  if (st != -1 && WIFEXITED(st)) {
    r.rc = WEXITSTATUS(st);
  } else if (st != -1 && WIFSIGNALED(st)) {
    r.rc = 1000 + WTERMSIG(st);
  }
  r.out = slurp(o);
  r.err = slurp(e);
  return r;
}

std::vector<float> random_points(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-10.0f, 10.0f);
  std::vector<float> xyz(static_cast<size_t>(n) * 3);
  for (auto& v : xyz) v = u(rng);
  // Some exact duplicates and a shared coordinate, to exercise ties.
  for (int i = 5; i < n; i += 7)
    for (int d = 0; d < 3; ++d) xyz[i * 3 + d] = xyz[(i - 5) * 3 + d];
  for (int i = 3; i < n; i += 11) xyz[i * 3] = 1.5f;
  return xyz;
}

// ---- Writers of every input format ---------------------------------------------------
void write_text(const std::string& path, const std::vector<float>& xyz, const char* sep,
                const char* header) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  if (header) std::fprintf(f, "%s\n", header);
  for (size_t i = 0; i < xyz.size(); i += 3)
    std::fprintf(f, "%.9g%s%.9g%s%.9g\n", xyz[i], sep, xyz[i + 1], sep, xyz[i + 2]);
  std::fclose(f);
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <class T>
void append_le(std::string* s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s->append(b, sizeof(T));  // the tests run on little-endian hosts
}

std::string npy_bytes(const char* descr, const std::string& shape, const std::string& body) {
  std::string h =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64 != 0) h.push_back(' ');
  h.push_back('\n');
  std::string s("\x93NUMPY\x01\x00", 8);
  s.push_back(static_cast<char>(h.size() & 0xff));
  s.push_back(static_cast<char>(h.size() >> 8));
  return s + h + body;
}

void write_npy(const std::string& path, const std::vector<float>& xyz, bool f64) {
  std::string body;
  for (float v : xyz) {
    if (f64) {
      append_le<double>(&body, v);
    } else {
      append_le<float>(&body, v);
    }
  }
  write_bytes(path,
              npy_bytes(f64 ? "<f8" : "<f4", "(" + std::to_string(xyz.size() / 3) + ", 3)", body));
}

void write_raw(const std::string& path, const std::vector<float>& xyz) {
  std::string body;
  for (float v : xyz) append_le<float>(&body, v);
  write_bytes(path, body);
}

// ASCII PLY: an extra property between the coordinates and a face element after.
void write_ply_ascii(const std::string& path, const std::vector<float>& xyz) {
  const size_t n = xyz.size() / 3;
  std::ostringstream s;
  s << "ply\nformat ascii 1.0\ncomment made by test_cli\nelement vertex " << n
    << "\nproperty float x\nproperty float y\nproperty uchar red\nproperty float z\n"
       "element face 1\nproperty list uchar int vertex_indices\nend_header\n";
  char line[128];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(line, sizeof line, "%.9g %.9g %u %.9g\n", xyz[i * 3], xyz[i * 3 + 1],
                  static_cast<unsigned>(i % 256), xyz[i * 3 + 2]);
    s << line;
  }
  s << "3 0 1 2\n";
  write_bytes(path, s.str());
}

// Binary PLY with double coordinates, an element before the vertices (with
// a list) and one after; little endian, or big endian when asked.
std::string ply_binary_bytes(const std::vector<float>& xyz, bool big_endian = false) {
  const size_t n = xyz.size() / 3;
  std::string s = std::string("ply\nformat ") +
                  (big_endian ? "binary_big_endian" : "binary_little_endian") +
                  " 1.0\nelement camera 1\nproperty float view\n"
                  "property list uchar short tags\nelement vertex " +
                  std::to_string(n) +
                  "\nproperty double x\nproperty uchar flag\nproperty double y\nproperty double "
                  "z\nproperty float intensity\nelement face 1\nproperty list uchar int "
                  "vertex_indices\nend_header\n";
  auto put = [&](auto v) {
    const size_t at = s.size();
    append_le(&s, v);
    if (big_endian) std::reverse(s.begin() + static_cast<std::ptrdiff_t>(at), s.end());
  };
  put(1.0f);
  put(uint8_t{2});
  put(int16_t{7});
  put(int16_t{8});
  for (size_t i = 0; i < n; ++i) {
    put(static_cast<double>(xyz[i * 3]));
    put(static_cast<uint8_t>(i));
    put(static_cast<double>(xyz[i * 3 + 1]));
    put(static_cast<double>(xyz[i * 3 + 2]));
    put(0.5f);
  }
  put(uint8_t{3});
  for (int32_t v = 0; v < 3; ++v) put(v);
  return s;
}

// ---- Parsers of the tool's outputs ---------------------------------------------------
template <class T>
std::vector<T> read_npy(const std::string& path, const char* descr, int64_t rows, int64_t cols) {
  const std::string s = slurp(path);
  EXPECT_GE(s.size(), 10u) << path;
  if (s.size() < 10) return {};
  EXPECT_EQ(s.compare(0, 6, "\x93NUMPY"), 0);
  const size_t hl = static_cast<unsigned char>(s[8]) | (static_cast<unsigned char>(s[9]) << 8);
  const std::string h = s.substr(10, hl);
  EXPECT_NE(h.find(std::string("'descr': '") + descr + "'"), std::string::npos) << h;
  EXPECT_NE(h.find("'fortran_order': False"), std::string::npos) << h;
  EXPECT_NE(h.find("(" + std::to_string(rows) + ", " + std::to_string(cols) + ")"),
            std::string::npos)
      << h;
  EXPECT_EQ((10 + hl) % 64, 0u);
  const size_t count = static_cast<size_t>(rows * cols);
  EXPECT_EQ(s.size(), 10 + hl + count * sizeof(T));
  std::vector<T> v(count);
  if (s.size() == 10 + hl + count * sizeof(T) && count)
    std::memcpy(v.data(), s.data() + 10 + hl, count * sizeof(T));
  return v;
}

struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

Csv read_csv(const std::string& path) {
  Csv c;
  std::istringstream in(slurp(path));
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) f.push_back(cell);
    if (first) {
      c.header = f;
      first = false;
    } else {
      c.rows.push_back(f);
    }
  }
  return c;
}

// ---- The library's own answers ---------------------------------------------------------
std::vector<int> library_knn(const std::vector<float>& ref, const std::vector<float>& query,
                             int k) {
  const int n = static_cast<int>(ref.size() / 3), m = static_cast<int>(query.size() / 3);
  std::vector<Node> tree(static_cast<size_t>(n > 0 ? n : 1));
  EXPECT_EQ(mpBuildKdTree(reinterpret_cast<const Point*>(ref.data()), n, tree.data()), KNN_OK);
  std::vector<int> res(static_cast<size_t>(m) * k);
  EXPECT_EQ(
      mpQueryAll(reinterpret_cast<const Point*>(query.data()), tree.data(), m, n, k, res.data()),
      KNN_OK);
  return res;
}

std::vector<float> library_dist(const std::vector<float>& ref, const std::vector<float>& query,
                                int k, std::vector<int>* ind) {
  const int n = static_cast<int>(ref.size() / 3), m = static_cast<int>(query.size() / 3);
  std::vector<float> d(static_cast<size_t>(m) * k);
  ind->assign(d.size(), 0);
  EXPECT_EQ(knn_brute_force(ref.data(), n, query.data(), m, 3, k, d.data(), ind->data()), KNN_OK);
  return d;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

struct Format {
  const char* name;
  void (*write)(const std::string&, const std::vector<float>&);
};

const Format kFormats[] = {
    {"pts.xyz",
     [](const std::string& p, const std::vector<float>& v) { write_text(p, v, " ", nullptr); }},
    {"pts.txt",
     [](const std::string& p, const std::vector<float>& v) { write_text(p, v, "\t", "x\ty\tz"); }},
    {"pts.csv",
     [](const std::string& p, const std::vector<float>& v) { write_text(p, v, ",", "x,y,z"); }},
    {"pts_ascii.ply", write_ply_ascii},
    {"pts_bin.ply", [](const std::string& p,
                       const std::vector<float>& v) { write_bytes(p, ply_binary_bytes(v)); }},
    {"pts_be.ply", [](const std::string& p,
                      const std::vector<float>& v) { write_bytes(p, ply_binary_bytes(v, true)); }},
    {"pts32.npy",
     [](const std::string& p, const std::vector<float>& v) { write_npy(p, v, false); }},
    {"pts64.npy", [](const std::string& p, const std::vector<float>& v) { write_npy(p, v, true); }},
    {"pts.bin", write_raw},
    {"pts.f32", write_raw},
};

}  // namespace

TEST(Cli, InfoPrintsVersionAndDevices) {
  const RunResult r = run_cli("info");
  ASSERT_EQ(r.rc, 0) << r.err;
  const int v = knn_version();
  const std::string ver = std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
                          std::to_string(v % 100);
  EXPECT_NE(r.out.find(ver), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CUDA devices: " + std::to_string(cuGetDeviceCount())), std::string::npos);
  EXPECT_NE(r.out.find("current device:"), std::string::npos);
  EXPECT_NE(r.out.find("free GPU bytes:"), std::string::npos);
}

TEST(Cli, InfoJson) {
#if KNN_CLI_HAVE_JSON
  const RunResult r = run_cli("info --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_NE(r.out.find("\"version_number\": " + std::to_string(knn_version())), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"cuda_device_count\": " + std::to_string(cuGetDeviceCount())),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"free_gpu_bytes\""), std::string::npos) << r.out;
#else
  GTEST_SKIP() << "built without nlohmann-json";
#endif
}

TEST(Cli, EveryInputFormatMatchesTheLibrary) {
  const std::vector<float> ref = random_points(300, 1), query = random_points(57, 2);
  const int k = 6;
  const std::vector<int> want = library_knn(ref, query, k);
  std::vector<int> bf_ind;
  const std::vector<float> want_d = library_dist(ref, query, k, &bf_ind);
  ASSERT_EQ(bf_ind, want);
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    const std::string rp = path_of(std::string("ref_") + f.name);
    const std::string qp = path_of(std::string("query_") + f.name);
    f.write(rp, ref);
    f.write(qp, query);
    const std::string out = path_of("out.npy");
    std::remove(out.c_str());
    std::remove(path_of("out_dist.npy").c_str());
    for (const char* backend : {"openmp", "auto"}) {
      const RunResult r = run_cli("knn --precision float32 --ref '" + rp + "' --query '" + qp +
                                  "' --k 6 --out '" + out + "' --distances --backend " + backend);
      ASSERT_EQ(r.rc, 0) << r.err;
      EXPECT_EQ(r.err, "");  // no progress when stderr is not a terminal
      EXPECT_EQ(r.out, "");
      const std::vector<int32_t> got = read_npy<int32_t>(out, "<i4", 57, k);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "slot " << i;
      const std::vector<float> d = read_npy<float>(path_of("out_dist.npy"), "<f4", 57, k);
      ASSERT_EQ(d.size(), want_d.size());
      for (size_t i = 0; i < d.size(); ++i) ASSERT_TRUE(same_bits(d[i], want_d[i])) << "slot " << i;
    }
  }
}

// --progress without a terminal: the stage lines and one plain line per
// library call when it ends, with its figures (the query: every query point).
TEST(Cli, ProgressFlagPrintsPlainLinesWithoutATerminal) {
  const std::vector<float> ref = random_points(2000, 11);
  write_npy(path_of("prog.npy"), ref, false);
  const std::string out = path_of("prog_out.npy");
  const RunResult r = run_cli("knn --ref '" + path_of("prog.npy") + "' --self --k 4 --out '" + out +
                              "' --backend openmp --progress");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("building the kd-tree"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("query 100.0%  2000/2000"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" left"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << "no bar without a terminal";
  EXPECT_EQ(read_npy<int32_t>(out, "<i4", 2000, 4), library_knn(ref, ref, 4));
}

TEST(Cli, CsvOutputParsesBack) {
  const std::vector<float> ref = random_points(40, 3), query = random_points(9, 4);
  write_text(path_of("c_ref.xyz"), ref, " ", nullptr);
  write_text(path_of("c_q.csv"), query, ",", nullptr);
  const int k = 4;
  const std::vector<int> want = library_knn(ref, query, k);
  std::vector<int> bf;
  const std::vector<float> want_d = library_dist(ref, query, k, &bf);
  const std::string out = path_of("c_out.csv");
  RunResult r = run_cli("knn --precision float32 --ref '" + path_of("c_ref.xyz") + "' --query '" +
                        path_of("c_q.csv") + "' --k 4 --distances --out '" + out + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  Csv c = read_csv(out);
  ASSERT_EQ(c.header, (std::vector<std::string>{"i0", "i1", "i2", "i3", "d0", "d1", "d2", "d3"}));
  ASSERT_EQ(c.rows.size(), 9u);
  for (size_t i = 0; i < 9; ++i) {
    ASSERT_EQ(c.rows[i].size(), 8u);
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(std::stoi(c.rows[i][j]), want[i * k + j]);
      EXPECT_TRUE(same_bits(std::strtof(c.rows[i][k + j].c_str(), nullptr), want_d[i * k + j]))
          << c.rows[i][k + j];
    }
  }
  // Without --distances: indices only.
  r = run_cli("knn --precision float32 --ref '" + path_of("c_ref.xyz") + "' --query '" +
              path_of("c_q.csv") + "' --k 4 --out '" + out + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  c = read_csv(out);
  EXPECT_EQ(c.header.size(), 4u);
  ASSERT_EQ(c.rows.size(), 9u);
  EXPECT_EQ(c.rows[0].size(), 4u);
}

TEST(Cli, FewerPointsThanKGivesMinusOneAndInfinity) {
  const std::vector<float> ref = {0, 0, 0, 1, 0, 0};
  write_text(path_of("few.xyz"), ref, " ", nullptr);
  const RunResult r = run_cli("knn --ref '" + path_of("few.xyz") +
                              "' --self --k 3 --distances --out '" + path_of("few.csv") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const Csv c = read_csv(path_of("few.csv"));
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.rows[0], (std::vector<std::string>{"0", "1", "-1", "0", "1", "inf"}));
  EXPECT_EQ(c.rows[1], (std::vector<std::string>{"1", "0", "-1", "0", "1", "inf"}));
}

TEST(Cli, ExcludeSelfDropsOnlyTheOwnIndex) {
  // Points 0, 2 and 3 coincide; point 1 is apart.
  const std::vector<float> small = {0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0};
  write_text(path_of("dup.xyz"), small, " ", nullptr);
  RunResult r =
      run_cli("knn --ref '" + path_of("dup.xyz") +
              "' --self --exclude-self --k 2 --distances --out '" + path_of("dup.csv") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const Csv c = read_csv(path_of("dup.csv"));
  ASSERT_EQ(c.rows.size(), 4u);
  EXPECT_EQ(c.rows[0], (std::vector<std::string>{"2", "3", "0", "0"}));
  EXPECT_EQ(c.rows[1], (std::vector<std::string>{"0", "2", "25", "25"}));
  EXPECT_EQ(c.rows[2], (std::vector<std::string>{"0", "3", "0", "0"}));
  EXPECT_EQ(c.rows[3], (std::vector<std::string>{"0", "2", "0", "0"}));

  // Random data with duplicates: the library's k+1 list minus the own index.
  const std::vector<float> pts = random_points(200, 5);
  write_npy(path_of("self.npy"), pts, false);
  const int k = 5;
  r = run_cli("knn --ref '" + path_of("self.npy") + "' --self --exclude-self --k 5 --out '" +
              path_of("self_out.npy") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::vector<int32_t> got = read_npy<int32_t>(path_of("self_out.npy"), "<i4", 200, k);
  const std::vector<int> full = library_knn(pts, pts, k + 1);
  ASSERT_EQ(got.size(), 200u * k);
  for (int i = 0; i < 200; ++i) {
    std::vector<int> want;
    bool dropped = false;
    for (int j = 0; j < k + 1; ++j) {
      if (!dropped && full[i * (k + 1) + j] == i) {
        dropped = true;
        continue;
      }
      want.push_back(full[i * (k + 1) + j]);
    }
    want.resize(k);
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(got[i * k + j], want[j]) << "query " << i;
      EXPECT_NE(got[i * k + j], i);
    }
  }
  // --exclude-self without --self is refused.
  r = run_cli("knn --ref '" + path_of("self.npy") + "' --query '" + path_of("self.npy") +
              "' --exclude-self --k 5 --out '" + path_of("x.npy") + "'");
  EXPECT_NE(r.rc, 0);
  EXPECT_LT(r.rc, 1000);
}

TEST(Cli, MalformedInputsFailCleanly) {
  const std::vector<float> pts = random_points(20, 6);
  struct Case {
    std::string name, bytes, expect;
  };
  std::vector<Case> cases;
  cases.push_back({"cols.xyz", "1 2 3\n4 5 6\n7 8\n", "line 3"});
  cases.push_back({"cols4.csv", "x,y,z\n1,2,3,4\n1,2,3\n",
                   "line 3: expected 4 columns (as on line 2), found 3"});
  cases.push_back({"word.txt", "1 2 3\n1 b 3\n", "line 2"});
  cases.push_back({"nan.xyz", "1 2 3\n4 5 6\n7 nan 9\n", "line 3, column 2 ('nan', point 2)"});
  cases.push_back({"inf.csv", "1,2,3\ninf,5,6\n", "line 2, column 1 ('inf', point 1)"});
  {
    std::string ply = ply_binary_bytes(pts);
    cases.push_back({"trunc_bin.ply", ply.substr(0, ply.size() - 40), "truncated"});
  }
  {
    std::string s =
        "ply\nformat ascii 1.0\nelement vertex 5\nproperty float x\nproperty float y\n"
        "property float z\nend_header\n1 2 3\n4 5 6\n";
    cases.push_back({"trunc_ascii.ply", s, "truncated"});
  }
  cases.push_back({"trunc_header.ply",
                   "ply\nformat ascii 1.0\nelement vertex 5\nproperty float x\n", "end_header"});
  cases.push_back({"noz.ply",
                   "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n"
                   "end_header\n1 2\n",
                   "'z'"});
  cases.push_back({"be.ply",
                   "ply\nformat binary_big_endian 1.0\nelement vertex 1\nproperty float x\n"
                   "property float y\nproperty float z\nend_header\n0123456789a",
                   "truncated PLY: element 'vertex' ends at 0 of 1"});
  cases.push_back({"float_count.ply",
                   "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\n"
                   "property float y\nproperty float z\nproperty list float int ids\n"
                   "end_header\n1 2 3 1 0\n",
                   "PLY header line 7: list property 'ids' has the count type 'float'"});
  cases.push_back({"notply.ply", "hello\n", "PLY"});
  cases.push_back({"shape.npy", npy_bytes("<f4", "(2, 2)", std::string(16, '\0')), "(n, 3)"});
  cases.push_back({"dtype.npy", npy_bytes("<i4", "(2, 3)", std::string(24, '\0')), "dtype"});
  cases.push_back({"short.npy", npy_bytes("<f4", "(4, 3)", std::string(24, '\0')), "truncated"});
  cases.push_back({"magic.npy", "not numpy at all", "npy"});
  cases.push_back({"odd.bin", std::string(13, '\0'), "multiple of 12"});
  cases.push_back({"points.dat", "1 2 3\n", "unknown point file type"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    write_bytes(path_of(c.name), c.bytes);
    const RunResult r = run_cli("knn --ref '" + path_of(c.name) + "' --self --k 2 --out '" +
                                path_of("bad_out.npy") + "'");
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  }
  // A missing file, as reference and as query.
  write_text(path_of("good.xyz"), pts, " ", nullptr);
  RunResult r = run_cli("knn --ref '" + path_of("missing.xyz") + "' --self --k 2 --out '" +
                        path_of("bad_out.npy") + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("missing.xyz"), std::string::npos) << r.err;
  r = run_cli("knn --ref '" + path_of("good.xyz") + "' --query '" + path_of("missing.npy") +
              "' --k 2 --out '" + path_of("bad_out.npy") + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("missing.npy"), std::string::npos) << r.err;
  // A NaN in the queries only.
  write_bytes(path_of("qnan.xyz"), "0 0 0\n1 1 nan\n");
  r = run_cli("knn --ref '" + path_of("good.xyz") + "' --query '" + path_of("qnan.xyz") +
              "' --k 2 --out '" + path_of("bad_out.npy") + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("qnan.xyz: line 2, column 3"), std::string::npos) << r.err;
  // Bad output name, bad k, bad backend.
  r = run_cli("knn --ref '" + path_of("good.xyz") + "' --self --k 2 --out '" + path_of("o.txt") +
              "'");
  EXPECT_EQ(r.rc, 1);
  r = run_cli("knn --ref '" + path_of("good.xyz") + "' --self --k 0 --out '" + path_of("o.npy") +
              "'");
  EXPECT_NE(r.rc, 0);
  EXPECT_LT(r.rc, 1000);
  EXPECT_NE(r.err.find("--k: must be at least 1, not 0"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 200u) << r.err;
  r = run_cli("knn --ref '" + path_of("good.xyz") + "' --self --k 2 --backend metal --out '" +
              path_of("o.npy") + "'");
  EXPECT_NE(r.rc, 0);
  EXPECT_LT(r.rc, 1000);
}

// Hostile text files (issue 20): a line of 100 MB is refused at once, in
// bounded time and memory, and the message does not hold it; a NUL byte is
// an error naming the line and column (it used to end the field silently:
// "1\0 9" read as 1); a coordinate that is not finite names its line and
// column, not only the point.
TEST(Cli, HostileTextFilesAreRefusedWithTheLine) {
  std::string huge = "1 2 3\n";
  huge.append(size_t{100} << 20, '7');
  huge += " 1 2\n";
  write_bytes(path_of("huge_line.xyz"), huge);
  huge.clear();
  huge.shrink_to_fit();
  const std::string out = " --self --k 1 --precision float32 --out '" + path_of("h.npy") + "'";
  const auto start = std::chrono::steady_clock::now();
  RunResult r = run_cli("knn --ref '" + path_of("huge_line.xyz") + "'" + out);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("huge_line.xyz: line 2 is 104857604 bytes long, over the limit of 65536"),
            std::string::npos)
      << r.err.substr(0, 300);
  EXPECT_LT(r.err.size(), 300u) << "the message must not hold the line";
  EXPECT_LT(seconds, 5.0) << "a long line must be refused without parsing it";
  std::remove(path_of("huge_line.xyz").c_str());

  struct Case {
    std::string name, bytes, expect;
  };
  const Case cases[] = {
      {"nul.xyz", std::string("1 2 3\n1\0 9,2,3\n", 16), "nul.xyz: line 2, column 2: a NUL byte"},
      {"nul.ply",
       std::string("ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n"
                   "property float z\nend_header\n1 2\0 3\n",
                   106),
       "nul.ply: line 8, column 4: a NUL byte"},
      {"nan_col3.csv", "x,y,z\n1,2,3\n4,5,-nan\n",
       "nan_col3.csv: line 3, column 3 ('-nan', point 1)"},
      {"over.xyz", "1 2 1e39\n", "over.xyz: line 1, column 3 ('1e39', point 0)"},
      {"nan_ascii.ply",
       "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\n"
       "property float z\nend_header\n1 2 3\n4 nan 6\n",
       "nan_ascii.ply: PLY line 9: y of vertex 1 is not a finite"},
      {"long_word.xyz", "1 2 3\n1 " + std::string(5000, 'b') + " 3\n",
       "line 2: not a number in '1 bbbb"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    write_bytes(path_of(c.name), c.bytes);
    r = run_cli("knn --ref '" + path_of(c.name) + "'" + out);
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_LT(r.err.size(), 300u) << r.err;
  }
  // Binary formats name the row (and the byte for raw files).
  std::string raw;
  for (float v : {1.f, 2.f, 3.f, 4.f, std::numeric_limits<float>::infinity(), 6.f})
    append_le(&raw, v);
  write_bytes(path_of("inf.bin"), raw);
  r = run_cli("knn --ref '" + path_of("inf.bin") + "'" + out);
  EXPECT_NE(r.err.find("inf.bin: point 1, coordinate 1 (byte 16)"), std::string::npos) << r.err;
  std::string body;
  for (float v : {1.f, 2.f, 3.f, 4.f, 5.f, std::nanf("")}) append_le(&body, v);
  write_bytes(path_of("nan.npy"), npy_bytes("<f4", "(2, 3)", body));
  r = run_cli("knn --ref '" + path_of("nan.npy") + "'" + out);
  EXPECT_NE(r.err.find("nan.npy: .npy row 1, column 2 is not a finite"), std::string::npos)
      << r.err;
}

// The .npy header is a dict, parsed as one (issue 20): a key is a whole
// string literal, so text that looks like a key inside a value does not
// choose the dtype, and numpy's three keys must be there, once each. A
// shape too large for 64 bits says so instead of reading as INT64_MAX.
TEST(Cli, NpyHeaderIsParsedAsADict) {
  const std::string out = " --self --k 1 --out '" + path_of("n.csv") + "'";
  auto npy_header = [](const std::string& dict, const std::string& body) {
    std::string h = dict;
    while ((10 + h.size() + 1) % 64 != 0) h.push_back(' ');
    h.push_back('\n');
    std::string s("\x93NUMPY\x01\x00", 8);
    s.push_back(static_cast<char>(h.size() & 0xff));
    s.push_back(static_cast<char>(h.size() >> 8));
    return s + h + body;
  };
  // int32 data: 1 2 3 as int32 bits are tiny subnormal floats, a wrong answer
  // that nothing else would catch.
  std::string ints;
  for (int32_t v : {1, 2, 3}) append_le(&ints, v);
  struct Case {
    std::string name, dict, expect;
  };
  const Case cases[] = {
      {"fake_key.npy",
       "{'note': \"'descr': '<f4', \", 'descr': '<i4', 'fortran_order': False, 'shape': (1, 3), }",
       "unexpected key 'note'"},
      {"dup.npy", "{'descr': '<f4', 'descr': '<i4', 'fortran_order': False, 'shape': (1, 3), }",
       "the key 'descr' appears twice"},
      {"no_shape.npy", "{'descr': '<f4', 'fortran_order': False, }", "has no 'shape'"},
      {"shape_str.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': '(1, 3)', }",
       "expected '('"},
      {"order.npy", "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1, 3), }",
       "expected True or False"},
      {"huge_shape.npy",
       "{'descr': '<f4', 'fortran_order': False, 'shape': (123456789012345678901234567890, 3), }",
       "shape dimension 123456789012345678901234567890 does not fit in 64 bits"},
      {"max_shape.npy",
       "{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775807, 3), }",
       "shape says 9223372036854775807 points, file holds 1"},
      {"neg_shape.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3), }",
       "expected a non-negative integer"},
      {"tail.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), } x",
       "text after the closing '}'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    write_bytes(path_of(c.name), npy_header(c.dict, ints));
    const RunResult r = run_cli("knn --ref '" + path_of(c.name) + "'" + out);
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_NE(r.err.find(c.name + ": "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
  }
  // Key order, quotes, spacing and a missing trailing comma are free, as in
  // Python; the data are read.
  std::string floats;
  for (float v : {0.f, 0.f, 0.f, 5.f, 0.f, 0.f}) append_le(&floats, v);
  write_bytes(path_of("order_free.npy"),
              npy_header("{ \"shape\":(2,3) ,'fortran_order' : False,'descr':'<f4'}", floats));
  const RunResult r = run_cli("knn --ref '" + path_of("order_free.npy") + "'" + out);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(slurp(path_of("n.csv")), "i0\n0\n1\n");
}

TEST(Cli, CudaBackendWithoutDeviceFailsCleanly) {
  if (cuGetDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  write_text(path_of("cu.xyz"), random_points(10, 7), " ", nullptr);
  const RunResult r = run_cli("knn --ref '" + path_of("cu.xyz") +
                              "' --self --k 2 --backend cuda --out '" + path_of("cu.npy") + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("KNN_ERR_NO_DEVICE"), std::string::npos) << r.err;
}

// ---- radius ---------------------------------------------------------------------------
// Rows of any dimension, as text or .npy (the tool's readers give the
// dimension of the file).
void write_table(const std::string& path, const std::vector<float>& v, int dim, const char* sep) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  for (size_t i = 0; i < v.size(); i += dim)
    for (int d = 0; d < dim; ++d) std::fprintf(f, "%.9g%s", v[i + d], d + 1 < dim ? sep : "\n");
  std::fclose(f);
}

void write_npy_table(const std::string& path, const std::vector<float>& v, int dim) {
  std::string body;
  for (float x : v) append_le<float>(&body, x);
  write_bytes(
      path,
      npy_bytes("<f4", "(" + std::to_string(v.size() / dim) + ", " + std::to_string(dim) + ")",
                body));
}

std::vector<float> random_rows(int n, int dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(n) * dim);
  for (auto& x : v) x = u(rng);
  for (int i = 4; i < n; i += 9)  // exact duplicates: ties at equal distance
    for (int d = 0; d < dim; ++d) v[i * dim + d] = v[(i - 4) * dim + d];
  return v;
}

struct RadiusAnswer {
  std::vector<int32_t> idx, counts;
  std::vector<float> dist;
};

// The library's own answer, on the OpenMP engine.
RadiusAnswer library_radius(const std::vector<float>& ref, const std::vector<float>& query, int dim,
                            float radius, int max_neighbors) {
  const int64_t n = static_cast<int64_t>(ref.size()) / dim,
                m = static_cast<int64_t>(query.size()) / dim;
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  knn_index* ix = nullptr;
  RadiusAnswer a;
  EXPECT_EQ(knn_index_build(ref.data(), n, dim, &opt, &ix), KNN_OK) << knn_last_error();
  a.idx.assign(static_cast<size_t>(m) * max_neighbors, -7);
  a.dist.assign(a.idx.size(), -7.0f);
  a.counts.assign(static_cast<size_t>(m), -7);
  EXPECT_EQ(knn_index_radius(ix, query.data(), m, radius, max_neighbors,
                             max_neighbors ? a.idx.data() : nullptr,
                             max_neighbors ? a.dist.data() : nullptr, a.counts.data(), &opt),
            KNN_OK)
      << knn_last_error();
  knn_index_free(ix);
  return a;
}

// An answer of its own from knn_brute_force (every point, ascending by
// (distance, index)): the rows the contract defines, to check the library
// answer above against something that is not the index.
RadiusAnswer brute_force_radius(const std::vector<float>& ref, const std::vector<float>& query,
                                int dim, float radius, int max_neighbors) {
  const int n = static_cast<int>(ref.size()) / dim, m = static_cast<int>(query.size()) / dim;
  std::vector<float> d(static_cast<size_t>(m) * n);
  std::vector<int> ind(d.size());
  EXPECT_EQ(knn_brute_force(ref.data(), n, query.data(), m, dim, n, d.data(), ind.data()), KNN_OK);
  const float r2 = radius * radius;
  RadiusAnswer a;
  a.idx.assign(static_cast<size_t>(m) * max_neighbors, -1);
  a.dist.assign(a.idx.size(), std::numeric_limits<float>::infinity());
  a.counts.assign(static_cast<size_t>(m), 0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n && d[static_cast<size_t>(i) * n + j] <= r2; ++j) {
      if (a.counts[i] < max_neighbors) {
        a.idx[static_cast<size_t>(i) * max_neighbors + a.counts[i]] =
            ind[static_cast<size_t>(i) * n + j];
        a.dist[static_cast<size_t>(i) * max_neighbors + a.counts[i]] =
            d[static_cast<size_t>(i) * n + j];
      }
      ++a.counts[i];
    }
  return a;
}

void expect_same_answer(const RadiusAnswer& got, const RadiusAnswer& want, bool with_dist) {
  ASSERT_EQ(got.counts, want.counts);
  ASSERT_EQ(got.idx, want.idx);
  if (!with_dist) return;
  ASSERT_EQ(got.dist.size(), want.dist.size());
  for (size_t i = 0; i < got.dist.size(); ++i)
    ASSERT_TRUE(same_bits(got.dist[i], want.dist[i])) << "slot " << i;
}

RadiusAnswer read_radius_npy(const std::string& stem, int64_t m, int max_neighbors) {
  RadiusAnswer a;
  a.idx = read_npy<int32_t>(path_of(stem + "_idx.npy"), "<i4", m, max_neighbors);
  a.dist = read_npy<float>(path_of(stem + "_d.npy"), "<f4", m, max_neighbors);
  // Counts are one-dimensional: shape (m,).
  const std::string s = slurp(path_of(stem + "_n.npy"));
  EXPECT_NE(s.find("'shape': (" + std::to_string(m) + ",)"), std::string::npos) << s.substr(0, 80);
  const size_t hl =
      s.size() >= 10 ? (static_cast<unsigned char>(s[8]) | (static_cast<unsigned char>(s[9]) << 8))
                     : 0;
  EXPECT_EQ(s.size(), 10 + hl + 4 * static_cast<size_t>(m));
  a.counts.assign(static_cast<size_t>(m), 0);
  if (s.size() == 10 + hl + 4 * static_cast<size_t>(m) && m)
    std::memcpy(a.counts.data(), s.data() + 10 + hl, 4 * static_cast<size_t>(m));
  return a;
}

// What the tool says on stderr of rows that --max-neighbors cuts: the
// number of such queries and the first, from the library's counts.
std::string cut_rows_report(const std::vector<int32_t>& counts, int M, const std::string& radius,
                            bool allowed) {
  int64_t cut = 0, first = -1;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > M) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++cut;
    }
  }
  const std::string m = std::to_string(M);
  const std::string what = std::to_string(cut) + " of " + std::to_string(counts.size()) +
                           " queries have more than " + m + " neighbours within " + radius +
                           " (the first: query " + std::to_string(first) + ", with " +
                           (first < 0 ? "" : std::to_string(counts[static_cast<size_t>(first)])) +
                           "); --max-neighbors " + m + " keeps only the nearest " + m + " of each";
  return allowed ? "knn-gpgpu: warning: " + what + " (--allow-truncation)\n"
                 : "knn-gpgpu: " + what +
                       ". Nothing written: leave --max-neighbors out for every neighbour, or "
                       "pass --allow-truncation to keep the cut rows\n";
}

std::string radius_npy_outputs(const std::string& stem) {
  return " --out '" + path_of(stem + "_idx.npy") + "' --distances '" + path_of(stem + "_d.npy") +
         "' --counts '" + path_of(stem + "_n.npy") + "'";
}

TEST(Cli, RadiusEveryInputFormatMatchesTheLibrary) {
  const std::vector<float> ref = random_points(300, 11), query = random_points(57, 12);
  const float radius = 4.0f;
  const int M = 8;  // some queries have more in the radius: rows hold the nearest 8
  const RadiusAnswer want = library_radius(ref, query, 3, radius, M);
  expect_same_answer(want, brute_force_radius(ref, query, 3, radius, M), true);
  ASSERT_TRUE(std::any_of(want.counts.begin(), want.counts.end(), [](int32_t c) { return c > M; }));
  ASSERT_TRUE(std::any_of(want.counts.begin(), want.counts.end(), [](int32_t c) { return c < M; }));
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    const std::string rp = path_of(std::string("rref_") + f.name);
    const std::string qp = path_of(std::string("rquery_") + f.name);
    f.write(rp, ref);
    f.write(qp, query);
    const RunResult r =
        run_cli("radius --precision float32 --ref '" + rp + "' --query '" + qp +
                "' --radius 4 --max-neighbors 8 --allow-truncation --backend openmp" +
                radius_npy_outputs("rad"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, cut_rows_report(want.counts, M, "4", true));
    EXPECT_EQ(r.out, "");
    expect_same_answer(read_radius_npy("rad", 57, M), want, true);
  }
  // auto backend and --self.
  RunResult r = run_cli("radius --precision float32 --ref '" + path_of("rref_pts.xyz") +
                        "' --self --radius 4 --max-neighbors 8 --allow-truncation" +
                        radius_npy_outputs("rself"));
  ASSERT_EQ(r.rc, 0) << r.err;
  expect_same_answer(read_radius_npy("rself", 300, M), library_radius(ref, ref, 3, radius, M),
                     true);
}

TEST(Cli, RadiusCsvCountsOnlyAndOtherDimensions) {
  const std::vector<float> ref = random_points(120, 13), query = random_points(15, 14);
  const RadiusAnswer want = library_radius(ref, query, 3, 5.0f, 4);
  write_text(path_of("rc_ref.xyz"), ref, " ", nullptr);
  write_text(path_of("rc_q.xyz"), query, " ", nullptr);
  RunResult r =
      run_cli("radius --precision float32 --ref '" + path_of("rc_ref.xyz") + "' --query '" +
              path_of("rc_q.xyz") + "' --radius 5 --max-neighbors 4 --allow-truncation --out '" +
              path_of("rc_i.csv") + "' --distances '" + path_of("rc_d.csv") + "' --counts '" +
              path_of("rc_n.csv") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const Csv ci = read_csv(path_of("rc_i.csv")), cd = read_csv(path_of("rc_d.csv")),
            cn = read_csv(path_of("rc_n.csv"));
  EXPECT_EQ(ci.header, (std::vector<std::string>{"i0", "i1", "i2", "i3"}));
  EXPECT_EQ(cd.header, (std::vector<std::string>{"d0", "d1", "d2", "d3"}));
  EXPECT_EQ(cn.header, (std::vector<std::string>{"count"}));
  ASSERT_EQ(ci.rows.size(), 15u);
  ASSERT_EQ(cd.rows.size(), 15u);
  ASSERT_EQ(cn.rows.size(), 15u);
  for (size_t i = 0; i < 15; ++i) {
    EXPECT_EQ(std::stoi(cn.rows[i].at(0)), want.counts[i]);
    for (size_t j = 0; j < 4; ++j) {
      EXPECT_EQ(std::stoi(ci.rows[i].at(j)), want.idx[i * 4 + j]);
      EXPECT_TRUE(same_bits(std::strtof(cd.rows[i].at(j).c_str(), nullptr), want.dist[i * 4 + j]))
          << cd.rows[i][j];
    }
  }
  // --max-neighbors 0: the library's counting call, counts only.
  r = run_cli("radius --precision float32 --ref '" + path_of("rc_ref.xyz") + "' --query '" +
              path_of("rc_q.xyz") + "' --radius 5 --max-neighbors 0 --counts '" +
              path_of("rc_n0.csv") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const Csv cn0 = read_csv(path_of("rc_n0.csv"));
  ASSERT_EQ(cn0.rows.size(), 15u);
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(std::stoi(cn0.rows[i].at(0)), want.counts[i]);
  // An infinite radius (the library's "every point"): counts are n.
  r = run_cli("radius --precision float32 --ref '" + path_of("rc_ref.xyz") + "' --query '" +
              path_of("rc_q.xyz") + "' --radius inf --max-neighbors 0 --counts '" +
              path_of("rc_inf.csv") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const Csv cinf = read_csv(path_of("rc_inf.csv"));
  ASSERT_EQ(cinf.rows.size(), 15u);
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(cinf.rows[i].at(0), "120");

  // The file's dimension: 5 columns of text, a (n, 5) and a (n, 1) .npy.
  for (const int dim : {5, 1}) {
    SCOPED_TRACE(dim);
    const std::vector<float> r5 = random_rows(200, dim, 15 + dim),
                             q5 = random_rows(30, dim, 16 + dim);
    const float radius = dim == 5 ? 2.5f : 0.05f;
    const RadiusAnswer w5 = library_radius(r5, q5, dim, radius, 6);
    expect_same_answer(w5, brute_force_radius(r5, q5, dim, radius, 6), true);
    write_table(path_of("r5.csv"), r5, dim, ",");
    write_npy_table(path_of("q5.npy"), q5, dim);
    r = run_cli("radius --precision float32 --ref '" + path_of("r5.csv") + "' --query '" +
                path_of("q5.npy") + "' --radius " + (dim == 5 ? "2.5" : "0.05") +
                " --max-neighbors 6 --allow-truncation" + radius_npy_outputs("r5"));
    ASSERT_EQ(r.rc, 0) << r.err;
    expect_same_answer(read_radius_npy("r5", 30, 6), w5, true);
  }
}

TEST(Cli, RadiusBadArgumentsFailCleanly) {
  const std::vector<float> pts = random_points(20, 9);
  write_text(path_of("rb.xyz"), pts, " ", nullptr);
  write_bytes(path_of("rb2.xyz"), "1 2\n3 4\n");
  const std::string ref = " --ref '" + path_of("rb.xyz") + "'";
  const std::string out = " --out '" + path_of("rb_out.npy") + "'";
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {ref + " --radius 1 --max-neighbors 2" + out, "--query FILE or --self"},
      {ref + " --self --radius 1 --max-neighbors 0" + out, "--counts"},
      {ref + " --self --radius 1 --max-neighbors 2", "--out"},
      {ref + " --self --radius 1 --max-neighbors 2 --out '" + path_of("rb.txt") + "'",
       ".npy or .csv"},
      {ref + " --self --radius nan --max-neighbors 2" + out, "--radius"},
      {ref + " --self --radius -1 --max-neighbors 2" + out, "--radius"},
      {ref + " --query '" + path_of("rb2.xyz") + "' --radius 1 --max-neighbors 2" + out,
       "line 1: expected 3 columns"},
      {" --ref '" + path_of("nosuch.xyz") + "' --self --radius 1 --max-neighbors 2" + out,
       "nosuch.xyz"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const RunResult r = run_cli("radius" + c.args);
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  }
  // Command-line errors (CLI11): a radius that is not a number, a missing --radius.
  for (const std::string& args : {ref + " --self --radius abc --max-neighbors 2" + out,
                                  ref + " --self --max-neighbors 2" + out}) {
    const RunResult r = run_cli("radius" + args);
    EXPECT_NE(r.rc, 0);
    EXPECT_LT(r.rc, 1000);
  }
  write_bytes(path_of("rb_nan.xyz"), "1 2 3\n4 nan 6\n");
  const RunResult r = run_cli("radius --ref '" + path_of("rb_nan.xyz") +
                              "' --self --radius 1 --max-neighbors 2" + out);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("rb_nan.xyz: line 2, column 2"), std::string::npos) << r.err;
  const RunResult neg = run_cli("radius" + ref + " --self --radius 1 --max-neighbors -1" + out);
  EXPECT_NE(neg.err.find("--max-neighbors: must be at least 0, not -1"), std::string::npos)
      << neg.err;
}

// ---- pip ------------------------------------------------------------------------------
using Ring = std::vector<std::pair<float, float>>;
using Poly = std::vector<Ring>;  // outer ring, then holes

struct TestFeature {
  std::string members;  // extra JSON members of the Feature ("id", "properties")
  std::string type;     // Polygon, MultiPolygon or "" (null geometry)
  std::vector<Poly> polys;
  std::string csv_id;   // what the counts file must say
  bool with_z = false;  // positions with a third value, which the tool ignores
};

std::string ring_json(const Ring& r, bool with_z) {
  std::string s = "[";
  char buf[96];
  for (size_t i = 0; i < r.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s[%.9g, %.9g%s]", i ? ", " : "", r[i].first, r[i].second,
                  with_z ? ", 0.5" : "");
    s += buf;
  }
  return s + "]";
}

std::string poly_json(const Poly& p, bool with_z) {
  std::string s = "[";
  for (size_t i = 0; i < p.size(); ++i) s += (i ? ", " : "") + ring_json(p[i], with_z);
  return s + "]";
}

std::string geojson_of(const std::vector<TestFeature>& fs) {
  std::string s = "{\"type\": \"FeatureCollection\", \"features\": [\n";
  for (size_t i = 0; i < fs.size(); ++i) {
    const TestFeature& f = fs[i];
    std::string g = "null";
    if (f.type == "Polygon") {
      g = "{\"type\": \"Polygon\", \"coordinates\": " + poly_json(f.polys.at(0), f.with_z) + "}";
    } else if (f.type == "MultiPolygon") {
      g = "{\"type\": \"MultiPolygon\", \"coordinates\": [";
      for (size_t p = 0; p < f.polys.size(); ++p)
        g += (p ? ", " : "") + poly_json(f.polys[p], f.with_z);
      g += "]}";
    }
    s += std::string(i ? ",\n" : "") + "{\"type\": \"Feature\", " + f.members +
         (f.members.empty() ? "" : ", ") + "\"geometry\": " + g + "}";
  }
  return s + "\n]}\n";
}

Ring box(float x0, float y0, float x1, float y1, bool clockwise = false, bool closed = true) {
  Ring r = {{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}};
  if (clockwise) std::reverse(r.begin(), r.end());
  if (closed) r.push_back(r.front());
  return r;
}

// Polygon with a hole, overlapping and disjoint MultiPolygons, a null
// geometry, a concave clockwise ring with z values, and a square sharing an
// edge with the first: every case the counts and pairs must get right.
std::vector<TestFeature> test_features() {
  std::vector<TestFeature> fs;
  fs.push_back({"\"id\": \"hole\", \"properties\": {\"name\": \"not this\"}",
                "Polygon",
                {{box(-8, -8, 0, 0), box(-6, -6, -2, -2, true)}},
                "hole"});
  fs.push_back({"\"properties\": {\"name\": \"over, \\\"lap\\\"\"}",
                "MultiPolygon",
                {{{{0, 0}, {9, 0}, {0, 9}}}, {box(2, 2, 8, 8)}},
                "\"over, \"\"lap\"\"\""});
  fs.push_back({"\"properties\": {\"id\": 42, \"name\": \"no\"}",
                "MultiPolygon",
                {{box(-9, 3, -5, 9, false, false)},
                 {{{-4, 3}, {0, 3}, {0, 9}, {-1, 9}, {-1, 4}, {-4, 4}, {-4, 3}}}},
                "42"});
  fs.push_back({"\"properties\": {\"name\": \"nowhere\"}", "", {}, "nowhere"});
  TestFeature star{"",
                   "Polygon",
                   {{{{5, -9},
                      {6.5f, -6},
                      {9.5f, -5.5f},
                      {7, -3},
                      {8, 0.5f},
                      {5, -1.5f},
                      {2, 0.5f},
                      {3, -3},
                      {0.5f, -5.5f},
                      {3.5f, -6}}}},
                   ""};
  std::reverse(star.polys[0][0].begin(), star.polys[0][0].end());
  star.with_z = true;
  fs.push_back(star);
  fs.push_back({"\"properties\": {}", "Polygon", {{box(0, -8, 8, 0)}}, ""});
  return fs;
}

struct PipAnswer {
  std::vector<int64_t> counts;                     // per feature
  std::vector<std::pair<int64_t, int64_t>> pairs;  // (point, feature), by feature then point
  std::vector<int64_t> part_sums;                  // per feature: sum over its polygons
};

// The library's answer: every polygon through knn_points_in_polygons, each
// feature the union of its polygons' points.
PipAnswer library_pip(const std::vector<float>& xy, const std::vector<TestFeature>& fs) {
  std::vector<float> v;
  std::vector<int64_t> rings{0}, polys{0}, feature_of;
  for (size_t f = 0; f < fs.size(); ++f)
    for (const Poly& p : fs[f].polys) {
      for (const Ring& r : p) {
        for (const auto& xyv : r) {
          v.push_back(xyv.first);
          v.push_back(xyv.second);
        }
        rings.push_back(static_cast<int64_t>(v.size() / 2));
      }
      polys.push_back(static_cast<int64_t>(rings.size()) - 1);
      feature_of.push_back(static_cast<int64_t>(f));
    }
  const int64_t P = static_cast<int64_t>(feature_of.size()),
                R = static_cast<int64_t>(rings.size()) - 1;
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  knn_quadtree* tree = nullptr;
  EXPECT_EQ(knn_quadtree_build(xy.data(), static_cast<int64_t>(xy.size() / 2), &opt, &tree), KNN_OK)
      << knn_last_error();
  std::vector<int64_t> counts(static_cast<size_t>(P)), offsets{0};
  EXPECT_EQ(knn_points_in_polygons_count(tree, v.data(), rings.data(), R, polys.data(), P,
                                         counts.data(), &opt),
            KNN_OK)
      << knn_last_error();
  for (int64_t c : counts) offsets.push_back(offsets.back() + c);
  std::vector<int64_t> pts(static_cast<size_t>(offsets.back()));
  EXPECT_EQ(knn_points_in_polygons(tree, v.data(), rings.data(), R, polys.data(), P, offsets.data(),
                                   pts.data(), &opt),
            KNN_OK)
      << knn_last_error();
  knn_quadtree_free(tree);
  std::vector<std::vector<int64_t>> sets(fs.size());
  PipAnswer a;
  a.part_sums.assign(fs.size(), 0);
  for (int64_t p = 0; p < P; ++p) {
    std::vector<int64_t>& s = sets[feature_of[p]];
    s.insert(s.end(), pts.begin() + offsets[p], pts.begin() + offsets[p + 1]);
    a.part_sums[feature_of[p]] += counts[p];
  }
  for (size_t f = 0; f < fs.size(); ++f) {
    std::sort(sets[f].begin(), sets[f].end());
    sets[f].erase(std::unique(sets[f].begin(), sets[f].end()), sets[f].end());
    a.counts.push_back(static_cast<int64_t>(sets[f].size()));
    for (int64_t i : sets[f]) a.pairs.emplace_back(i, static_cast<int64_t>(f));
  }
  return a;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::vector<std::string> expected_counts_csv(const std::vector<TestFeature>& fs,
                                             const PipAnswer& a) {
  std::vector<std::string> out{"feature,id,count"};
  for (size_t f = 0; f < fs.size(); ++f)
    out.push_back(std::to_string(f) + "," + fs[f].csv_id + "," + std::to_string(a.counts[f]));
  return out;
}

std::vector<std::string> expected_pairs_csv(const PipAnswer& a) {
  std::vector<std::string> out{"point,feature"};
  for (const auto& p : a.pairs)
    out.push_back(std::to_string(p.first) + "," + std::to_string(p.second));
  return out;
}

// Random points and every integer grid point of [-9, 9]^2, which lie on the
// polygons' edges and vertices (the boundary rule decides them).
std::vector<float> pip_points() {
  std::vector<float> xyz = random_points(400, 21);
  for (int x = -9; x <= 9; ++x)
    for (int y = -9; y <= 9; ++y)
      for (float c : {static_cast<float>(x), static_cast<float>(y), 0.25f}) xyz.push_back(c);
  return xyz;
}

std::vector<float> xy_of(const std::vector<float>& xyz) {
  std::vector<float> xy;
  for (size_t i = 0; i + 2 < xyz.size(); i += 3) {
    xy.push_back(xyz[i]);
    xy.push_back(xyz[i + 1]);
  }
  return xy;
}

TEST(Cli, PipEveryInputFormatMatchesTheLibrary) {
  if (!KNN_CLI_HAVE_JSON) GTEST_SKIP() << "pip needs nlohmann-json (GeoJSON)";
  const std::vector<TestFeature> fs = test_features();
  write_bytes(path_of("regions.geojson"), geojson_of(fs));
  const std::vector<float> xyz = pip_points();
  const std::vector<float> xy = xy_of(xyz);
  const PipAnswer want = library_pip(xy, fs);
  // The test data exercises what it is meant to: a hole that holds points,
  // overlapping parts that share points (counted once), an empty feature.
  ASSERT_LT(want.counts[1], want.part_sums[1]);
  ASSERT_EQ(want.counts[2], want.part_sums[2]);
  ASSERT_GT(want.counts[0], 0);
  ASSERT_EQ(want.counts[3], 0);
  ASSERT_GT(want.counts[4], 0);
  const std::vector<std::string> want_counts = expected_counts_csv(fs, want);
  const std::vector<std::string> want_pairs = expected_pairs_csv(want);
  const std::string polys = " --polygons '" + path_of("regions.geojson") + "'";

  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    const std::string pp = path_of(std::string("pip_") + f.name);
    f.write(pp, xyz);
    const RunResult r =
        run_cli("pip --precision float32 --points '" + pp + "'" + polys + " --out '" +
                path_of("pc.csv") + "' --pairs '" + path_of("pp.csv") + "' --backend openmp");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(lines_of(slurp(path_of("pc.csv"))), want_counts);
    EXPECT_EQ(lines_of(slurp(path_of("pp.csv"))), want_pairs);
  }
  // x y files: two text columns, a (n, 2) .npy, a PLY without z.
  write_table(path_of("pip2.csv"), xy, 2, ",");
  write_npy_table(path_of("pip2.npy"), xy, 2);
  {
    std::string ply = "ply\nformat ascii 1.0\nelement vertex " + std::to_string(xy.size() / 2) +
                      "\nproperty float x\nproperty float y\nend_header\n";
    char line[64];
    for (size_t i = 0; i < xy.size(); i += 2) {
      std::snprintf(line, sizeof line, "%.9g %.9g\n", xy[i], xy[i + 1]);
      ply += line;
    }
    write_bytes(path_of("pip2.ply"), ply);
  }
  for (const char* name : {"pip2.csv", "pip2.npy", "pip2.ply"}) {
    SCOPED_TRACE(name);
    const RunResult r = run_cli("pip --precision float32 --points '" + path_of(name) + "'" + polys +
                                " --out '" + path_of("pc2.csv") + "'");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(lines_of(slurp(path_of("pc2.csv"))), want_counts);
  }
  // Pairs as .npy: int64 (p, 2), rows (point, feature); the auto backend.
  const RunResult r =
      run_cli("pip --precision float32 --points '" + path_of("pip_pts.xyz") + "'" + polys +
              " --out '" + path_of("pc3.csv") + "' --pairs '" + path_of("pp.npy") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(lines_of(slurp(path_of("pc3.csv"))), want_counts);
  const std::vector<int64_t> got =
      read_npy<int64_t>(path_of("pp.npy"), "<i8", static_cast<int64_t>(want.pairs.size()), 2);
  ASSERT_EQ(got.size(), 2 * want.pairs.size());
  for (size_t i = 0; i < want.pairs.size(); ++i) {
    ASSERT_EQ(got[2 * i], want.pairs[i].first) << "pair " << i;
    ASSERT_EQ(got[2 * i + 1], want.pairs[i].second) << "pair " << i;
  }
}

TEST(Cli, PipIdsAndGeoJsonShapes) {
  if (!KNN_CLI_HAVE_JSON) GTEST_SKIP() << "pip needs nlohmann-json (GeoJSON)";
  write_bytes(path_of("pid.xyz"), "0.5 0.5 0\n5 5 0\n0.25 0.75 1\n");
  // --id-property picks the property; a bare Polygon is one feature without id.
  write_bytes(
      path_of("pid.geojson"),
      "{\"type\": \"FeatureCollection\", \"features\": ["
      "{\"type\": \"Feature\", \"id\": 7, \"properties\": {\"code\": \"A1\", \"name\": \"n\"},"
      " \"geometry\": {\"type\": \"Polygon\", \"coordinates\": [[[0,0],[1,0],[1,1],[0,1]]]}},"
      "{\"type\": \"Feature\", \"properties\": null, \"geometry\": {\"type\": \"MultiPolygon\","
      " \"coordinates\": []}}]}");
  RunResult r = run_cli("pip --points '" + path_of("pid.xyz") + "' --polygons '" +
                        path_of("pid.geojson") + "' --out '" + path_of("pid.csv") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(lines_of(slurp(path_of("pid.csv"))),
            (std::vector<std::string>{"feature,id,count", "0,7,2", "1,,0"}));
  r = run_cli("pip --points '" + path_of("pid.xyz") + "' --polygons '" + path_of("pid.geojson") +
              "' --out '" + path_of("pid.csv") + "' --id-property code");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(lines_of(slurp(path_of("pid.csv"))),
            (std::vector<std::string>{"feature,id,count", "0,A1,2", "1,,0"}));
  write_bytes(path_of("bare.geojson"),
              "{\"type\": \"Polygon\", \"coordinates\": [[[0,0],[10,0],[10,10],[0,10],[0,0]]]}");
  r = run_cli("pip --points '" + path_of("pid.xyz") + "' --polygons '" + path_of("bare.geojson") +
              "' --out '" + path_of("bare.csv") + "' --pairs '" + path_of("bare_pairs.csv") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(lines_of(slurp(path_of("bare.csv"))),
            (std::vector<std::string>{"feature,id,count", "0,,3"}));
  EXPECT_EQ(lines_of(slurp(path_of("bare_pairs.csv"))),
            (std::vector<std::string>{"point,feature", "0,0", "1,0", "2,0"}));
}

TEST(Cli, PipMalformedInputsFailCleanly) {
  if (!KNN_CLI_HAVE_JSON) GTEST_SKIP() << "pip needs nlohmann-json (GeoJSON)";
  write_bytes(path_of("pm.xyz"), "0.5 0.5 0\n2 2 0\n");
  auto fc = [](const std::string& geometry) {
    return "{\"type\": \"FeatureCollection\", \"features\": [{\"type\": \"Feature\", "
           "\"properties\": {},"
           " \"geometry\": {\"type\": \"Polygon\", \"coordinates\": "
           "[[[0,0],[4,0],[4,4],[0,4]]]}},\n"
           "{\"type\": \"Feature\", \"id\": \"bad\", \"geometry\": " +
           geometry + "}]}";
  };
  struct Case {
    std::string name, bytes, expect;
  };
  const Case cases[] = {
      {"ring2.geojson", fc("{\"type\": \"Polygon\", \"coordinates\": [[[0,0],[1,1]]]}"),
       "feature 1 (id 'bad'): ring 0 (outer) has 2 positions"},
      {"ring_closed.geojson", fc("{\"type\": \"Polygon\", \"coordinates\": [[[0,0],[1,1],[0,0]]]}"),
       "2 distinct"},
      {"hole2.geojson",
       fc("{\"type\": \"Polygon\", \"coordinates\": [[[0,0],[3,0],[3,3]], [[1,1],[2,1]]]}"),
       "ring 1 (hole 1) has 2 positions"},
      {"multi2.geojson",
       fc("{\"type\": \"MultiPolygon\", \"coordinates\": [[[[0,0],[3,0],[3,3]]], "
          "[[[1,1],[2,1],[1,1]]]]}"),
       "polygon 1 ring 0 (outer)"},
      {"trunc.geojson", fc("null").substr(0, 60), "malformed JSON"},
      // 100,000 nested arrays as an id: the JSON library's recursion used to
      // overflow the stack (exit 139); refused before parsing, with the place.
      {"deep_id.geojson",
       "{\"type\": \"FeatureCollection\", \"features\": [{\"type\": \"Feature\",\n \"id\": " +
           std::string(100000, '[') + std::string(100000, ']') + ", \"geometry\": null}]}",
       "line 2, column 133: JSON nested deeper than 128 levels"},
      // An unterminated string of 1 MB: the parser's message ends with the
      // token it read, which must not come whole into ours.
      {"long_string.geojson", "{\"type\": \"Feature\", \"id\": \"" + std::string(1 << 20, 'a'),
       "more bytes)"},
      // Brackets inside strings do not count.
      {"brackets_in_string.geojson",
       fc("null").substr(0, fc("null").size() - 3) + ", \"properties\": {\"name\": \"" +
           std::string(500, '[') + "\"}, \"x\": [1}]}",
       "malformed JSON"},
      {"empty.geojson", "", "malformed JSON"},
      {"nan.geojson", fc("{\"type\": \"Polygon\", \"coordinates\": [[[0,NaN],[1,0],[1,1]]]}"),
       "malformed JSON: parse error at line 2"},
      {"huge.geojson", fc("{\"type\": \"Polygon\", \"coordinates\": [[[0,1e39],[1,0],[1,1]]]}"),
       "position 0: coordinate 1 (1e+39) is not a finite float32"},
      {"overflow.geojson",
       fc("{\"type\": \"Polygon\", \"coordinates\": [[[0,1e400],[1,0],[1,1]]]}"), "1e400"},
      {"line.geojson", fc("{\"type\": \"LineString\", \"coordinates\": [[0,0],[1,1]]}"),
       "geometry type 'LineString' is not supported"},
      {"gc.geojson", fc("{\"type\": \"GeometryCollection\", \"geometries\": []}"),
       "'GeometryCollection' is not supported"},
      {"point.geojson", "{\"type\": \"Point\", \"coordinates\": [0, 0]}",
       "type 'Point' is not supported"},
      {"array.geojson", "[1, 2]", "not a GeoJSON object"},
      {"nofeatures.geojson", "{\"type\": \"FeatureCollection\", \"features\": {}}",
       "\"features\" array"},
      {"nogeom.geojson",
       "{\"type\": \"FeatureCollection\", \"features\": [{\"type\": \"Feature\"}]}",
       "feature 0 has no \"geometry\""},
      {"notfeature.geojson",
       "{\"type\": \"FeatureCollection\", \"features\": [{\"type\": \"Polygon\", \"coordinates\": "
       "[]}]}",
       "feature 0 is not a Feature"},
      {"pos1.geojson", fc("{\"type\": \"Polygon\", \"coordinates\": [[[0],[1,0],[1,1]]]}"),
       "position 0 is not a position"},
      {"str.geojson", fc("{\"type\": \"Polygon\", \"coordinates\": [[[\"a\",0],[1,0],[1,1]]]}"),
       "coordinate 0 is a string, not a number"},
      {"nocoords.geojson", fc("{\"type\": \"Polygon\"}"), "no \"coordinates\""},
      {"deep.geojson", std::string(200000, '['), "line 1, column 129: JSON nested deeper than 128"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    write_bytes(path_of(c.name), c.bytes);
    const RunResult r =
        run_cli("pip --precision float32 --points '" + path_of("pm.xyz") + "' --polygons '" +
                path_of(c.name) + "' --out '" + path_of("pm_out.csv") + "'");
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_NE(r.err.find(c.name + ": "), std::string::npos) << r.err;  // names the file
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err.substr(0, 400);
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err.substr(0, 400);
    EXPECT_LT(r.err.size(), 500u) << "a short message: " << r.err.substr(0, 400);
  }
  // Points and arguments.
  write_bytes(path_of("ok.geojson"), fc("null"));
  write_bytes(path_of("pm_nan.csv"), "x,y\n0,0\n1,nan\n");
  write_bytes(path_of("pm_4.csv"), "0\n");
  const std::string ok = " --polygons '" + path_of("ok.geojson") + "'";
  const Case arg_cases[] = {
      {"--points '" + path_of("pm_nan.csv") + "'" + ok + " --out '" + path_of("a.csv") + "'", "",
       "pm_nan.csv: line 3, column 2 ('nan', point 1)"},
      {"--points '" + path_of("pm_4.csv") + "'" + ok + " --out '" + path_of("a.csv") + "'", "",
       "line 1: expected 2 or 3 columns (x y [z]), found 1"},
      {"--points '" + path_of("pm.xyz") + "' --polygons '" + path_of("nosuch.geojson") +
           "' --out '" + path_of("a.csv") + "'",
       "", "nosuch.geojson: cannot open"},
      {"--points '" + path_of("pm.xyz") + "'" + ok + " --out '" + path_of("a.npy") + "'", "",
       "--out must end in .csv"},
      {"--points '" + path_of("pm.xyz") + "'" + ok + " --out '" + path_of("a.csv") + "' --pairs '" +
           path_of("a.txt") + "'",
       "", ".npy or .csv"},
  };
  for (const Case& c : arg_cases) {
    SCOPED_TRACE(c.name);
    const RunResult r = run_cli("pip " + c.name);
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  }
  // A missing required option is a command-line error.
  const RunResult r = run_cli("pip --points '" + path_of("pm.xyz") + "'" + ok);
  EXPECT_NE(r.rc, 0);
  EXPECT_LT(r.rc, 1000);
}

TEST(Cli, PipCudaBackendWithoutDeviceFailsCleanly) {
  if (!KNN_CLI_HAVE_JSON) GTEST_SKIP() << "pip needs nlohmann-json (GeoJSON)";
  if (cuGetDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  write_bytes(path_of("pcu.xyz"), "0.5 0.5 0\n");
  write_bytes(path_of("pcu.geojson"),
              "{\"type\": \"Polygon\", \"coordinates\": [[[0,0],[1,0],[1,1]]]}");
  const RunResult r =
      run_cli("pip --points '" + path_of("pcu.xyz") + "' --polygons '" + path_of("pcu.geojson") +
              "' --out '" + path_of("pcu.csv") + "' --backend cuda");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("KNN_ERR_NO_DEVICE"), std::string::npos) << r.err;
}

// ---- bench ---------------------------------------------------------------------------
#if KNN_CLI_HAVE_JSON
// The classic suite at two tiny sizes: a valid JSON document with one timed
// build and one timed query per backend this machine has, medians within
// the runs, and item rates that follow from them.
TEST(CliBench, ClassicSuiteWritesValidJson) {
  const std::string out = path_of("bench_classic.json");
  const RunResult r =
      run_cli("bench classic --sizes 300,1001 --repeats 3 --warmup 1 --k 5 --out '" + out + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(slurp(out));  // throws (fails) if invalid
  EXPECT_EQ(doc.at("schema"), "knn-gpgpu-bench/1");
  EXPECT_EQ(doc.at("suite"), "classic");
  EXPECT_EQ(doc.at("repeats"), 3);
  EXPECT_EQ(doc.at("cuda_devices"), cuGetDeviceCount());
  const nlohmann::json& results = doc.at("results");
  const size_t backends = cuGetDeviceCount() > 0 ? 3 : 2;  // openmp, [cuda,] auto
  ASSERT_EQ(results.size(), 2 * 2 * backends) << results.dump(1);
  for (const nlohmann::json& rec : results) {
    SCOPED_TRACE(rec.dump());
    EXPECT_EQ(rec.at("status"), "KNN_OK");
    EXPECT_EQ(rec.at("structure"), "kdtree");
    const int64_t n = rec.at("n");
    EXPECT_TRUE(n == 300 || n == 1001);
    EXPECT_EQ(rec.at("m"), rec.at("operation") == "query" ? n : 0);
    const std::vector<double> s = rec.at("seconds");
    ASSERT_EQ(s.size(), 3u);
    const double median = rec.at("median_s");
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
    EXPECT_EQ(median, s[1]);
    EXPECT_EQ(rec.at("min_s").get<double>(), s.front());
    EXPECT_GT(median, 0.0);
    EXPECT_NEAR(rec.at("items_per_second").get<double>(), n / median, 1e-6 * n / median);
  }
}

// The index and pip suites: a document with every measurement, each timed
// or failed with a message (NO_DEVICE only for cuda).
TEST(CliBench, IndexAndPipSuitesWriteEveryMeasurement) {
  for (const char* suite : {"index", "pip"}) {
    SCOPED_TRACE(suite);
    const RunResult r = run_cli(std::string("bench ") + suite + " --sizes 500 --repeats 1");
    ASSERT_EQ(r.rc, 0) << r.err;
    const nlohmann::json doc = nlohmann::json::parse(r.out);
    ASSERT_FALSE(doc.at("results").empty());
    size_t timed = 0;
    for (const nlohmann::json& rec : doc.at("results")) {
      const std::string status = rec.at("status");
      if (status == "KNN_OK") {
        EXPECT_GT(rec.at("median_s").get<double>(), 0.0) << rec.dump();
        ++timed;
      } else {
        EXPECT_TRUE(status == "KNN_ERR_NO_DEVICE" && rec.at("backend") == "cuda") << rec.dump();
        EXPECT_FALSE(rec.at("error").get<std::string>().empty()) << rec.dump();
      }
    }
    // Every structure (index) or the quadtree (pip) is timed on the CPU: a
    // build and a query each, and a radius search for each index structure.
    EXPECT_GE(timed, std::string(suite) == "pip" ? 2u : 9u) << doc.dump(1);
    if (std::string(suite) == "index") {
      size_t radius_records = 0;
      for (const nlohmann::json& rec : doc.at("results"))
        if (rec.at("operation") == "radius" && rec.at("backend") == "openmp") {
          ++radius_records;
          EXPECT_EQ(rec.at("status"), "KNN_OK") << rec.dump();
          EXPECT_GT(rec.at("radius").get<double>(), 0.0) << rec.dump();
        }
      EXPECT_EQ(radius_records, 3u);
    }
  }
}

// The pip suite times star polygons (never a grid of squares that coincides
// with quadtree cells) and, with --polygons, a GeoJSON file's polygons too;
// each record names its polygon set and size.
TEST(CliBench, PipSuiteNamesItsPolygonSets) {
  const std::string geojson = path_of("bench_two_triangles.geojson");
  write_bytes(geojson,
              R"({"type":"FeatureCollection","features":[)"
              R"({"type":"Feature","properties":{"name":"a"},"geometry":{"type":"Polygon",)"
              R"("coordinates":[[[10,10],[30,12],[15,40],[10,10]]]}},)"
              R"({"type":"Feature","properties":{"name":"b"},"geometry":{"type":"MultiPolygon",)"
              R"("coordinates":[[[[40,0],[50,5],[45,20]]],[[[0,30],[5,35],[1,38]]]]}}]})");
  const RunResult r = run_cli("bench pip --sizes 400 --repeats 1 --polygons '" + geojson + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  std::map<std::string, int64_t> polygons_of;  // set -> m of its pip_count records
  for (const nlohmann::json& rec : doc.at("results")) {
    ASSERT_TRUE(rec.contains("polygons")) << rec.dump();
    if (rec.at("operation") == "pip_count" && rec.at("status") == "KNN_OK")
      polygons_of[rec.at("polygons")] = rec.at("m").get<int64_t>();
  }
  EXPECT_EQ(polygons_of["stars"], 256);
  EXPECT_EQ(polygons_of["bench_two_triangles"], 3);  // one Polygon + a MultiPolygon of two
  EXPECT_NE(run_cli("bench pip --sizes 10 --polygons '" + path_of("missing.geojson") + "'").rc, 0);
}

TEST(CliBench, BadArgumentsAreRefused) {
  EXPECT_NE(run_cli("bench nosuch").rc, 0);
  EXPECT_NE(run_cli("bench classic --repeats 0").rc, 0);
  const RunResult r = run_cli("bench classic --sizes 0");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("--sizes"), std::string::npos) << r.err;
}
#endif

// ---- float64: files that hold doubles are computed in double --------------------------
namespace {

// A 10 m cube at 4.5e6 (a UTM northing): float32 cannot hold its millimetres.
std::vector<double> utm_points(int n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 10.0);
  std::vector<double> xyz(static_cast<size_t>(n) * 3);
  for (auto& v : xyz) v = 4.5e6 + u(rng);
  return xyz;
}

// The contract's squared distance in float64, ((dx*dx + dy*dy) + dz*dz), each
// operation rounded (this file is compiled with -ffp-contract=off): the
// independent oracle of the float64 paths.
double sq_distance64(const double* q, const double* p) {
  const double dx = q[0] - p[0], dy = q[1] - p[1], dz = q[2] - p[2];
  const double xx = dx * dx, yy = dy * dy, zz = dz * dz;
  return (xx + yy) + zz;
}

// Every reference point of each query by (distance, index).
std::vector<std::vector<std::pair<double, int>>> brute_force64(const std::vector<double>& ref,
                                                               const std::vector<double>& query) {
  std::vector<std::vector<std::pair<double, int>>> rows(query.size() / 3);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < ref.size() / 3; ++j)
      rows[i].emplace_back(sq_distance64(&query[3 * i], &ref[3 * j]), static_cast<int>(j));
    std::sort(rows[i].begin(), rows[i].end());
  }
  return rows;
}

bool same_bits64(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void write_text64(const std::string& path, const std::vector<double>& xyz) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  for (size_t i = 0; i < xyz.size(); i += 3)
    std::fprintf(f, "%.17g %.17g %.17g\n", xyz[i], xyz[i + 1], xyz[i + 2]);
  std::fclose(f);
}

void write_npy64(const std::string& path, const std::vector<double>& xyz) {
  std::string body;
  for (double v : xyz) append_le<double>(&body, v);
  write_bytes(path, npy_bytes("<f8", "(" + std::to_string(xyz.size() / 3) + ", 3)", body));
}

void write_ply64(const std::string& path, const std::vector<double>& xyz) {
  std::string s = "ply\nformat binary_little_endian 1.0\nelement vertex " +
                  std::to_string(xyz.size() / 3) +
                  "\nproperty double x\nproperty double y\nproperty double z\nend_header\n";
  for (double v : xyz) append_le<double>(&s, v);
  write_bytes(path, s);
}

void write_ply64_ascii(const std::string& path, const std::vector<double>& xyz) {
  std::string s = "ply\nformat ascii 1.0\nelement vertex " + std::to_string(xyz.size() / 3) +
                  "\nproperty double x\nproperty double y\nproperty double z\nend_header\n";
  char line[96];
  for (size_t i = 0; i < xyz.size(); i += 3) {
    std::snprintf(line, sizeof line, "%.17g %.17g %.17g\n", xyz[i], xyz[i + 1], xyz[i + 2]);
    s += line;
  }
  write_bytes(path, s);
}

struct Format64 {
  const char* name;
  void (*write)(const std::string&, const std::vector<double>&);
};

const Format64 kFormats64[] = {
    {"u.xyz", write_text64},
    {"u.npy", write_npy64},
    {"u_bin.ply", write_ply64},
    {"u_ascii.ply", write_ply64_ascii},
};

}  // namespace

TEST(Cli, DoubleFilesComputeInDouble) {
  const std::vector<double> ref = utm_points(300, 21), query = utm_points(40, 22);
  const int k = 6;
  const auto want = brute_force64(ref, query);
  // The data needs float64: rounded to float32 the answer changes.
  {
    std::vector<double> ref32(ref.begin(), ref.end()), query32(query.begin(), query.end());
    for (auto& v : ref32) v = static_cast<float>(v);
    for (auto& v : query32) v = static_cast<float>(v);
    const auto rounded = brute_force64(ref32, query32);
    bool differs = false;
    for (size_t i = 0; i < want.size(); ++i)
      for (int j = 0; j < k; ++j) differs |= rounded[i][j].second != want[i][j].second;
    ASSERT_TRUE(differs);
  }
  for (const Format64& f : kFormats64) {
    SCOPED_TRACE(f.name);
    const std::string rp = path_of(std::string("ref_") + f.name);
    const std::string qp = path_of(std::string("query_") + f.name);
    f.write(rp, ref);
    f.write(qp, query);
    const std::string out = path_of("out64.npy");
    for (const char* backend : {"openmp", "auto"}) {
      const RunResult r = run_cli("knn --ref '" + rp + "' --query '" + qp + "' --k 6 --out '" +
                                  out + "' --distances --backend " + backend);
      ASSERT_EQ(r.rc, 0) << r.err;
      EXPECT_EQ(r.err, "");
      const std::vector<int32_t> got = read_npy<int32_t>(out, "<i4", 40, k);
      const std::vector<double> d = read_npy<double>(path_of("out64_dist.npy"), "<f8", 40, k);
      ASSERT_EQ(got.size(), static_cast<size_t>(40 * k));
      ASSERT_EQ(d.size(), got.size());
      for (size_t i = 0; i < 40; ++i)
        for (int j = 0; j < k; ++j) {
          ASSERT_EQ(got[i * k + j], want[i][j].second) << "query " << i << " rank " << j;
          ASSERT_TRUE(same_bits64(d[i * k + j], want[i][j].first)) << "query " << i;
        }
    }
  }
  // CSV: 17 significant digits read back to the same doubles.
  const RunResult r =
      run_cli("knn --ref '" + path_of("ref_u.xyz") + "' --query '" + path_of("query_u.xyz") +
              "' --k 6 --distances --out '" + path_of("out64.csv") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const Csv c = read_csv(path_of("out64.csv"));
  ASSERT_EQ(c.rows.size(), 40u);
  for (size_t i = 0; i < 40; ++i)
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(std::stoi(c.rows[i][j]), want[i][j].second);
      EXPECT_TRUE(same_bits64(std::strtod(c.rows[i][k + j].c_str(), nullptr), want[i][j].first))
          << c.rows[i][k + j];
    }
  // --self --exclude-self in double.
  const RunResult s = run_cli("knn --ref '" + path_of("ref_u.npy") + "' --self --exclude-self " +
                              "--k 3 --distances --out '" + path_of("self64.npy") + "'");
  ASSERT_EQ(s.rc, 0) << s.err;
  const auto self_want = brute_force64(ref, ref);
  const std::vector<int32_t> self_got = read_npy<int32_t>(path_of("self64.npy"), "<i4", 300, 3);
  const std::vector<double> self_d = read_npy<double>(path_of("self64_dist.npy"), "<f8", 300, 3);
  ASSERT_EQ(self_got.size(), 900u);
  ASSERT_EQ(self_d.size(), 900u);
  for (size_t i = 0; i < 300; ++i) {
    ASSERT_EQ(self_want[i][0].second, static_cast<int>(i));  // no duplicates: itself first
    for (int j = 0; j < 3; ++j) {
      ASSERT_EQ(self_got[i * 3 + j], self_want[i][j + 1].second) << "point " << i;
      ASSERT_TRUE(same_bits64(self_d[i * 3 + j], self_want[i][j + 1].first));
    }
  }
}

TEST(Cli, PrecisionOptionChoosesTheCalls) {
  const std::vector<double> ref = utm_points(50, 23);
  write_text64(path_of("p.xyz"), ref);
  const std::string base = "knn --ref '" + path_of("p.xyz") + "' --self --k 2 --distances --out '";
  // float32: the classic API, float32 distances of the rounded points.
  RunResult r = run_cli(base + path_of("p32.npy") + "' --precision float32");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(read_npy<float>(path_of("p32_dist.npy"), "<f4", 50, 2).size(), 100u);
  // float64 on a float32 file: widened exactly, computed in double.
  std::vector<float> f32(ref.begin(), ref.end());
  write_raw(path_of("p.bin"), f32);
  r = run_cli("knn --ref '" + path_of("p.bin") + "' --self --k 2 --distances --out '" +
              path_of("pb.npy") + "' --precision float64");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::vector<double> widened(f32.begin(), f32.end());
  const auto want = brute_force64(widened, widened);
  const std::vector<double> d = read_npy<double>(path_of("pb_dist.npy"), "<f8", 50, 2);
  ASSERT_EQ(d.size(), 100u);
  for (size_t i = 0; i < 50; ++i) EXPECT_TRUE(same_bits64(d[i * 2 + 1], want[i][1].first));
  // auto on a float32 file stays float32.
  r = run_cli("knn --ref '" + path_of("p.bin") + "' --self --k 2 --distances --out '" +
              path_of("pa.npy") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(read_npy<float>(path_of("pa_dist.npy"), "<f4", 50, 2).size(), 100u);
  // A value beyond float32's range is a coordinate in float64, refused in float32.
  write_bytes(path_of("big.xyz"), "1 2 1e39\n0 0 0\n");
  r = run_cli("knn --ref '" + path_of("big.xyz") + "' --self --k 1 --out '" + path_of("b.npy") +
              "'");
  EXPECT_EQ(r.rc, 0) << r.err;
  r = run_cli("knn --ref '" + path_of("big.xyz") + "' --self --k 1 --out '" + path_of("b.npy") +
              "' --precision float32");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("line 1, column 3 ('1e39', point 0) is not a finite float32"),
            std::string::npos)
      << r.err;
  write_bytes(path_of("huge64.xyz"), "1 2 1e400\n");
  r = run_cli("knn --ref '" + path_of("huge64.xyz") + "' --self --k 1 --out '" + path_of("b.npy") +
              "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("line 1, column 3 ('1e400', point 0) is not a finite float64"),
            std::string::npos)
      << r.err;
  r = run_cli("knn --ref '" + path_of("p.xyz") + "' --self --k 1 --out '" + path_of("b.npy") +
              "' --precision double");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("--precision"), std::string::npos) << r.err;
}

TEST(Cli, RadiusInDouble) {
  const std::vector<double> ref = utm_points(300, 24), query = utm_points(30, 25);
  const double radius = 1.7;
  const int M = 8;
  const auto all = brute_force64(ref, query);
  write_npy64(path_of("rr64.npy"), ref);
  write_text64(path_of("rq64.xyz"), query);
  const RunResult r =
      run_cli("radius --ref '" + path_of("rr64.npy") + "' --query '" + path_of("rq64.xyz") +
              "' --radius 1.7 --max-neighbors 8 --allow-truncation" + radius_npy_outputs("r64") +
              " --backend openmp");
  ASSERT_EQ(r.rc, 0) << r.err;
  // radius_npy_outputs writes stem_d.npy; in double it holds float64.
  const std::vector<int32_t> idx = read_npy<int32_t>(path_of("r64_idx.npy"), "<i4", 30, M);
  const std::vector<double> d = read_npy<double>(path_of("r64_d.npy"), "<f8", 30, M);
  ASSERT_EQ(idx.size(), static_cast<size_t>(30 * M));
  ASSERT_EQ(d.size(), idx.size());
  bool some_full = false, some_short = false;
  for (size_t i = 0; i < 30; ++i) {
    int count = 0;
    while (count < static_cast<int>(all[i].size()) && all[i][count].first <= radius * radius)
      ++count;
    some_full |= count > M;
    some_short |= count < M;
    for (int j = 0; j < M; ++j) {
      if (j < count) {
        ASSERT_EQ(idx[i * M + j], all[i][j].second) << "query " << i;
        ASSERT_TRUE(same_bits64(d[i * M + j], all[i][j].first));
      } else {
        ASSERT_EQ(idx[i * M + j], -1);
        ASSERT_TRUE(std::isinf(d[i * M + j]));
      }
    }
  }
  EXPECT_TRUE(some_full && some_short);
  // CSV distances with 17 digits.
  const RunResult c =
      run_cli("radius --ref '" + path_of("rr64.npy") + "' --query '" + path_of("rq64.xyz") +
              "' --radius 1.7 --max-neighbors 8 --allow-truncation --out '" + path_of("r64.csv") +
              "' --distances '" + path_of("r64d.csv") + "'");
  ASSERT_EQ(c.rc, 0) << c.err;
  const Csv cd = read_csv(path_of("r64d.csv"));
  ASSERT_EQ(cd.rows.size(), 30u);
  for (size_t i = 0; i < 30; ++i)
    for (int j = 0; j < M; ++j) {
      if (idx[i * M + j] >= 0) {
        EXPECT_TRUE(same_bits64(std::strtod(cd.rows[i].at(j).c_str(), nullptr), d[i * M + j]));
      }
    }
}

#if KNN_CLI_HAVE_JSON
// A border whose eastern edge leans slightly, and towns 4e-6 degrees inside
// and outside it: float32 (spacing 1.5e-5 at 129 degrees) cannot tell them
// apart, float64 can (4e-6 is far above double rounding at these values).
TEST(Cli, PipInDoubleKeepsTownsInside) {
  const double x1 = 129.0, y1 = -26.0, x2 = 129.0003, y2 = -14.9;
  write_bytes(path_of("border.geojson"),
              "{\"type\": \"FeatureCollection\", \"features\": [{\"type\": \"Feature\", "
              "\"id\": \"border\", \"properties\": {}, \"geometry\": {\"type\": \"Polygon\", "
              "\"coordinates\": [[[129.0, -26.0], [129.0003, -14.9], [120.0, -14.9], "
              "[120.0, -26.0]]]}}]}");
  std::FILE* f = std::fopen(path_of("towns.csv").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fprintf(f, "x,y\n");
  for (int side = 0; side < 2; ++side)
    for (int i = 0; i <= 40; ++i) {
      const double y = -25.5 + 0.25 * i;
      const double edge = x1 + (y - y1) * (x2 - x1) / (y2 - y1);
      std::fprintf(f, "%.17g,%.17g\n", side == 0 ? edge - 4e-6 : edge + 4e-6, y);
    }
  std::fclose(f);
  const std::string cmd = "pip --points '" + path_of("towns.csv") + "' --polygons '" +
                          path_of("border.geojson") + "' --out '" + path_of("towns_out.csv") +
                          "' --pairs '" + path_of("towns_pairs.csv") + "'";
  RunResult r = run_cli(cmd);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(lines_of(slurp(path_of("towns_out.csv"))),
            (std::vector<std::string>{"feature,id,count", "0,border,41"}));
  std::vector<std::string> pairs{"point,feature"};
  for (int i = 0; i <= 40; ++i) pairs.push_back(std::to_string(i) + ",0");
  EXPECT_EQ(lines_of(slurp(path_of("towns_pairs.csv"))), pairs);
  // Rounded to float32, towns cross the border.
  r = run_cli(cmd + " --precision float32");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(lines_of(slurp(path_of("towns_out.csv"))),
            (std::vector<std::string>{"feature,id,count", "0,border,41"}));
}
#endif

// ---- Issue 51 item 5: nothing cut or left unread in silence ------------------------------
namespace {

// A cloud in which every point has far more than 8 neighbours within 1, as
// radar.xyz (CGAL's demo data) has within 2: 600 points uniform in [0, 4)^3
// hold about 39 within 1 of each.
std::vector<float> dense_cloud() {
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> u(0.0f, 4.0f);
  std::vector<float> v(600 * 3);
  for (auto& x : v) x = u(rng);
  return v;
}

template <class T>
std::vector<T> read_npy_vector(const std::string& path, const char* descr, size_t n) {
  const std::string s = slurp(path);
  EXPECT_GE(s.size(), 10u) << path;
  if (s.size() < 10) return {};
  const size_t hl = static_cast<unsigned char>(s[8]) | (static_cast<unsigned char>(s[9]) << 8);
  const std::string h = s.substr(10, hl);
  EXPECT_NE(h.find(std::string("'descr': '") + descr + "'"), std::string::npos) << h;
  EXPECT_NE(h.find("'shape': (" + std::to_string(n) + ",)"), std::string::npos) << h;
  EXPECT_EQ(s.size(), 10 + hl + n * sizeof(T));
  std::vector<T> v(n);
  if (s.size() == 10 + hl + n * sizeof(T) && n)
    std::memcpy(v.data(), s.data() + 10 + hl, n * sizeof(T));
  return v;
}

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

// radius without --max-neighbors: every neighbour, CSR rows (.npy with
// offsets, CSV one line per neighbour), against rows from knn_brute_force;
// in float64 against a brute force of our own.
TEST(Cli, RadiusWithoutMaxNeighborsWritesEveryNeighbour) {
  const std::vector<float> cloud = dense_cloud();
  const int n = 600;
  const RadiusAnswer all = brute_force_radius(cloud, cloud, 3, 1.0f, n);
  ASSERT_GT(std::count_if(all.counts.begin(), all.counts.end(), [](int32_t c) { return c > 8; }),
            n / 2);
  std::vector<int64_t> want_off{0};
  std::vector<int32_t> want_idx;
  std::vector<float> want_d;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < all.counts[i]; ++j) {
      want_idx.push_back(all.idx[static_cast<size_t>(i) * n + j]);
      want_d.push_back(all.dist[static_cast<size_t>(i) * n + j]);
    }
    want_off.push_back(static_cast<int64_t>(want_idx.size()));
  }
  const size_t total = want_idx.size();
  write_text(path_of("dense.xyz"), cloud, " ", nullptr);
  const std::string ref = "radius --ref '" + path_of("dense.xyz") + "' --self --radius 1";
  RunResult r = run_cli(ref + " --precision float32 --out '" + path_of("csr_i.npy") +
                        "' --distances '" + path_of("csr_d.npy") + "' --offsets '" +
                        path_of("csr_o.npy") + "' --counts '" + path_of("csr_n.npy") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(read_npy_vector<int32_t>(path_of("csr_i.npy"), "<i4", total), want_idx);
  EXPECT_EQ(read_npy_vector<int64_t>(path_of("csr_o.npy"), "<i8", n + 1), want_off);
  EXPECT_EQ(read_npy_vector<int32_t>(path_of("csr_n.npy"), "<i4", n), all.counts);
  const std::vector<float> d = read_npy_vector<float>(path_of("csr_d.npy"), "<f4", total);
  ASSERT_EQ(d.size(), total);
  for (size_t i = 0; i < total; ++i) ASSERT_TRUE(same_bits(d[i], want_d[i])) << i;

  // CSV: one line per (query, neighbour), self-describing without offsets.
  r = run_cli(ref + " --precision float32 --out '" + path_of("csr.csv") + "' --distances '" +
              path_of("csr_d.csv") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const Csv ci = read_csv(path_of("csr.csv")), cd = read_csv(path_of("csr_d.csv"));
  EXPECT_EQ(ci.header, (std::vector<std::string>{"query", "index"}));
  EXPECT_EQ(cd.header, (std::vector<std::string>{"query", "index", "d"}));
  ASSERT_EQ(ci.rows.size(), total);
  ASSERT_EQ(cd.rows.size(), total);
  for (int i = 0; i < n; ++i)
    for (int64_t j = want_off[i]; j < want_off[i + 1]; ++j) {
      ASSERT_EQ(ci.rows[j],
                (std::vector<std::string>{std::to_string(i), std::to_string(want_idx[j])}));
      ASSERT_EQ(cd.rows[j].at(1), ci.rows[j].at(1));
      ASSERT_TRUE(same_bits(std::strtof(cd.rows[j].at(2).c_str(), nullptr), want_d[j]));
    }

  // float64 (text is read as doubles): the rows of a float64 brute force.
  // The doubles the text denotes (write_text prints "%.9g").
  std::vector<double> cloud64;
  for (const float v : cloud) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    cloud64.push_back(std::strtod(buf, nullptr));
  }
  const auto all64 = brute_force64(cloud64, cloud64);
  r = run_cli(ref + " --out '" + path_of("csr64.npy") + "' --distances '" + path_of("csr64_d.npy") +
              "' --counts '" + path_of("csr64_n.csv") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  std::vector<int32_t> idx64;
  std::vector<double> d64;
  for (const auto& row : all64)
    for (size_t j = 0; j < row.size() && row[j].first <= 1.0; ++j) {
      idx64.push_back(row[j].second);
      d64.push_back(row[j].first);
    }
  EXPECT_EQ(read_npy_vector<int32_t>(path_of("csr64.npy"), "<i4", idx64.size()), idx64);
  const std::vector<double> got64 =
      read_npy_vector<double>(path_of("csr64_d.npy"), "<f8", d64.size());
  ASSERT_EQ(got64.size(), d64.size());
  for (size_t i = 0; i < d64.size(); ++i) ASSERT_TRUE(same_bits64(got64[i], d64[i])) << i;
  const Csv cn = read_csv(path_of("csr64_n.csv"));
  ASSERT_EQ(cn.rows.size(), static_cast<size_t>(n));

  // A flat .npy without offsets or counts could not be split: refused.
  r = run_cli(ref + " --out '" + path_of("csr_alone.npy") + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("give --offsets FILE (or --counts FILE)"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(path_of("csr_alone.npy")));
}

// radius --max-neighbors M where queries have more than M (radar.xyz, radius
// 2, M 8: 13,474 of 20,950 rows cut, exit 0, nothing said): reported on
// stderr, which is a file here, never a terminal; exit 3 and nothing
// written, unless --allow-truncation.
TEST(Cli, RadiusMaxNeighborsNeverCutsRowsSilently) {
  const std::vector<float> cloud = dense_cloud();
  const int n = 600, M = 8;
  write_text(path_of("dense_t.xyz"), cloud, " ", nullptr);
  const RadiusAnswer want = library_radius(cloud, cloud, 3, 1.0f, M);
  expect_same_answer(want, brute_force_radius(cloud, cloud, 3, 1.0f, M), true);
  const std::string ref =
      "radius --precision float32 --ref '" + path_of("dense_t.xyz") + "' --self --radius 1";
  const std::string outs = " --out '" + path_of("cut_idx.npy") + "' --distances '" +
                           path_of("cut_d.npy") + "' --counts '" + path_of("cut_n.npy") + "'";
  RunResult r = run_cli(ref + " --max-neighbors 8" + outs);
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_EQ(r.err, cut_rows_report(want.counts, M, "1", false));
  EXPECT_NE(r.err.find("(the first: query 0, with "), std::string::npos) << r.err;
  for (const char* f : {"cut_idx.npy", "cut_d.npy", "cut_n.npy"}) EXPECT_FALSE(exists(path_of(f)));

  r = run_cli(ref + " --max-neighbors 8 --allow-truncation" + outs);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, cut_rows_report(want.counts, M, "1", true));
  expect_same_answer(read_radius_npy("cut", n, M), want, true);

  // Rows long enough for every query: nothing to say.
  const int longest = *std::max_element(want.counts.begin(), want.counts.end());
  r = run_cli(ref + " --max-neighbors " + std::to_string(longest) + outs);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");

  // --allow-truncation needs --max-neighbors; --offsets excludes it.
  r = run_cli(ref + " --allow-truncation" + outs);
  EXPECT_NE(r.rc, 0);
  EXPECT_LT(r.rc, 1000);
  EXPECT_NE(r.err.find("--allow-truncation"), std::string::npos) << r.err;
  r = run_cli(ref + " --max-neighbors 8 --offsets '" + path_of("cut_o.npy") + "'" + outs);
  EXPECT_NE(r.rc, 0);
  EXPECT_LT(r.rc, 1000);
  EXPECT_NE(r.err.find("--offsets"), std::string::npos) << r.err;
}

// PLY element counts must match the data exactly: under-counting headers
// (data after the last element) were read in part with exit 0.
TEST(Cli, PlyHeaderCountsMustMatchTheData) {
  const std::string hdr3 = "property float x\nproperty float y\nproperty float z\n";
  const std::string ascii2 = "ply\nformat ascii 1.0\nelement vertex 2\n" + hdr3 + "end_header\n";
  std::string bin2 =
      "ply\nformat binary_little_endian 1.0\nelement vertex 2\n" + hdr3 + "end_header\n";
  const size_t bin_header = bin2.size();
  for (int i = 0; i < 4 * 3; ++i) append_le<float>(&bin2, static_cast<float>(i));
  const std::string ascii_face =
      "ply\nformat ascii 1.0\nelement vertex 3\n" + hdr3 +
      "element face 1\nproperty list uchar int vertex_indices\nend_header\n"
      "0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n\n0 0 1\n";
  std::string many_elements = "ply\nformat ascii 1.0\n";
  for (int e = 0; e < 400; ++e) many_elements += "element e" + std::to_string(e) + " 0\n";
  many_elements += "element vertex 0\n" + hdr3 + "end_header\n";
  const std::string long_name(60, 'v'), huge_count = "77777777777777777";
  std::string long_names = "ply\nformat binary_little_endian 1.0\n";
  for (int e = 0; e < 5; ++e)
    long_names +=
        "element " + long_name + " " + huge_count + "\nproperty float " + long_name + "\n";
  long_names += "element vertex 1\n" + hdr3 + "end_header\n";
  struct Case {
    std::string name, bytes, expect;
  };
  const Case cases[] = {
      {"under.ply", ascii2 + "1 2 3\n4 5 6\n7 8 9\n\n10 11 12\n",
       "under.ply: the header declares 2 'vertex' but 2 more lines of data follow the last "
       "element (line 9), from line 10 ('7 8 9'): a header that under-counts?"},
      {"under_bin.ply", bin2,
       "under_bin.ply: the header declares 2 'vertex' but 24 more bytes follow the last element, "
       "from byte offset " +
           std::to_string(bin_header + 24) + " (the file has " + std::to_string(bin2.size()) + ")"},
      {"under_face.ply", ascii_face,
       "the header declares 3 'vertex', 1 'face' but 1 more line of data follows the last "
       "element (line 13), from line 15 ('0 0 1')"},
      {"over.ply", ascii2.substr(0, ascii2.size()) + "1 2 3\n",
       "over.ply: truncated PLY: element 'vertex' ends at 1 of 2 (the file ends after line 8; "
       "the header declares 2 'vertex')"},
      {"over_bin.ply", bin2.substr(0, bin_header + 20),
       "over_bin.ply: truncated PLY: element 'vertex' ends at 1 of 2 (row 1 starts at byte "
       "offset " +
           std::to_string(bin_header + 12) +
           "; its property 'z' needs bytes past the file's end, " +
           std::to_string(bin_header + 20)},
      {"wide.ply", ascii2 + "1 2 3\n4 5 6 0 0 1\n",
       "wide.ply: PLY line 9: 6 values, but row 1 of element 'vertex' takes 3"},
      // Hundreds of elements: the message names the first few.
      {"many.ply", many_elements + "0 0 0\n1 1 1\n",
       "many.ply: the header declares 0 'e0', 0 'e1', 0 'e2', 0 'e3', ... (401 elements) but 2 "
       "more lines"},
      // Every quoted part at its longest (a fuzzer's finding, 499 bytes):
      // the message is cut, still naming the file and what went wrong.
      {"long.ply", long_names, "long.ply: truncated PLY: element '" + long_name.substr(0, 40)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    write_bytes(path_of(c.name), c.bytes);
    const RunResult r = run_cli("knn --ref '" + path_of(c.name) + "' --self --k 1 --out '" +
                                path_of("ply_out.npy") + "'");
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
    EXPECT_LT(r.err.size(), 400u + path_of(c.name).size()) << r.err;
  }
  // Exactly the declared data (trailing blank lines in ascii) reads.
  write_bytes(path_of("exact.ply"), ascii2 + "1 2 3\n4 5 6\n\n");
  write_bytes(path_of("exact_bin.ply"), bin2.substr(0, bin_header + 24));
  // An element without properties takes no lines (as it takes no bytes in
  // binary): its rows are not the vertices' lines.
  write_bytes(path_of("exact_marker.ply"),
              "ply\nformat ascii 1.0\nelement marker 2\nelement vertex 2\n" + hdr3 +
                  "end_header\n1 2 3\n4 5 6\n");
  for (const char* f : {"exact.ply", "exact_bin.ply", "exact_marker.ply"}) {
    const RunResult r = run_cli("knn --ref '" + path_of(f) + "' --self --k 1 --out '" +
                                path_of("ply_ok.csv") + "'");
    EXPECT_EQ(r.rc, 0) << f << ": " << r.err;
    EXPECT_EQ(read_csv(path_of("ply_ok.csv")).rows.size(), 2u) << f;
  }
}

// A .npy with bytes after the data its shape describes was accepted.
TEST(Cli, NpyWithTrailingBytesIsRefused) {
  std::string body;
  for (int i = 0; i < 9; ++i) append_le<float>(&body, static_cast<float>(i));
  const std::string npy = npy_bytes("<f4", "(2, 3)", body);
  write_bytes(path_of("trail.npy"), npy);
  const RunResult r = run_cli("knn --ref '" + path_of("trail.npy") + "' --self --k 1 --out '" +
                              path_of("npy_out.npy") + "'");
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_EQ(r.err, "knn-gpgpu: " + path_of("trail.npy") +
                       ": .npy shape (2, 3) of <f4 takes 24 data bytes, but 36 follow the header: "
                       "12 bytes more than the shape describes, from byte offset " +
                       std::to_string(npy.size() - 12) + "\n");
}

// x y z nx ny nz (a scan with normals) was refused with "expected 3 columns,
// found 6": the coordinates are taken (the header's x y z when it names
// them, else the first 3) and a line on stderr says which; rows of another
// width stay errors.
TEST(Cli, TextWithExtraColumnsTakesTheCoordinates) {
  const std::vector<float> pts = random_points(40, 41), q = random_points(9, 42);
  const std::vector<int> want = library_knn(pts, pts, 3);
  auto write_wide = [&](const std::string& name, const char* header, bool xyz_last) {
    std::FILE* f = std::fopen(path_of(name).c_str(), "w");
    ASSERT_NE(f, nullptr);
    if (header) std::fprintf(f, "%s\n", header);
    for (size_t i = 0; i < pts.size(); i += 3) {
      const float nx = pts[i] * 0.5f + 100.0f, ny = -7.25f, nz = 3.0f;
      if (xyz_last) {
        std::fprintf(f, "%.9g,%.9g,%.9g,%.9g,%.9g,%.9g\n", nx, ny, nz, pts[i], pts[i + 1],
                     pts[i + 2]);
      } else {
        std::fprintf(f, "%.9g %.9g %.9g %.9g %.9g %.9g\n", pts[i], pts[i + 1], pts[i + 2], nx, ny,
                     nz);
      }
    }
    std::fclose(f);
  };
  write_wide("normals.xyz", nullptr, false);
  write_wide("named.csv", "nx,ny,nz,x,y,z", true);
  write_wide("cc.txt", "//X Y Z Nx Ny Nz", false);
  const struct {
    const char* name;
    std::string notice;
  } cases[] = {
      {"normals.xyz", "6 columns, using the first 3 as x y z"},
      {"named.csv", "6 columns, using columns 4, 5, 6 ('x' 'y' 'z') as x y z"},
      {"cc.txt", "6 columns, using columns 1, 2, 3 ('//X' 'Y' 'Z') as x y z"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const RunResult r = run_cli("knn --precision float32 --ref '" + path_of(c.name) +
                                "' --self --k 3 --out '" + path_of("wide.csv") + "'");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "knn-gpgpu: " + path_of(c.name) + ": " + c.notice + "\n");
    const Csv got = read_csv(path_of("wide.csv"));
    ASSERT_EQ(got.rows.size(), 40u);
    for (size_t i = 0; i < 40; ++i)
      for (size_t j = 0; j < 3; ++j) ASSERT_EQ(std::stoi(got.rows[i].at(j)), want[i * 3 + j]);
  }
  // radius: a .xyz file is x y z whatever follows (3-D counts); a .csv file
  // keeps its column count as the dimension (6-D here).
  const RadiusAnswer want3 = library_radius(pts, pts, 3, 6.0f, 0);
  RunResult r = run_cli("radius --precision float32 --ref '" + path_of("normals.xyz") +
                        "' --self --radius 6 --counts '" + path_of("wide_n.csv") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("using the first 3 as x y z"), std::string::npos) << r.err;
  const Csv cn = read_csv(path_of("wide_n.csv"));
  ASSERT_EQ(cn.rows.size(), 40u);
  for (size_t i = 0; i < 40; ++i) EXPECT_EQ(std::stoi(cn.rows[i].at(0)), want3.counts[i]);
  r = run_cli("radius --precision float32 --ref '" + path_of("named.csv") +
              "' --self --radius 6 --counts '" + path_of("wide6_n.csv") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  // Features (radius, 5-D reference): a 6-column query file is not 5-D
  // features with an attribute, it is an error.
  write_bytes(path_of("f5.csv"), "1,2,3,4,5\n2,3,4,5,6\n");
  write_bytes(path_of("q6.csv"), "1,2,3,4,5,6\n");
  r = run_cli("radius --ref '" + path_of("f5.csv") + "' --query '" + path_of("q6.csv") +
              "' --radius 1 --counts '" + path_of("f5_n.csv") + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("q6.csv: line 1: expected 5 columns, found 6"), std::string::npos) << r.err;
  // A row of another width is still an error naming its line.
  write_bytes(path_of("ragged.xyz"), "1 2 3 0 0 1\n4 5 6 0 0 1\n7 8 9 0 1\n");
  r = run_cli("knn --ref '" + path_of("ragged.xyz") + "' --self --k 1 --out '" +
              path_of("wide.csv") + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("ragged.xyz: line 3: expected 6 columns (as on line 1), found 5"),
            std::string::npos)
      << r.err;
}

// ---- deviation: a scan against a design mesh -------------------------------------------
// The oracle: the distance from a point to each triangle by brute force in
// double (the projection onto the plane when it falls inside the triangle,
// else the nearest point of the three edges), signed by the convex solid's
// face planes (inside: behind every outward face). Written here, apart from
// the library's definitions in common/geometry.
namespace {

using Vec3 = std::array<double, 3>;

Vec3 sub(const Vec3& a, const Vec3& b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2]}; }
double dot(const Vec3& a, const Vec3& b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
Vec3 cross(const Vec3& a, const Vec3& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}

double segment_distance(const Vec3& p, const Vec3& a, const Vec3& b) {
  const Vec3 ab = sub(b, a);
  const double t = std::clamp(dot(sub(p, a), ab) / dot(ab, ab), 0.0, 1.0);
  const Vec3 q = {a[0] + t * ab[0], a[1] + t * ab[1], a[2] + t * ab[2]};
  return std::sqrt(dot(sub(p, q), sub(p, q)));
}

double triangle_distance(const Vec3& p, const Vec3& a, const Vec3& b, const Vec3& c) {
  const Vec3 n = cross(sub(b, a), sub(c, a));
  const double h = dot(sub(p, a), n) / dot(n, n);
  const Vec3 q = {p[0] - h * n[0], p[1] - h * n[1], p[2] - h * n[2]};
  if (dot(cross(sub(b, a), sub(q, a)), n) >= 0 && dot(cross(sub(c, b), sub(q, b)), n) >= 0 &&
      dot(cross(sub(a, c), sub(q, c)), n) >= 0)
    return std::fabs(h) * std::sqrt(dot(n, n));
  return std::min(
      {segment_distance(p, a, b), segment_distance(p, b, c), segment_distance(p, c, a)});
}

// A convex solid: vertices and outward triangles.
struct Solid {
  std::vector<Vec3> v;
  std::vector<std::array<int, 3>> t;
  double signed_distance(const Vec3& p) const {
    double d = std::numeric_limits<double>::infinity();
    bool inside = true;
    for (const auto& tri : t) {
      d = std::min(d, triangle_distance(p, v[tri[0]], v[tri[1]], v[tri[2]]));
      const Vec3 n = cross(sub(v[tri[1]], v[tri[0]]), sub(v[tri[2]], v[tri[0]]));
      inside = inside && dot(sub(p, v[tri[0]]), n) < 0;
    }
    return inside ? -d : d;
  }
};

// The unit cube, 12 outward triangles.
Solid cube_solid() {
  return {{{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0}, {0, 0, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 1}},
          {{0, 2, 1},
           {0, 3, 2},
           {4, 5, 6},
           {4, 6, 7},
           {0, 1, 5},
           {0, 5, 4},
           {2, 3, 7},
           {2, 7, 6},
           {1, 2, 6},
           {1, 6, 5},
           {3, 0, 4},
           {3, 4, 7}}};
}

// A tetrahedron with a slanted face (not axis-aligned: the face region's
// projection matters).
Solid tetrahedron_solid() {
  return {{{0, 0, 0}, {1.5, 0, 0}, {0, 1.25, 0}, {0, 0, 1}},
          {{0, 2, 1}, {0, 1, 3}, {0, 3, 2}, {1, 2, 3}}};
}

std::string binary_stl_of(const Solid& s, const char* header) {
  std::string b = header;
  b.resize(80, ' ');
  append_le<uint32_t>(&b, static_cast<uint32_t>(s.t.size()));
  for (const auto& tri : s.t) {
    for (int i = 0; i < 3; ++i) append_le<float>(&b, 0.0f);
    for (int c = 0; c < 3; ++c)
      for (int d = 0; d < 3; ++d) append_le<float>(&b, static_cast<float>(s.v[tri[c]][d]));
    append_le<uint16_t>(&b, 0);
  }
  return b;
}

// The cube as OBJ quads (the reader fans them into the triangles above, or
// others with the same surface).
std::string cube_obj() {
  return "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0 0 1\nv 1 0 1\nv 1 1 1\nv 0 1 1\n"
         "f 1 4 3 2\nf 5 6 7 8\nf 1 2 6 5\nf 3 4 8 7\nf 2 3 7 6\nf 4 1 5 8\n";
}

struct Scan {
  std::vector<float> xyz;
  std::vector<double> d;  // the oracle's signed distances, in double
};

// Points in [-0.3, 1.3]^3 within max_distance, and `far` points 3 away; none
// within 1e-4 of a value where a count changes (+-tol, the histogram's
// edges, the max distance), so float32 rounding cannot move one across.
Scan make_scan(const Solid& s, int n, int far, double tol, const std::vector<double>& edges,
               double max_distance, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.3f, 1.3f);
  Scan scan;
  auto near_a_step = [&](double d) {
    std::vector<double> steps = edges;
    for (double x : {-tol, tol, max_distance, -max_distance}) steps.push_back(x);
    for (double x : steps)
      if (std::fabs(d - x) < 1e-4) return true;
    return false;
  };
  while (static_cast<int>(scan.d.size()) < n) {
    const Vec3 p = {u(rng), u(rng), u(rng)};
    const double d = s.signed_distance(p);
    if (near_a_step(d) || std::fabs(d) > max_distance) continue;
    for (double x : p) scan.xyz.push_back(static_cast<float>(x));
    scan.d.push_back(d);
  }
  for (int i = 0; i < far; ++i) {
    const Vec3 p = {4.0, 0.25 + 0.0625 * i, 0.5};
    for (double x : p) scan.xyz.push_back(static_cast<float>(x));
    scan.d.push_back(s.signed_distance(p));
  }
  return scan;
}

// The report's "key value" lines.
std::map<std::string, std::string> report_of(const std::string& out) {
  std::map<std::string, std::string> r;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    const size_t value = line.find_first_not_of(' ', space);
    r[line.substr(0, space)] = value == std::string::npos ? "" : line.substr(value);
  }
  return r;
}

double report_number(const std::map<std::string, std::string>& r, const std::string& key) {
  const auto it = r.find(key);
  EXPECT_NE(it, r.end()) << key;
  return it == r.end() ? std::nan("") : std::strtod(it->second.c_str(), nullptr);
}

int64_t report_count(const std::map<std::string, std::string>& r, const std::string& key) {
  const auto it = r.find(key);
  EXPECT_NE(it, r.end()) << key;
  return it == r.end() ? -1 : std::strtoll(it->second.c_str(), nullptr, 10);
}

// What the report must say, from the oracle's values (the header's
// definitions: nearest-rank percentiles, tolerance and histogram counts).
struct Expected {
  int64_t measured = 0, beyond = 0, within = 0, above = 0, below = 0, below_bins = 0,
          above_bins = 0;
  double min = 0, max = 0, mean = 0, rms = 0;
  std::map<int, double> pct;
  std::vector<int64_t> bins;
};

Expected expected_report(const std::vector<double>& d, double tol, double max_distance,
                         const std::vector<double>& edges) {
  Expected e;
  std::vector<double> v;
  for (double x : d) {
    if (std::fabs(x) > max_distance) {
      ++e.beyond;
      continue;
    }
    v.push_back(x);
  }
  std::sort(v.begin(), v.end());
  e.measured = static_cast<int64_t>(v.size());
  e.min = v.front();
  e.max = v.back();
  long double sum = 0, sq = 0;
  for (double x : v) {
    sum += x;
    sq += static_cast<long double>(x) * x;
    e.within += x >= -tol && x <= tol;
    e.above += x > tol;
    e.below += x < -tol;
  }
  e.mean = static_cast<double>(sum / v.size());
  e.rms = static_cast<double>(std::sqrt(sq / v.size()));
  for (int p : {1, 5, 25, 50, 75, 95, 99}) {
    const int64_t rank = static_cast<int64_t>(std::ceil(p / 100.0 * e.measured)) - 1;
    e.pct[p] = v[static_cast<size_t>(std::max<int64_t>(rank, 0))];
  }
  if (!edges.empty()) {
    e.bins.assign(edges.size() - 1, 0);
    for (double x : v) {
      if (x < edges.front()) {
        ++e.below_bins;
      } else if (x > edges.back()) {
        ++e.above_bins;
      } else {
        const size_t b =
            static_cast<size_t>(std::upper_bound(edges.begin(), edges.end(), x) - edges.begin()) -
            1;
        ++e.bins[std::min(b, e.bins.size() - 1)];
      }
    }
  }
  return e;
}

void expect_report(const std::map<std::string, std::string>& r, const Expected& e, double eps) {
  EXPECT_EQ(report_count(r, "measured"), e.measured);
  EXPECT_EQ(report_count(r, "beyond"), e.beyond);
  EXPECT_NEAR(report_number(r, "min"), e.min, eps);
  EXPECT_NEAR(report_number(r, "max"), e.max, eps);
  EXPECT_NEAR(report_number(r, "mean"), e.mean, eps);
  EXPECT_NEAR(report_number(r, "rms"), e.rms, eps);
  for (const auto& [p, value] : e.pct)
    EXPECT_NEAR(report_number(r, "p" + std::to_string(p)), value, eps) << "p" << p;
  EXPECT_EQ(report_count(r, "within"), e.within);
  EXPECT_EQ(report_count(r, "above"), e.above);
  EXPECT_EQ(report_count(r, "below"), e.below);
}

// The documented colour map (docs/cli.md), written out again here.
std::array<int, 3> expected_colour(double d, double tol, double range) {
  if (!std::isfinite(d)) return {128, 128, 128};
  if (std::fabs(d) <= tol) return {0, 255, 0};
  const double s = range > tol ? std::min(1.0, (std::fabs(d) - tol) / (range - tol)) : 1.0;
  const int fade = static_cast<int>(std::lround(255 * (1 - s)));
  return d > 0 ? std::array<int, 3>{255, fade, 0} : std::array<int, 3>{0, fade, 255};
}

// The per-point PLY: its header must be exactly this layout.
struct DeviationPly {
  std::vector<double> xyz, d;
  std::vector<std::array<int, 3>> rgb;
};

DeviationPly read_deviation_ply(const std::string& path, bool f64, int64_t n) {
  const std::string s = slurp(path);
  const char* t = f64 ? "double" : "float";
  const std::string header = std::string("element vertex ") + std::to_string(n) + "\nproperty " +
                             t + " x\nproperty " + t + " y\nproperty " + t + " z\nproperty " + t +
                             " deviation\nproperty uchar red\nproperty uchar green\nproperty "
                             "uchar blue\nend_header\n";
  DeviationPly p;
  EXPECT_EQ(s.rfind("ply\nformat binary_little_endian 1.0\n", 0), 0u);
  const size_t at = s.find(header);
  EXPECT_NE(at, std::string::npos) << s.substr(0, 400);
  if (at == std::string::npos) return p;
  const size_t body = at + header.size(), scalar = f64 ? 8 : 4, record = 4 * scalar + 3;
  EXPECT_EQ(s.size(), body + static_cast<size_t>(n) * record);
  if (s.size() != body + static_cast<size_t>(n) * record) return p;
  for (int64_t i = 0; i < n; ++i) {
    const char* r = s.data() + body + static_cast<size_t>(i) * record;
    for (int k = 0; k < 4; ++k) {
      double v;
      if (f64) {
        std::memcpy(&v, r + k * 8, 8);
      } else {
        float f;
        std::memcpy(&f, r + k * 4, 4);
        v = f;
      }
      (k < 3 ? p.xyz : p.d).push_back(v);
    }
    p.rgb.push_back({static_cast<unsigned char>(r[4 * scalar]),
                     static_cast<unsigned char>(r[4 * scalar + 1]),
                     static_cast<unsigned char>(r[4 * scalar + 2])});
  }
  return p;
}

// data-count="..." of the SVG's elements of a class, in order.
std::vector<int64_t> svg_counts(const std::string& svg, const std::string& cls) {
  std::vector<int64_t> out;
  const std::string tag = "class=\"" + cls + "\"";
  for (size_t at = svg.find(tag); at != std::string::npos; at = svg.find(tag, at + 1)) {
    const size_t c = svg.find("data-count=\"", at);
    out.push_back(std::strtoll(svg.c_str() + c + 12, nullptr, 10));
  }
  return out;
}

}  // namespace

TEST(CliDeviation, ReportMatchesABruteForceOracle) {
  const double tol = 0.05, max_distance = 1.0, range = 0.5;
  const int bins = 10;
  std::vector<double> edges;
  for (int b = 0; b <= bins; ++b) edges.push_back(-range + 2 * range * b / bins);
  for (const auto& [name, solid] :
       {std::pair<const char*, Solid>{"cube", cube_solid()}, {"tetra", tetrahedron_solid()}}) {
    SCOPED_TRACE(name);
    const Scan scan = make_scan(solid, 400, 6, tol, edges, max_distance, 11);
    write_npy(path_of("scan.npy"), scan.xyz, true);  // float values, as doubles
    const std::string design = path_of(std::string(name) + ".stl");
    write_bytes(design, binary_stl_of(solid, "solid written as binary"));
    const Expected want = expected_report(scan.d, tol, max_distance, edges);
    ASSERT_EQ(want.beyond, 6);
    ASSERT_GT(want.within, 10);
    ASSERT_GT(want.above, 10);
    ASSERT_GT(want.below, 10);
    for (const bool f64 : {false, true}) {
      SCOPED_TRACE(f64 ? "f64" : "f32");
      const std::string ply = path_of("dev.ply"), svg = path_of("hist.svg");
      std::remove(ply.c_str());
      std::remove(svg.c_str());
      const RunResult r =
          run_cli("deviation --scan '" + path_of("scan.npy") + "' --design '" + design +
                  "' --tol 0.05 --max-distance 1 --backend openmp --out '" + ply +
                  "' --histogram '" + svg + "' --bins 10 --range 0.5" + (f64 ? " --f64" : ""));
      ASSERT_EQ(r.rc, 0) << r.err;
      EXPECT_EQ(r.err, "");
      const auto rep = report_of(r.out);
      // float32: the distances of the float32 mesh (rounded each step)
      // against the double oracle.
      expect_report(rep, want, f64 ? 1e-12 : 2e-6);
      EXPECT_EQ(rep.at("scan"),
                path_of("scan.npy") + ": " + std::to_string(scan.d.size()) + " points");
      EXPECT_NE(rep.at("design").find("closed and oriented (signs from pseudonormals)"),
                std::string::npos)
          << rep.at("design");
      EXPECT_EQ(rep.at("computed"), std::string(f64 ? "float64" : "float32") + ", openmp");

      const DeviationPly got = read_deviation_ply(ply, f64, static_cast<int64_t>(scan.d.size()));
      ASSERT_EQ(got.d.size(), scan.d.size());
      for (size_t i = 0; i < scan.d.size(); ++i) {
        SCOPED_TRACE("point " + std::to_string(i));
        for (int k = 0; k < 3; ++k) EXPECT_EQ(got.xyz[i * 3 + k], scan.xyz[i * 3 + k]);
        if (std::fabs(scan.d[i]) > max_distance) {
          EXPECT_EQ(got.d[i], std::numeric_limits<double>::infinity());
        } else {
          EXPECT_NEAR(got.d[i], scan.d[i], f64 ? 1e-12 : 2e-6);
        }
        EXPECT_EQ(got.rgb[i], expected_colour(got.d[i], tol, range));
      }
      const std::string picture = slurp(svg);
      EXPECT_EQ(picture.rfind("<?xml", 0), 0u);
      EXPECT_NE(picture.find("</svg>"), std::string::npos);
      EXPECT_EQ(svg_counts(picture, "bin"), want.bins);
      EXPECT_EQ(svg_counts(picture, "below-range"), std::vector<int64_t>{want.below_bins});
      EXPECT_EQ(svg_counts(picture, "above-range"), std::vector<int64_t>{want.above_bins});
      EXPECT_NE(picture.find("class=\"tolerance\" data-value=\"-0.05\""), std::string::npos);
      EXPECT_NE(picture.find("class=\"tolerance\" data-value=\"0.05\""), std::string::npos);
    }
  }
}

// Every design format, the cube: the same report; OBJ quads say they were
// split; without --range the colours span min(4 tol, max distance).
TEST(CliDeviation, EveryDesignFormatGivesTheSameReport) {
  const Solid cube = cube_solid();
  const double tol = 0.05;
  const Scan scan = make_scan(cube, 300, 0, tol, {}, 1e300, 5);
  write_npy(path_of("scan32.npy"), scan.xyz, false);
  const Expected want = expected_report(scan.d, tol, std::numeric_limits<double>::infinity(), {});
  std::string ascii = "solid cube\n";
  for (const auto& t : cube.t) {
    ascii += "facet normal 0 0 0\nouter loop\n";
    for (int c = 0; c < 3; ++c)
      ascii += "vertex " + std::to_string(cube.v[t[c]][0]) + " " + std::to_string(cube.v[t[c]][1]) +
               " " + std::to_string(cube.v[t[c]][2]) + "\n";
    ascii += "endloop\nendfacet\n";
  }
  ascii += "endsolid cube\n";
  std::string ply =
      "ply\nformat ascii 1.0\nelement vertex 8\nproperty float x\nproperty float "
      "y\nproperty float z\nelement face 12\nproperty list uchar int "
      "vertex_indices\nend_header\n";
  for (const auto& v : cube.v)
    ply += std::to_string(v[0]) + " " + std::to_string(v[1]) + " " + std::to_string(v[2]) + "\n";
  for (const auto& t : cube.t)
    ply += "3 " + std::to_string(t[0]) + " " + std::to_string(t[1]) + " " + std::to_string(t[2]) +
           "\n";
  write_bytes(path_of("cube_bin.stl"), binary_stl_of(cube, "cube"));
  write_bytes(path_of("cube_ascii.stl"), ascii);
  write_bytes(path_of("cube.ply"), ply);
  write_bytes(path_of("cube.obj"), cube_obj());
  for (const char* design : {"cube_bin.stl", "cube_ascii.stl", "cube.ply", "cube.obj"}) {
    SCOPED_TRACE(design);
    const std::string out = path_of("fmt.ply");
    const RunResult r = run_cli("deviation --scan '" + path_of("scan32.npy") + "' --design '" +
                                path_of(design) + "' --tol 0.05 --out '" + out + "'");
    ASSERT_EQ(r.rc, 0) << r.err;
    const bool obj = std::string(design) == "cube.obj";
    EXPECT_EQ(r.err, obj ? "knn-gpgpu: " + path_of(design) +
                               ": 6 faces of more than 3 vertices fan-triangulated (12 triangles "
                               "in all)\n"
                         : "");
    const auto rep = report_of(r.out);
    expect_report(rep, want, 2e-6);
    EXPECT_EQ(rep.at("max_distance"), "inf");
    EXPECT_NE(rep.at("design").find(": 8 vertices, 12 triangles, closed and oriented"),
              std::string::npos);
    const DeviationPly got = read_deviation_ply(out, false, static_cast<int64_t>(scan.d.size()));
    ASSERT_EQ(got.d.size(), scan.d.size());
    for (size_t i = 0; i < scan.d.size(); ++i)
      ASSERT_EQ(got.rgb[i], expected_colour(got.d[i], tol, 4 * tol)) << i;
  }
}

// --progress on a non-terminal: a line per stage, the library's calls too.
TEST(CliDeviation, ProgressLines) {
  write_bytes(path_of("p_cube.stl"), binary_stl_of(cube_solid(), "cube"));
  write_bytes(path_of("p_scan.xyz"), "0.5 0.5 0.5\n2 2 2\n");
  const RunResult r = run_cli("deviation --scan '" + path_of("p_scan.xyz") + "' --design '" +
                              path_of("p_cube.stl") + "' --tol 0.1 --progress");
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* stage : {"reading ", "building the mesh of 12 triangles (auto, float32)",
                            "deviation of 2 points", "done"})
    EXPECT_NE(r.err.find(stage), std::string::npos) << stage << "\n" << r.err;
  const auto rep = report_of(r.out);
  EXPECT_NEAR(report_number(rep, "min"), -0.5, 1e-7);
  EXPECT_NEAR(report_number(rep, "max"), std::sqrt(3.0), 1e-6);
}

TEST(CliDeviation, BadFilesAndArgumentsFailCleanly) {
  write_bytes(path_of("ok_cube.stl"), binary_stl_of(cube_solid(), "cube"));
  write_bytes(path_of("ok_scan.xyz"), "0.5 0.5 0.5\n2 2 2\n");
  const std::string scan = " --scan '" + path_of("ok_scan.xyz") + "'";
  const std::string design = " --design '" + path_of("ok_cube.stl") + "'";
  const std::string cube_ascii_head = "solid c\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\n";
  const struct {
    const char* file;
    std::string bytes, expect;
  } bad_designs[] = {
      {"trunc.stl", binary_stl_of(cube_solid(), "cube").substr(0, 600),
       "binary STL of the wrong size: its header's count, 12 triangles, would take 84 + 50 x 12 "
       "= 684 bytes, the file has 600"},
      {"loop.stl", cube_ascii_head + "vertex 1 0 0\nendloop\nendfacet\nendsolid\n",
       "line 6: expected 'vertex' in facet 0 (a facet has 3 vertices), found 'endloop'"},
      {"points.ply",
       "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\nproperty "
       "float z\nend_header\n1 2 3\n",
       "PLY file has no face element"},
      {"index.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 4\n",
       "line 4: vertex index 4, but the file has 3 vertices"},
      {"nan.obj", "v 0 0 0\nv 1 nan 0\nv 0 1 0\nf 1 2 3\n",
       "line 2: y of vertex 2 (OBJ numbering) is not a finite float32 coordinate"},
      {"design.off", "OFF\n", "unknown mesh file type '.off' (expected .stl .ply .obj)"},
  };
  for (const auto& c : bad_designs) {
    SCOPED_TRACE(c.file);
    write_bytes(path_of(c.file), c.bytes);
    const RunResult r =
        run_cli("deviation" + scan + " --design '" + path_of(c.file) + "' --tol 0.1");
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find(path_of(c.file) + ": " + c.expect), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  }
  // A missing design, a bad scan, coordinates the library refuses.
  RunResult r = run_cli("deviation" + scan + " --design '" + path_of("none.stl") + "' --tol 0.1");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("none.stl: cannot open"), std::string::npos) << r.err;
  write_bytes(path_of("bad_scan.xyz"), "1 2 3\n1 2\n");
  r = run_cli("deviation --scan '" + path_of("bad_scan.xyz") + "'" + design + " --tol 0.1");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("bad_scan.xyz: line 2"), std::string::npos) << r.err;
  write_bytes(path_of("huge.obj"), "v 0 0 0\nv 1e38 0 0\nv 0 1 0\nf 1 2 3\n");
  r = run_cli("deviation" + scan + " --design '" + path_of("huge.obj") + "' --tol 0.1");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("knn_mesh_build: "), std::string::npos) << r.err;
  // Arguments: each refused before anything is read or written.
  const struct {
    std::string args, expect;
  } bad_args[] = {
      {scan + design + " --tol -1", "--tol must be a finite number >= 0"},
      {scan + design + " --tol nan", "--tol must be a finite number >= 0"},
      {scan + design + " --tol 0.1 --max-distance -2", "--max-distance must be a number >= 0"},
      {scan + design + " --tol 0.1 --out '" + path_of("o.csv") + "'", "--out must end in .ply"},
      {scan + design + " --tol 0.1 --histogram '" + path_of("h.png") + "'",
       "--histogram must end in .svg"},
      {scan + design + " --tol 0 --histogram '" + path_of("h.svg") + "'", "give --range R"},
      {scan + design + " --tol 0.1 --range -1 --out '" + path_of("o.ply") + "'",
       "--range must be a finite number > 0"},
      {scan + design + " --tol 0.1 --histogram '" + path_of("h.svg") + "' --bins 10001",
       "--bins must be from 1 to 10000"},
  };
  for (const auto& c : bad_args) {
    SCOPED_TRACE(c.args);
    r = run_cli("deviation" + c.args);
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
  }
  r = run_cli("deviation" + scan + design);  // no --tol
  EXPECT_NE(r.rc, 0);
  EXPECT_LT(r.rc, 1000);
  r = run_cli("deviation" + scan + design + " --tol 0.1 --bins 0");
  EXPECT_NE(r.rc, 0);
  EXPECT_LT(r.rc, 1000);
}

// --backend cuda: without a device a clean NO_DEVICE; with one, the same
// report, PLY and histogram as the OpenMP engine (the engines answer with
// the same bits), in both precisions.
TEST(CliDeviation, CudaBackendAnswersAsOpenMp) {
  const Solid tetra = tetrahedron_solid();
  const Scan scan = make_scan(tetra, 300, 3, 0.05, {}, 1.0, 21);
  write_npy(path_of("cu_scan.npy"), scan.xyz, true);
  write_bytes(path_of("cu_tetra.stl"), binary_stl_of(tetra, "tetra"));
  for (const char* precision : {"", " --f64"}) {
    SCOPED_TRACE(precision);
    auto run = [&](const char* backend) {
      return run_cli("deviation --scan '" + path_of("cu_scan.npy") + "' --design '" +
                     path_of("cu_tetra.stl") + "' --tol 0.05 --max-distance 1 --backend " +
                     backend + precision + " --out '" + path_of(std::string(backend) + ".ply") +
                     "' --histogram '" + path_of(std::string(backend) + ".svg") + "'");
    };
    const RunResult cpu = run("openmp");
    ASSERT_EQ(cpu.rc, 0) << cpu.err;
    const RunResult gpu = run("cuda");
    if (cuGetDeviceCount() == 0) {
      EXPECT_EQ(gpu.rc, 1);
      EXPECT_NE(gpu.err.find("KNN_ERR_NO_DEVICE"), std::string::npos) << gpu.err;
      EXPECT_EQ(gpu.out, "");
      continue;
    }
    ASSERT_EQ(gpu.rc, 0) << gpu.err;
    auto cpu_report = report_of(cpu.out), gpu_report = report_of(gpu.out);
    EXPECT_EQ(gpu_report.at("computed").substr(gpu_report.at("computed").size() - 6), ", cuda");
    cpu_report.erase("computed");
    gpu_report.erase("computed");
    EXPECT_EQ(gpu_report, cpu_report);
    EXPECT_EQ(slurp(path_of("cuda.ply")), slurp(path_of("openmp.ply")));
    EXPECT_EQ(slurp(path_of("cuda.svg")), slurp(path_of("openmp.svg")));
  }
}

// An open design (the cube without its top) takes its signs from the
// winding number, and the report says so; a point deep inside is still
// inside, one far below still outside.
TEST(CliDeviation, OpenDesignSaysWhereSignsComeFrom) {
  Solid open = cube_solid();
  open.t.erase(open.t.begin() + 2, open.t.begin() + 4);  // the two triangles of z = 1
  write_bytes(path_of("open_box.stl"), binary_stl_of(open, "open box"));
  write_bytes(path_of("open_scan.xyz"), "0.5 0.5 0.25\n0.5 0.5 -2\n");
  const RunResult r = run_cli("deviation --scan '" + path_of("open_scan.xyz") + "' --design '" +
                              path_of("open_box.stl") + "' --tol 0.1");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto rep = report_of(r.out);
  EXPECT_NE(rep.at("design").find(
                ": 8 vertices, 10 triangles, not closed and oriented (signs from the winding "
                "number)"),
            std::string::npos)
      << rep.at("design");
  EXPECT_NEAR(report_number(rep, "min"), -0.25, 1e-7);
  EXPECT_NEAR(report_number(rep, "max"), 2.0, 1e-6);
}

// --align: samples of the tetrahedron's surface moved off it by a known
// rigid motion; the fit prints that motion's inverse (to 1e-6) and the
// report of the moved-back scan is at the samples' rounding (float32 input),
// where without --align it is at the motion's size. The PLY holds the
// moved-back points.
TEST(CliDeviation, AlignFitsTheScanFirstAndPrintsTheTransform) {
  const Solid tetra = tetrahedron_solid();
  // The motion: 0.06 rad about (1, 1, 0.5), then (0.02, -0.01, 0.03).
  const double angle = 0.06, len = std::sqrt(2.25);
  const double k[3] = {1 / len, 1 / len, 0.5 / len};
  const double c = std::cos(angle), s = std::sin(angle), t = 1 - c;
  const double rot[9] = {
      t * k[0] * k[0] + c,        t * k[0] * k[1] - s * k[2], t * k[0] * k[2] + s * k[1],
      t * k[1] * k[0] + s * k[2], t * k[1] * k[1] + c,        t * k[1] * k[2] - s * k[0],
      t * k[2] * k[0] - s * k[1], t * k[2] * k[1] + s * k[0], t * k[2] * k[2] + c};
  const double shift[3] = {0.02, -0.01, 0.03};
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> xyz;
  for (int i = 0; i < 800; ++i) {
    const auto& tri = tetra.t[static_cast<size_t>(i) % tetra.t.size()];
    double r1 = std::sqrt(u(rng)), r2 = u(rng);
    Vec3 p;
    for (int d = 0; d < 3; ++d)
      p[d] = (1 - r1) * tetra.v[tri[0]][d] + r1 * (1 - r2) * tetra.v[tri[1]][d] +
             r1 * r2 * tetra.v[tri[2]][d];
    for (int d = 0; d < 3; ++d)
      xyz.push_back(static_cast<float>(rot[3 * d] * p[0] + rot[3 * d + 1] * p[1] +
                                       rot[3 * d + 2] * p[2] + shift[d]));
  }
  write_npy(path_of("al_scan.npy"), xyz, true);
  write_bytes(path_of("al_tetra.stl"), binary_stl_of(tetra, "tetra"));
  const std::string args = "deviation --scan '" + path_of("al_scan.npy") + "' --design '" +
                           path_of("al_tetra.stl") + "' --tol 0.001 --backend openmp --f64";
  const RunResult plain = run_cli(args);
  ASSERT_EQ(plain.rc, 0) << plain.err;
  EXPECT_GT(report_number(report_of(plain.out), "rms"), 5e-3);

  const std::string ply = path_of("al.ply");
  const RunResult r = run_cli(args + " --align --out '" + ply + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto rep = report_of(r.out);
  EXPECT_EQ(rep.at("aligned").substr(0, 4), "yes,") << r.out;
  EXPECT_LT(report_number(rep, "align_rms"), 1e-6);
  EXPECT_EQ(rep.at("align_kept"), "800");
  EXPECT_LT(report_number(rep, "rms"), 1e-6);
  EXPECT_EQ(rep.at("within"), "800 (100.00 %)");
  // The transform's four rows: the inverse motion, R^T (x - shift).
  const size_t at = r.out.find("\ntransform");
  ASSERT_NE(at, std::string::npos) << r.out;
  std::istringstream rows(r.out.substr(at + 10));
  double m[16];
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(rows >> m[i]) << r.out;
  }
  for (int i = 0; i < 3; ++i) {
    double back = 0;
    for (int j = 0; j < 3; ++j) {
      EXPECT_NEAR(m[4 * i + j], rot[3 * j + i], 1e-6) << i << j;
      back -= rot[3 * j + i] * shift[j];
    }
    EXPECT_NEAR(m[4 * i + 3], back, 1e-6) << i;
  }
  EXPECT_EQ(m[12], 0);
  EXPECT_EQ(m[15], 1);
  const DeviationPly got = read_deviation_ply(ply, true, 800);
  for (int i = 0; i < 800; ++i) EXPECT_LT(std::fabs(got.d[i]), 1e-6) << i;

  // Bad values of the alignment's options.
  EXPECT_NE(run_cli(args + " --align --align-keep 0").rc, 0);
  EXPECT_NE(run_cli(args + " --align --align-iterations 0").rc, 0);
}

// ---- normals and outliers: neighbourhood statistics of a cloud ------------------------------
// The tool's files against the library's own calls (knn_index_normals,
// knn_index_statistical_inliers, knn_index_radius_inliers on the OpenMP
// engine) bit for bit, and against what the geometry says: a sphere's
// normals are radial (inward towards its centre as a viewpoint, outward
// when oriented over the closed surface), planted outliers are dropped.
namespace {

// Points spread evenly over a sphere (a Fibonacci lattice): neighbourhoods
// symmetric enough that each PCA normal is radial to within a few mrad.
std::vector<double> sphere_points(int n, double radius, const std::array<double, 3>& c) {
  std::vector<double> xyz;
  const double golden = std::acos(-1.0) * (3.0 - std::sqrt(5.0));
  for (int i = 0; i < n; ++i) {
    const double z = 1.0 - 2.0 * (i + 0.5) / n, r = std::sqrt(1.0 - z * z), t = golden * i;
    xyz.push_back(c[0] + radius * r * std::cos(t));
    xyz.push_back(c[1] + radius * r * std::sin(t));
    xyz.push_back(c[2] + radius * z);
  }
  return xyz;
}

// A PLY as the tool writes it: binary little endian, one vertex element of
// the named float or double properties; rows of values as doubles.
std::vector<std::vector<double>> read_stats_ply(const std::string& path,
                                                const std::vector<std::string>& props, bool f64,
                                                int64_t n) {
  const std::string s = slurp(path);
  const char* t = f64 ? "double" : "float";
  std::string header = "element vertex " + std::to_string(n) + "\n";
  for (const std::string& p : props) header += std::string("property ") + t + " " + p + "\n";
  header += "end_header\n";
  std::vector<std::vector<double>> rows;
  EXPECT_EQ(s.rfind("ply\nformat binary_little_endian 1.0\n", 0), 0u);
  const size_t at = s.find(header);
  EXPECT_NE(at, std::string::npos) << s.substr(0, 400);
  if (at == std::string::npos) return rows;
  const size_t body = at + header.size(), scalar = f64 ? 8 : 4;
  EXPECT_EQ(s.size(), body + static_cast<size_t>(n) * props.size() * scalar);
  if (s.size() != body + static_cast<size_t>(n) * props.size() * scalar) return rows;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> row;
    for (size_t c = 0; c < props.size(); ++c) {
      const char* p = s.data() + body + (static_cast<size_t>(i) * props.size() + c) * scalar;
      if (f64) {
        double v;
        std::memcpy(&v, p, 8);
        row.push_back(v);
      } else {
        float v;
        std::memcpy(&v, p, 4);
        row.push_back(v);
      }
    }
    rows.push_back(row);
  }
  return rows;
}

struct IndexFree {
  void operator()(knn_index* p) const { knn_index_free(p); }
};

// The library's normals of a cloud (OpenMP), in float32 or float64.
void library_normals(const std::vector<double>& xyz, int k, const double* viewpoint, bool f64,
                     std::vector<double>* normals, std::vector<double>* curvature) {
  const int64_t n = static_cast<int64_t>(xyz.size() / 3);
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  knn_index* raw = nullptr;
  if (f64) {
    ASSERT_EQ(knn_index_build_f64(xyz.data(), n, 3, &opt, &raw), KNN_OK) << knn_last_error();
    const std::unique_ptr<knn_index, IndexFree> index(raw);
    normals->assign(static_cast<size_t>(n) * 3, 0);
    curvature->assign(static_cast<size_t>(n), 0);
    ASSERT_EQ(knn_index_normals_f64(raw, k, viewpoint, normals->data(), curvature->data(), &opt),
              KNN_OK)
        << knn_last_error();
    return;
  }
  const std::vector<float> p(xyz.begin(), xyz.end());
  ASSERT_EQ(knn_index_build(p.data(), n, 3, &opt, &raw), KNN_OK) << knn_last_error();
  const std::unique_ptr<knn_index, IndexFree> index(raw);
  std::vector<float> nrm(static_cast<size_t>(n) * 3), cur(static_cast<size_t>(n));
  float v[3];
  if (viewpoint)
    for (int i = 0; i < 3; ++i) v[i] = static_cast<float>(viewpoint[i]);
  ASSERT_EQ(knn_index_normals(raw, k, viewpoint ? v : nullptr, nrm.data(), cur.data(), &opt),
            KNN_OK)
      << knn_last_error();
  normals->assign(nrm.begin(), nrm.end());
  curvature->assign(cur.begin(), cur.end());
}

// The ids the library keeps (statistical rule with k > 0, else radius).
std::vector<int32_t> library_inliers(const std::vector<double>& xyz, int k, double std_ratio,
                                     double radius, int64_t min_neighbours) {
  const int64_t n = static_cast<int64_t>(xyz.size() / 3);
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  const std::vector<float> p(xyz.begin(), xyz.end());
  knn_index* raw = nullptr;
  EXPECT_EQ(knn_index_build(p.data(), n, 3, &opt, &raw), KNN_OK) << knn_last_error();
  const std::unique_ptr<knn_index, IndexFree> index(raw);
  std::vector<int32_t> kept(static_cast<size_t>(n));
  int64_t count = -1;
  const int st = k > 0 ? knn_index_statistical_inliers(raw, k, std_ratio, kept.data(), &count, &opt)
                       : knn_index_radius_inliers(raw, static_cast<float>(radius), min_neighbours,
                                                  kept.data(), &count, &opt);
  EXPECT_EQ(st, KNN_OK) << knn_last_error();
  kept.resize(static_cast<size_t>(std::max<int64_t>(count, 0)));
  return kept;
}

void write_points64(const std::string& path, const std::vector<double>& xyz) {
  std::string body;
  for (const double v : xyz) append_le<double>(&body, v);
  write_bytes(path, npy_bytes("<f8", "(" + std::to_string(xyz.size() / 3) + ", 3)", body));
}

}  // namespace

TEST(CliNormals, SphereNormalsAreRadialAndMatchTheLibrary) {
  const std::array<double, 3> c = {1.5, -2.0, 0.25};
  const std::vector<double> xyz = sphere_points(1500, 2.0, c);
  write_points64(path_of("sphere.npy"), xyz);
  const int64_t n = 1500;
  for (const bool f64 : {false, true}) {
    for (const bool towards_centre : {true, false}) {
      SCOPED_TRACE(std::string(f64 ? "f64" : "f32") + (towards_centre ? ", viewpoint" : ""));
      const std::string out = path_of("normals.ply");
      std::remove(out.c_str());
      const RunResult r =
          run_cli("normals '" + path_of("sphere.npy") + "' '" + out + "' --k 12 --backend openmp" +
                  (f64 ? " --f64" : "") + (towards_centre ? " --viewpoint 1.5,-2,0.25" : ""));
      ASSERT_EQ(r.rc, 0) << r.err;
      EXPECT_EQ(r.err, "");
      EXPECT_NE(r.out.find("normals of 1500 points, k=12, " +
                           std::string(f64 ? "float64" : "float32") + ", openmp"),
                std::string::npos)
          << r.out;
      const auto rows = read_stats_ply(out, {"x", "y", "z", "nx", "ny", "nz", "curvature"}, f64, n);
      ASSERT_EQ(rows.size(), static_cast<size_t>(n));
      std::vector<double> normals, curvature;
      library_normals(xyz, 12, towards_centre ? c.data() : nullptr, f64, &normals, &curvature);
      double worst = 0;
      for (int64_t i = 0; i < n; ++i) {
        const auto& row = rows[static_cast<size_t>(i)];
        for (int d = 0; d < 3; ++d) {
          EXPECT_EQ(row[d], f64 ? xyz[i * 3 + d] : static_cast<float>(xyz[i * 3 + d]));
          EXPECT_EQ(row[3 + d], normals[i * 3 + d]) << i;
        }
        EXPECT_EQ(row[6], curvature[i]) << i;
        // Radial: the normal along p - c, inward with the centre as viewpoint.
        double dot = 0;
        for (int d = 0; d < 3; ++d) dot += row[3 + d] * (row[d] - c[d]) / 2.0;
        worst = std::max(worst, std::acos(std::min(1.0, std::fabs(dot))));
        EXPECT_TRUE(towards_centre ? dot < 0 : dot > 0) << i << " " << dot;
        EXPECT_GE(row[6], 0);
        EXPECT_LT(row[6], 0.01);
      }
      EXPECT_LT(worst, 0.05);
    }
  }
}

// Text output (a header naming the columns, which the readers take back) and
// every input format the tool reads; --progress lines on a non-terminal.
TEST(CliNormals, TextOutputInputFormatsAndProgress) {
  const std::vector<double> xyz = sphere_points(400, 1.0, {0, 0, 0});
  const std::vector<float> pts(xyz.begin(), xyz.end());
  write_text(path_of("s.xyz"), pts, " ", nullptr);
  write_ply_ascii(path_of("s.ply"), pts);
  write_raw(path_of("s.bin"), pts);
  std::string want;
  for (const char* in : {"s.xyz", "s.ply", "s.bin"}) {
    SCOPED_TRACE(in);
    const RunResult r = run_cli("normals '" + path_of(in) + "' '" + path_of("n.xyz") +
                                "' --k 10 --viewpoint 0,0,0 --progress");
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const char* stage :
         {"reading ", "building the index of 400 points (auto, float32)",
          "normals of 400 points, k=10, towards the viewpoint", "writing ", "done"})
      EXPECT_NE(r.err.find(stage), std::string::npos) << stage << "\n" << r.err;
    const std::string text = slurp(path_of("n.xyz"));
    EXPECT_EQ(text.rfind("x y z nx ny nz curvature\n", 0), 0u);
    if (want.empty()) want = text;
    EXPECT_EQ(text, want);
  }
  std::vector<double> normals, curvature;
  const double origin[3] = {0, 0, 0};
  library_normals(xyz, 10, origin, false, &normals, &curvature);
  std::istringstream lines(want);
  std::string line;
  std::getline(lines, line);
  for (size_t i = 0; i < 400; ++i) {
    ASSERT_TRUE(std::getline(lines, line));
    std::istringstream row(line);
    double v[7];
    for (double& x : v) row >> x;
    for (int d = 0; d < 3; ++d) EXPECT_EQ(static_cast<float>(v[3 + d]), normals[i * 3 + d]);
    EXPECT_EQ(static_cast<float>(v[6]), curvature[i]);
  }
}

TEST(CliNormals, BadArgumentsFailCleanly) {
  write_bytes(path_of("few.xyz"), "0 0 0\n1 0 0\n0 1 0\n");
  const std::string in = " '" + path_of("few.xyz") + "'";
  const struct {
    std::string args, expect;
  } cases[] = {
      {"normals" + in + " '" + path_of("n.npy") + "'", "must end in .ply, .xyz, .txt or .csv"},
      {"normals" + in + " '" + path_of("n.ply") + "' --k 0", "--k"},
      {"normals" + in + " '" + path_of("n.ply") + "' --viewpoint 1,2", "--viewpoint"},
      {"normals" + in + " '" + path_of("n.ply") + "' --viewpoint 1,nan,2", "finite"},
      {"normals '" + path_of("missing.xyz") + "' '" + path_of("n.ply") + "'", "cannot open"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const RunResult r = run_cli(c.args);
    EXPECT_NE(r.rc, 0);
    EXPECT_LT(r.rc, 1000);
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
  }
  // A 2-D file is no cloud of 3-D points.
  write_bytes(path_of("flat.csv"), "1,2\n3,4\n");
  const RunResult r = run_cli("normals '" + path_of("flat.csv") + "' '" + path_of("n.ply") + "'");
  EXPECT_EQ(r.rc, 1) << r.err;
}

TEST(CliNormals, CudaBackendAnswersAsOpenMp) {
  const std::vector<double> xyz = sphere_points(3000, 1.0, {0, 0, 0});
  write_points64(path_of("cu_sphere.npy"), xyz);
  for (const char* precision : {"", " --f64"}) {
    SCOPED_TRACE(precision);
    auto run = [&](const char* backend, const char* orient) {
      return run_cli("normals '" + path_of("cu_sphere.npy") + "' '" +
                     path_of(std::string(backend) + ".ply") + "' --k 16 --backend " + backend +
                     precision + orient);
    };
    for (const char* orient : {"", " --viewpoint 0,0,3"}) {
      const RunResult cpu = run("openmp", orient);
      ASSERT_EQ(cpu.rc, 0) << cpu.err;
      const RunResult gpu = run("cuda", orient);
      if (cuGetDeviceCount() == 0) {
        EXPECT_EQ(gpu.rc, 1);
        EXPECT_NE(gpu.err.find("KNN_ERR_NO_DEVICE"), std::string::npos) << gpu.err;
        continue;
      }
      ASSERT_EQ(gpu.rc, 0) << gpu.err;
      EXPECT_EQ(slurp(path_of("cuda.ply")), slurp(path_of("openmp.ply")));
    }
  }
}

// A noisy sphere with points planted far off it: the statistical rule drops
// every planted one and keeps what the library keeps; the kept points are
// written in input order, the counts printed.
TEST(CliOutliers, StatisticalAndRadiusRulesDropPlantedOutliers) {
  std::vector<double> xyz = sphere_points(2000, 1.0, {0, 0, 0});
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(0.0, 0.003);
  for (double& v : xyz) v += noise(rng);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<size_t> planted;
  for (int i = 0; i < 30; ++i) {
    std::array<double, 3> p = {u(rng), u(rng), u(rng)};
    const double len = std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]) + 1e-9;
    const double at = 1.6 + 0.8 * (u(rng) + 1) / 2;        // 1.6 .. 2.4 from the centre
    const size_t slot = static_cast<size_t>(i) * 60 + 17;  // spread among the sphere's points
    xyz.insert(xyz.begin() + static_cast<std::ptrdiff_t>(slot * 3),
               {p[0] / len * at, p[1] / len * at, p[2] / len * at});
    planted.push_back(slot);
  }
  const int64_t n = static_cast<int64_t>(xyz.size() / 3);
  write_points64(path_of("noisy.npy"), xyz);
  const struct {
    std::string args;
    int k;
    double radius;
    int64_t min_neighbours;
  } rules[] = {{"--k 16 --std 2.0", 16, 0, 0},
               {"--k 8 --std 1", 8, 0, 0},
               {"--radius 0.15 --min-neighbours 4", 0, 0.15, 4},
               {"--radius 0.15 --min-neighbors 0", 0, 0.15, 0}};
  for (const auto& rule : rules) {
    SCOPED_TRACE(rule.args);
    const std::string out = path_of("kept.ply");
    const RunResult r = run_cli("outliers '" + path_of("noisy.npy") + "' '" + out + "' " +
                                rule.args + " --backend openmp");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "");
    const std::vector<int32_t> want = library_inliers(
        xyz, rule.k, rule.k ? std::stod(rule.args.substr(rule.args.find("--std") + 6)) : 0,
        rule.radius, rule.min_neighbours);
    const int64_t kept = static_cast<int64_t>(want.size());
    EXPECT_EQ(r.out.rfind("kept " + std::to_string(kept) + " of " + std::to_string(n) +
                              " points, dropped " + std::to_string(n - kept) + " (",
                          0),
              0u)
        << r.out;
    const auto rows = read_stats_ply(out, {"x", "y", "z"}, false, kept);
    ASSERT_EQ(rows.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      for (int d = 0; d < 3; ++d)
        ASSERT_EQ(rows[i][d], static_cast<float>(xyz[static_cast<size_t>(want[i]) * 3 + d])) << i;
    if (rule.min_neighbours == 0 && rule.k == 0) {
      EXPECT_EQ(kept, n);  // at least 0 others: every point
      continue;
    }
    for (const size_t p : planted)
      EXPECT_FALSE(std::binary_search(want.begin(), want.end(), static_cast<int32_t>(p))) << p;
    EXPECT_GT(kept, n / 2);
  }
  // --f64 computes in double, and a text output names its columns.
  const RunResult r = run_cli("outliers '" + path_of("noisy.npy") + "' '" + path_of("kept.csv") +
                              "' --k 16 --f64 --progress");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("; float64, "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("statistical outliers of " + std::to_string(n) + " points, k=16"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(slurp(path_of("kept.csv")).rfind("x,y,z\n", 0), 0u);
}

TEST(CliOutliers, BadArgumentsFailCleanly) {
  write_bytes(path_of("o.xyz"), "0 0 0\n1 0 0\n0 1 0\n");
  const std::string io = " '" + path_of("o.xyz") + "' '" + path_of("o_out.ply") + "'";
  const struct {
    std::string args, expect;
  } cases[] = {
      {"outliers" + io, "give one rule"},
      {"outliers" + io + " --k 0", "--k"},
      {"outliers" + io + " --std 2", "--std"},
      {"outliers" + io + " --k 4 --std inf", "--std"},
      {"outliers" + io + " --radius 1", "--min-neighbours"},
      {"outliers" + io + " --min-neighbours 2", "--radius"},
      {"outliers" + io + " --radius -1 --min-neighbours 2", "--radius"},
      {"outliers" + io + " --radius 1 --min-neighbours -2", "--min-neighbours"},
      {"outliers" + io + " --k 4 --radius 1 --min-neighbours 2", "excludes"},
      {"outliers '" + path_of("o.xyz") + "' '" + path_of("o.stl") + "' --k 2", ".ply"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const RunResult r = run_cli(c.args);
    EXPECT_NE(r.rc, 0);
    EXPECT_LT(r.rc, 1000);
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
  }
  // --k beyond the cloud takes what there is: every point of 3 equally spread.
  const RunResult r = run_cli("outliers" + io + " --k 10");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("kept 3 of 3 points, dropped 0 (", 0), 0u) << r.out;
}
