// The consistent orientation of normals (src/normal_orientation.*, the
// propagation of knn_index_normals without a viewpoint) against an oracle
// written here: Kruskal's algorithm over the same graph and edge order
// (weight, smaller id, larger id), a sequential union-find, each part's seed
// by a scan of the points, then a depth-first walk of the forest applying
// the sign rule. Bit for bit on random clouds, lattices and duplicates (many
// equal weights, dot products exactly 0), many parts, arbitrary lists (-1,
// self, a point listed by every other), NaN normals, n = 0, 1, 2, and the
// same bits on 1 and 2 threads. Also its cancellation and progress.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../../common/error.h"
#include "../../src/normal_orientation.h"
#include "knn_gpgpu.h"

namespace {

// One input of the orientation: normals (3 n), z (n), lists of g (n g).
struct Case {
  std::string name;
  std::vector<double> normals, z;
  std::vector<int32_t> neighbours;
  int g = 0;
};

double dot(const std::vector<double>& v, int64_t a, int64_t b) {
  return (v[3 * a] * v[3 * b] + v[3 * a + 1] * v[3 * b + 1]) + v[3 * a + 2] * v[3 * b + 2];
}

int64_t find_root(std::vector<int64_t>& up, int64_t i) {
  while (up[i] != i) i = up[i] = up[up[i]];
  return i;
}

std::vector<double> oracle(const Case& c) {
  std::vector<double> v = c.normals;
  const int64_t n = static_cast<int64_t>(c.z.size());
  struct Edge {
    double weight;
    int64_t low, high;
    bool operator<(const Edge& o) const {
      if (weight != o.weight) return weight < o.weight;
      return low != o.low ? low < o.low : high < o.high;
    }
  };
  std::vector<Edge> edges;
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < c.g; ++j) {
      const int64_t t = c.neighbours[static_cast<size_t>(i * c.g + j)];
      if (t < 0 || t == i) continue;
      const double weight = 1.0 - std::fabs(dot(v, i, t));
      edges.push_back({weight == weight ? weight : HUGE_VAL, std::min(i, t), std::max(i, t)});
    }
  std::sort(edges.begin(), edges.end());
  std::vector<int64_t> up(static_cast<size_t>(n));
  std::iota(up.begin(), up.end(), 0);
  std::vector<std::vector<int64_t>> tree(static_cast<size_t>(n));
  for (const Edge& e : edges) {
    const int64_t a = find_root(up, e.low), b = find_root(up, e.high);
    if (a == b) continue;
    up[a] = b;
    tree[e.low].push_back(e.high);
    tree[e.high].push_back(e.low);
  }
  // Seeds: the first point of largest z of each part, in index order.
  std::vector<int64_t> seed(static_cast<size_t>(n), -1);
  for (int64_t i = 0; i < n; ++i) {
    int64_t& s = seed[find_root(up, i)];
    if (s < 0 || c.z[i] > c.z[s]) s = i;
  }
  for (int64_t root = 0; root < n; ++root) {
    const int64_t s = seed[root];
    if (s < 0) continue;
    for (int axis = 2; axis >= 0; --axis) {
      if (v[3 * s + axis] == 0) continue;
      if (v[3 * s + axis] < 0)
        for (int d = 0; d < 3; ++d) v[3 * s + d] = -v[3 * s + d];
      break;
    }
    std::vector<std::pair<int64_t, int64_t>> stack{{s, -1}};  // (point, parent)
    while (!stack.empty()) {
      const auto [p, parent] = stack.back();
      stack.pop_back();
      for (const int64_t child : tree[p]) {
        if (child == parent) continue;
        if (dot(v, p, child) < 0)
          for (int d = 0; d < 3; ++d) v[3 * child + d] = -v[3 * child + d];
        stack.push_back({child, p});
      }
    }
  }
  return v;
}

std::vector<double> oriented(const Case& c, int threads) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  std::vector<double> v = c.normals;
  knn::orient_normals(v, c.z, c.neighbours, c.g, 0);
  omp_set_num_threads(saved);
  return v;
}

void expect_oracle(const Case& c) {
  const std::vector<double> want = oracle(c);
  for (const int threads : {1, 2}) {
    const std::vector<double> got = oriented(c, threads);
    ASSERT_EQ(got.size(), want.size());
    int64_t differ = 0, first = -1;
    for (size_t i = 0; i < got.size(); ++i)
      if (std::memcmp(&got[i], &want[i], sizeof(double)) != 0) {
        ++differ;
        if (first < 0) first = static_cast<int64_t>(i / 3);
      }
    EXPECT_EQ(differ, 0) << c.name << ", " << threads << " threads: first at point " << first;
  }
}

// The g nearest others of every point (the library's kd-tree: only the
// graph's input, the same for the oracle and the code under test).
std::vector<int32_t> nearest_others(const std::vector<double>& p, int g) {
  const int64_t n = static_cast<int64_t>(p.size() / 3);
  std::vector<int32_t> lists(static_cast<size_t>(n * g));
  if (n == 0 || g == 0) return lists;
  knn_index* raw = nullptr;
  EXPECT_EQ(knn_index_build_f64(p.data(), n, 3, nullptr, &raw), KNN_OK) << knn_last_error();
  const std::unique_ptr<knn_index, int (*)(knn_index*)> ix(raw, knn_index_free);
  EXPECT_EQ(knn_index_query_self_f64(ix.get(), g, 1, lists.data(), nullptr), KNN_OK)
      << knn_last_error();
  return lists;
}

Case cloud_case(std::string name, const std::vector<double>& p, std::vector<double> normals,
                int g) {
  Case c;
  c.name = std::move(name);
  c.g = g;
  c.normals = std::move(normals);
  for (size_t i = 2; i < p.size(); i += 3) c.z.push_back(p[i]);
  c.neighbours = nearest_others(p, g);
  return c;
}

// Random unit directions, each with a random sign.
std::vector<double> random_normals(int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> gauss;
  std::vector<double> v(static_cast<size_t>(3 * n));
  for (int64_t i = 0; i < n; ++i) {
    double x = gauss(rng), y = gauss(rng), z = gauss(rng);
    const double length = std::sqrt(x * x + y * y + z * z);
    v[3 * i] = x / length, v[3 * i + 1] = y / length, v[3 * i + 2] = z / length;
  }
  return v;
}

// A noisy sphere with its radial normals, each signed at random.
Case sphere_case(int64_t n, int g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> gauss;
  std::vector<double> p(static_cast<size_t>(3 * n)), normals(static_cast<size_t>(3 * n));
  for (int64_t i = 0; i < n; ++i) {
    double x = gauss(rng), y = gauss(rng), z = gauss(rng);
    const double length = std::sqrt(x * x + y * y + z * z);
    const double r = 1 + 0.01 * gauss(rng), sign = rng() % 2 ? 1.0 : -1.0;
    x /= length, y /= length, z /= length;
    p[3 * i] = r * x, p[3 * i + 1] = r * y, p[3 * i + 2] = r * z;
    const double tilt = 0.05 * gauss(rng);
    const double nx = x + tilt, ny = y - tilt, nz = z;
    const double nl = std::sqrt(nx * nx + ny * ny + nz * nz);
    normals[3 * i] = sign * nx / nl, normals[3 * i + 1] = sign * ny / nl,
                normals[3 * i + 2] = sign * nz / nl;
  }
  return cloud_case("sphere n " + std::to_string(n) + " g " + std::to_string(g), p, normals, g);
}

TEST(NormalOrientation, RandomCloudsMatchTheOracle) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  for (const int64_t n : {50, 700, 3000})
    for (const int g : {1, 3, 8}) {
      std::vector<double> p(static_cast<size_t>(3 * n));
      for (double& x : p) x = u(rng);
      expect_oracle(cloud_case("random cloud n " + std::to_string(n) + " g " + std::to_string(g), p,
                               random_normals(n, rng), g));
    }
  expect_oracle(sphere_case(2000, 8, 5));
}

// Large enough that every pass runs on both threads (runs of thousands of
// points), with wide levels in the spread.
TEST(NormalOrientation, LargeCloudsMatchTheOracle) {
  expect_oracle(sphere_case(40000, 8, 7));
  // 12000 separate triples: 12000 seeds, and levels of thousands of points.
  std::mt19937_64 rng(9);
  Case c;
  c.name = "12000 triples";
  c.g = 2;
  const int64_t n = 36000;
  c.normals = random_normals(n, rng);
  for (int64_t i = 0; i < n; ++i) {
    c.z.push_back(static_cast<double>(rng() % 5));
    const int64_t first = i - i % 3;
    c.neighbours.push_back(static_cast<int32_t>(first + (i + 1) % 3));
    c.neighbours.push_back(static_cast<int32_t>(first + (i + 2) % 3));
  }
  expect_oracle(c);
  // Passes longer than one run of 2^18 points (engine/cancel.h): 150000
  // stars of 3, the second level 300000 points wide, and random lists.
  Case stars;
  stars.name = "150000 stars";
  stars.g = 1;
  stars.normals = random_normals(450000, rng);
  for (int64_t i = 0; i < 450000; ++i) {
    stars.z.push_back(i % 3 ? 0.0 : 1.0);
    stars.neighbours.push_back(i % 3 ? static_cast<int32_t>(i - i % 3) : -1);
  }
  expect_oracle(stars);
  Case lists;
  lists.name = "random lists n 300000";
  lists.g = 2;
  lists.normals = random_normals(300000, rng);
  for (int64_t i = 0; i < 300000; ++i) {
    lists.z.push_back(static_cast<double>(rng() % 100));
    for (int j = 0; j < lists.g; ++j)
      lists.neighbours.push_back(static_cast<int32_t>(rng() % 300000));
  }
  expect_oracle(lists);
}

// Equal weights everywhere: the order's ids decide the forest.
TEST(NormalOrientation, LatticesAndDuplicatesMatchTheOracle) {
  std::mt19937_64 rng(11);
  std::vector<double> lattice;
  for (int x = 0; x < 20; ++x)
    for (int y = 0; y < 15; ++y)
      for (int z = 0; z < 6; ++z) lattice.insert(lattice.end(), {double(x), double(y), double(z)});
  const int64_t n = static_cast<int64_t>(lattice.size() / 3);
  // One normal up to sign: every weight 0.
  std::vector<double> up(static_cast<size_t>(3 * n), 0.0);
  for (int64_t i = 0; i < n; ++i) up[3 * i + 2] = rng() % 2 ? 1.0 : -1.0;
  // Axis normals: weights 0 and 1, dot products exactly 0 (the child keeps
  // its sign), seeds with z = 0 (signed by y, then x).
  std::vector<double> axes(static_cast<size_t>(3 * n), 0.0);
  for (int64_t i = 0; i < n; ++i) axes[3 * i + rng() % 3] = rng() % 2 ? 1.0 : -1.0;
  for (const int g : {2, 6}) {
    expect_oracle(cloud_case("lattice, one normal, g " + std::to_string(g), lattice, up, g));
    expect_oracle(cloud_case("lattice, axis normals, g " + std::to_string(g), lattice, axes, g));
  }
  // Duplicates: each of 300 points 5 times, copies with equal normals and z.
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> p, normals;
  const std::vector<double> distinct = random_normals(300, rng);
  for (int copy = 0; copy < 5; ++copy)
    for (int i = 0; i < 300; ++i) {
      std::mt19937_64 at(static_cast<uint64_t>(i));
      p.insert(p.end(), {u(at), u(at), std::floor(4 * u(at))});
      normals.insert(normals.end(), distinct.begin() + 3 * i, distinct.begin() + 3 * i + 3);
    }
  for (const int g : {3, 8})
    expect_oracle(cloud_case("duplicates g " + std::to_string(g), p, normals, g));
}

// Separate clusters (each its own part and seed) and points alone.
TEST(NormalOrientation, SeveralPartsMatchTheOracle) {
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> p;
  for (int cluster = 0; cluster < 40; ++cluster)
    for (int i = 0; i < 25 + cluster; ++i)
      p.insert(p.end(), {100.0 * cluster + u(rng), 50.0 * (cluster % 3) + u(rng), u(rng)});
  const int64_t n = static_cast<int64_t>(p.size() / 3);
  for (const int g : {0, 1, 4})
    expect_oracle(cloud_case("40 clusters g " + std::to_string(g), p, random_normals(n, rng), g));
}

// Lists as the function takes them, not only kNN: -1 (none), the point
// itself, repeats, and a point that every other lists (a row longer than
// any kNN row).
TEST(NormalOrientation, ArbitraryListsMatchTheOracle) {
  std::mt19937_64 rng(17);
  for (const int64_t n : {5, 200, 5000}) {
    Case c;
    c.name = "random lists n " + std::to_string(n);
    c.g = 4;
    c.normals = random_normals(n, rng);
    for (int64_t i = 0; i < n; ++i) {
      c.z.push_back(static_cast<double>(rng() % 7));
      for (int j = 0; j < c.g; ++j) {
        const int64_t pick = static_cast<int64_t>(rng() % static_cast<uint64_t>(n + 2)) - 1;
        c.neighbours.push_back(static_cast<int32_t>(pick == n ? i : pick));
      }
    }
    expect_oracle(c);
    Case hub = c;
    hub.name = "a hub, n " + std::to_string(n);
    for (int64_t i = 0; i < n; ++i) hub.neighbours[static_cast<size_t>(i * hub.g)] = 0;
    expect_oracle(hub);
  }
}

// NaN normals (the library writes none): their weights count as +infinity,
// so that the order stays total, and their dot products are not negative.
TEST(NormalOrientation, NanNormalsMatchTheOracle) {
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<double> u(0, 1);
  for (const int64_t n : {300, 20000}) {
    std::vector<double> p(static_cast<size_t>(3 * n));
    for (double& x : p) x = u(rng);
    std::vector<double> normals = random_normals(n, rng);
    for (int64_t i = 0; i < n; i += 7) normals[3 * i + rng() % 3] = std::nan("");
    expect_oracle(cloud_case("NaN normals n " + std::to_string(n), p, normals, 6));
  }
}

TEST(NormalOrientation, TinyInputsMatchTheOracle) {
  expect_oracle(Case{"n 0", {}, {}, {}, 3});
  expect_oracle(Case{"n 1, g 0", {0, 0, -1}, {2}, {}, 0});
  expect_oracle(Case{"n 1, g 1, none", {0.6, 0, -0.8}, {2}, {-1}, 1});
  expect_oracle(Case{"n 1, zero normal", {0, 0, 0}, {2}, {0}, 1});
  expect_oracle(Case{"n 2, opposed", {0, 0, 1, 0, 0, -1}, {0, 1}, {1, 0}, 1});
  expect_oracle(Case{"n 2, orthogonal", {0, -1, 0, -1, 0, 0}, {1, 1}, {1, -1}, 1});
  expect_oracle(Case{"n 2, apart", {0, 0, -1, 0, 0, -1}, {1, 1}, {-1, -1}, 1});
}

// Cancellation: a flag set before the call stops it (KNN_ERR_CANCELLED).
// Progress: n points added to the calling thread's record, whatever the parts.
TEST(NormalOrientation, CancellationAndProgress) {
  const Case c = sphere_case(3000, 8, 19);
  volatile int flag = 1;
  ASSERT_EQ(knn_set_cancel_flag(&flag), KNN_OK);
  std::vector<double> v = c.normals;
  try {
    knn::orient_normals(v, c.z, c.neighbours, c.g, 0);
    ADD_FAILURE() << "not cancelled";
  } catch (const knn::Error& e) {
    EXPECT_EQ(e.status(), KNN_ERR_CANCELLED);
  }
  ASSERT_EQ(knn_set_cancel_flag(nullptr), KNN_OK);
  for (const int g : {0, 8}) {
    knn_progress record{};
    ASSERT_EQ(knn_set_progress(&record), KNN_OK);
    v = c.normals;
    knn::orient_normals(v, c.z, g ? c.neighbours : std::vector<int32_t>{}, g, 0);
    EXPECT_EQ(record.done, 3000) << "g " << g;
    ASSERT_EQ(knn_set_progress(nullptr), KNN_OK);
  }
}

}  // namespace
