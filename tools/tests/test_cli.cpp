// test_cli.cpp - the knn-gpgpu tool run as a user runs it, its results compared
// with the library's own API (mpBuildKdTree + mpQueryAll for indices,
// knn_brute_force for squared distances). File writers and output parsers
// here are written independently of the tool's own reader code.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
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
  const std::string cmd = std::string("'") + KNN_CLI_PATH + "' " + args + " >'" + o + "' 2>'" + e + "'";
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
  std::string h = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " +
                  shape + ", }";
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
  write_bytes(path, npy_bytes(f64 ? "<f8" : "<f4", "(" + std::to_string(xyz.size() / 3) + ", 3)", body));
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

// Binary little-endian PLY with double coordinates, an element before the
// vertices (with a list) and one after.
std::string ply_binary_bytes(const std::vector<float>& xyz) {
  const size_t n = xyz.size() / 3;
  std::string s =
      "ply\nformat binary_little_endian 1.0\nelement camera 1\nproperty float view\n"
      "property list uchar short tags\nelement vertex " +
      std::to_string(n) +
      "\nproperty double x\nproperty uchar flag\nproperty double y\nproperty double z\n"
      "property float intensity\nelement face 1\nproperty list uchar int vertex_indices\n"
      "end_header\n";
  append_le<float>(&s, 1.0f);
  append_le<uint8_t>(&s, 2);
  append_le<int16_t>(&s, 7);
  append_le<int16_t>(&s, 8);
  for (size_t i = 0; i < n; ++i) {
    append_le<double>(&s, xyz[i * 3]);
    append_le<uint8_t>(&s, static_cast<uint8_t>(i));
    append_le<double>(&s, xyz[i * 3 + 1]);
    append_le<double>(&s, xyz[i * 3 + 2]);
    append_le<float>(&s, 0.5f);
  }
  append_le<uint8_t>(&s, 3);
  for (int v = 0; v < 3; ++v) append_le<int32_t>(&s, v);
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
std::vector<int> library_knn(const std::vector<float>& ref, const std::vector<float>& query, int k) {
  const int n = static_cast<int>(ref.size() / 3), m = static_cast<int>(query.size() / 3);
  std::vector<Node> tree(static_cast<size_t>(n > 0 ? n : 1));
  EXPECT_EQ(mpBuildKdTree(reinterpret_cast<const Point*>(ref.data()), n, tree.data()), KNN_OK);
  std::vector<int> res(static_cast<size_t>(m) * k);
  EXPECT_EQ(mpQueryAll(reinterpret_cast<const Point*>(query.data()), tree.data(), m, n, k,
                       res.data()),
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
    {"pts.xyz", [](const std::string& p, const std::vector<float>& v) { write_text(p, v, " ", nullptr); }},
    {"pts.txt", [](const std::string& p, const std::vector<float>& v) { write_text(p, v, "\t", "x\ty\tz"); }},
    {"pts.csv", [](const std::string& p, const std::vector<float>& v) { write_text(p, v, ",", "x,y,z"); }},
    {"pts_ascii.ply", write_ply_ascii},
    {"pts_bin.ply", [](const std::string& p, const std::vector<float>& v) { write_bytes(p, ply_binary_bytes(v)); }},
    {"pts32.npy", [](const std::string& p, const std::vector<float>& v) { write_npy(p, v, false); }},
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
      const RunResult r = run_cli("knn --ref '" + rp + "' --query '" + qp + "' --k 6 --out '" + out +
                                  "' --distances --backend " + backend);
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

TEST(Cli, CsvOutputParsesBack) {
  const std::vector<float> ref = random_points(40, 3), query = random_points(9, 4);
  write_text(path_of("c_ref.xyz"), ref, " ", nullptr);
  write_text(path_of("c_q.csv"), query, ",", nullptr);
  const int k = 4;
  const std::vector<int> want = library_knn(ref, query, k);
  std::vector<int> bf;
  const std::vector<float> want_d = library_dist(ref, query, k, &bf);
  const std::string out = path_of("c_out.csv");
  RunResult r = run_cli("knn --ref '" + path_of("c_ref.xyz") + "' --query '" + path_of("c_q.csv") +
                        "' --k 4 --distances --out '" + out + "'");
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
  r = run_cli("knn --ref '" + path_of("c_ref.xyz") + "' --query '" + path_of("c_q.csv") +
              "' --k 4 --out '" + out + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  c = read_csv(out);
  EXPECT_EQ(c.header.size(), 4u);
  ASSERT_EQ(c.rows.size(), 9u);
  EXPECT_EQ(c.rows[0].size(), 4u);
}

TEST(Cli, FewerPointsThanKGivesMinusOneAndInfinity) {
  const std::vector<float> ref = {0, 0, 0, 1, 0, 0};
  write_text(path_of("few.xyz"), ref, " ", nullptr);
  const RunResult r = run_cli("knn --ref '" + path_of("few.xyz") + "' --self --k 3 --distances --out '" +
                              path_of("few.csv") + "'");
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
  RunResult r = run_cli("knn --ref '" + path_of("dup.xyz") + "' --self --exclude-self --k 2 --distances --out '" +
                        path_of("dup.csv") + "'");
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
  cases.push_back({"cols4.csv", "x,y,z\n1,2,3,4\n", "line 2"});
  cases.push_back({"word.txt", "1 2 3\n1 b 3\n", "line 2"});
  cases.push_back({"nan.xyz", "1 2 3\n4 5 6\n7 nan 9\n", "point 2"});
  cases.push_back({"inf.csv", "1,2,3\ninf,5,6\n", "point 1"});
  {
    std::string ply = ply_binary_bytes(pts);
    cases.push_back({"trunc_bin.ply", ply.substr(0, ply.size() - 40), "truncated"});
  }
  {
    std::string s = "ply\nformat ascii 1.0\nelement vertex 5\nproperty float x\nproperty float y\n"
                    "property float z\nend_header\n1 2 3\n4 5 6\n";
    cases.push_back({"trunc_ascii.ply", s, "truncated"});
  }
  cases.push_back({"trunc_header.ply", "ply\nformat ascii 1.0\nelement vertex 5\nproperty float x\n",
                   "end_header"});
  cases.push_back({"noz.ply",
                   "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n"
                   "end_header\n1 2\n",
                   "'z'"});
  cases.push_back({"be.ply",
                   "ply\nformat binary_big_endian 1.0\nelement vertex 1\nproperty float x\n"
                   "property float y\nproperty float z\nend_header\n0123456789ab",
                   "big_endian"});
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
  EXPECT_NE(r.err.find("KNN_ERR_NONFINITE_INPUT"), std::string::npos) << r.err;
  // Bad output name, bad k, bad backend.
  r = run_cli("knn --ref '" + path_of("good.xyz") + "' --self --k 2 --out '" + path_of("o.txt") + "'");
  EXPECT_EQ(r.rc, 1);
  r = run_cli("knn --ref '" + path_of("good.xyz") + "' --self --k 0 --out '" + path_of("o.npy") + "'");
  EXPECT_NE(r.rc, 0);
  EXPECT_LT(r.rc, 1000);
  r = run_cli("knn --ref '" + path_of("good.xyz") + "' --self --k 2 --backend metal --out '" +
              path_of("o.npy") + "'");
  EXPECT_NE(r.rc, 0);
  EXPECT_LT(r.rc, 1000);
}

TEST(Cli, CudaBackendWithoutDeviceFailsCleanly) {
  if (cuGetDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  write_text(path_of("cu.xyz"), random_points(10, 7), " ", nullptr);
  const RunResult r = run_cli("knn --ref '" + path_of("cu.xyz") + "' --self --k 2 --backend cuda --out '" +
                              path_of("cu.npy") + "'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("KNN_ERR_NO_DEVICE"), std::string::npos) << r.err;
}

TEST(Cli, RadiusAndPipReportUnsupported) {
  for (const char* sub : {"radius", "pip"}) {
    SCOPED_TRACE(sub);
    const RunResult r = run_cli(sub);
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_NE(r.err.find("KNN_ERR_UNSUPPORTED"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("not in this release"), std::string::npos) << r.err;
  }
}

// ---- bench ---------------------------------------------------------------------------
#if KNN_CLI_HAVE_JSON
// The classic suite at two tiny sizes: a valid JSON document with one timed
// build and one timed query per backend this machine has, medians within
// the runs, and item rates that follow from them.
TEST(CliBench, ClassicSuiteWritesValidJson) {
  const std::string out = path_of("bench_classic.json");
  const RunResult r = run_cli("bench classic --sizes 300,1001 --repeats 3 --warmup 1 --k 5 --out '" + out + "'");
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

// Suites whose engines are not in this release still write a document,
// with each refused measurement's status and message.
TEST(CliBench, UnsupportedSuitesRecordTheStatus) {
  for (const char* suite : {"index", "pip"}) {
    SCOPED_TRACE(suite);
    const RunResult r = run_cli(std::string("bench ") + suite + " --sizes 500 --repeats 1");
    ASSERT_EQ(r.rc, 0) << r.err;
    const nlohmann::json doc = nlohmann::json::parse(r.out);
    ASSERT_FALSE(doc.at("results").empty());
    for (const nlohmann::json& rec : doc.at("results")) {
      const std::string status = rec.at("status");
      if (status == "KNN_OK") {
        EXPECT_GT(rec.at("median_s").get<double>(), 0.0) << rec.dump();
      } else {
        EXPECT_TRUE(status == "KNN_ERR_UNSUPPORTED" || status == "KNN_ERR_NO_DEVICE") << rec.dump();
        EXPECT_FALSE(rec.at("error").get<std::string>().empty()) << rec.dump();
      }
    }
  }
}

TEST(CliBench, BadArgumentsAreRefused) {
  EXPECT_NE(run_cli("bench nosuch").rc, 0);
  EXPECT_NE(run_cli("bench classic --repeats 0").rc, 0);
  const RunResult r = run_cli("bench classic --sizes 0");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("--sizes"), std::string::npos) << r.err;
}
#endif
