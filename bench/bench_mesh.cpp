// The mesh calls (issue 48) timed through the public API: knn_mesh_build and
// knn_mesh_closest / knn_mesh_signed_distance, float32 and float64, on the
// CUDA and the OpenMP backends, from host arrays and (CUDA) device arrays.
// The same data and the same RESULT lines as the peer drivers
// (bench/peers_mesh), so that scripts/mesh-peers.sh and mesh-peers-cpu.sh
// put everything in one table.
//
//   bench_mesh DIR MESH N [N ...] [--repeats R] [--backend cuda|openmp|all]
//              [--closest-only]
//
// MESH is a spec of bench/mesh_datasets.h (torus-1e6, bumpy-1e6, PATH.off);
// the mesh, its scans of N points and their oracles are written to DIR when
// not there yet (bench_mesh_data does the same without the library). For each
// contender the mesh is built once (build ms; timing as the peers', peers_mesh/peer_driver.h)
// and each scan answered (query ms), max_distance +infinity; the distances of
// the oracle's 1000 samples must match the float64 brute force within
// 1e-5 (float32) or 1e-12 (float64) of (bounding-box diagonal + distance).
// Contenders:
//   ours-<b>             float32 closest (triangle ids and squared distances)
//   ours-<b>-f64         the same in float64 (vertices and points widened)
//   ours-<b>-signed      float32 signed distance (with triangle ids)
//   ours-<b>-f64-signed  float64 signed distance
//   ours-cuda-dev        float32 closest, points and outputs in device memory
// <b> is cuda or omp. Host wall clock (steady_clock) around each call: the
// calls return when their results are in place. Widening to float64 and
// copying points to the device are not timed.
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <string>
#include <vector>

#ifdef KNN_BENCH_DEVICE_ARRAYS
#include <cuda_runtime.h>
#endif

#include "check_status.h"
#include "knn_gpgpu.h"
#include "peers_mesh/peer_driver.h"

namespace {

using knn_bench::check_status;
using namespace knn_bench::mesh;

// The API of one scalar.
int build(const float* v, int64_t nv, const int32_t* t, int64_t nt, const knn_options* opt,
          knn_mesh** out) {
  return knn_mesh_build(v, nv, t, nt, opt, out);
}
int build(const double* v, int64_t nv, const int32_t* t, int64_t nt, const knn_options* opt,
          knn_mesh** out) {
  return knn_mesh_build_f64(v, nv, t, nt, opt, out);
}
int closest(const knn_mesh* mesh, const float* p, int64_t m, int32_t* ids, float* sq,
            const knn_options* opt) {
  return knn_mesh_closest(mesh, p, m, std::numeric_limits<float>::infinity(), ids, sq, nullptr,
                          nullptr, opt);
}
int closest(const knn_mesh* mesh, const double* p, int64_t m, int32_t* ids, double* sq,
            const knn_options* opt) {
  return knn_mesh_closest_f64(mesh, p, m, std::numeric_limits<double>::infinity(), ids, sq, nullptr,
                              nullptr, opt);
}
int signed_distance(const knn_mesh* mesh, const float* p, int64_t m, int32_t* ids, float* d,
                    const knn_options* opt) {
  return knn_mesh_signed_distance(mesh, p, m, std::numeric_limits<float>::infinity(), d, ids, opt);
}
int signed_distance(const knn_mesh* mesh, const double* p, int64_t m, int32_t* ids, double* d,
                    const knn_options* opt) {
  return knn_mesh_signed_distance_f64(mesh, p, m, std::numeric_limits<double>::infinity(), d, ids,
                                      opt);
}

struct Contender {
  std::string name;
  int backend;
  bool signed_distance;
  bool device_arrays;
};

template <class S>
std::vector<S> widened(const std::vector<float>& values) {
  return std::vector<S>(values.begin(), values.end());
}

#ifdef KNN_BENCH_DEVICE_ARRAYS
template <class T>
T* device_copy(const std::vector<T>& host, size_t count) {
  void* p = nullptr;
  if (cudaMalloc(&p, count * sizeof(T)) != cudaSuccess) throw std::runtime_error("cudaMalloc");
  if (!host.empty() &&
      cudaMemcpy(p, host.data(), count * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess)
    throw std::runtime_error("cudaMemcpy");
  return static_cast<T*>(p);
}
template <class T>
void copy_back(std::vector<T>& host, const T* device) {
  if (cudaMemcpy(host.data(), device, host.size() * sizeof(T), cudaMemcpyDeviceToHost) !=
      cudaSuccess)
    throw std::runtime_error("cudaMemcpy");
}
#endif

// Builds on one backend once, answers every scan; one RESULT line per scan.
template <class S>
void run_contender(const DriverArgs& args, const Mesh& mesh, const Contender& c) {
  const std::vector<S> vertices = widened<S>(mesh.vertices);
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = c.backend;
  knn_mesh* handle = nullptr;
  auto free_mesh = [&] {
    knn_mesh_free(handle);
    handle = nullptr;
  };
  const double build_ms = timed_ms(
      args.repeats,
      [&] {
        check_status(build(vertices.data(), mesh.n_vertices(), mesh.triangles.data(),
                           mesh.n_triangles(), &opt, &handle),
                     "knn_mesh_build");
      },
      free_mesh);
  const double relative = sizeof(S) == sizeof(float) ? 1e-5 : 1e-12;
  for (const int64_t n : args.scan_sizes) {
    const Row row = read_row(args.dir, mesh.name, n);
    const std::vector<S> points = widened<S>(row.scan);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    std::vector<S> values(static_cast<size_t>(n));  // squared or signed distances
    const S* p = points.data();
    int32_t* out_ids = ids.data();
    S* out_values = values.data();
#ifdef KNN_BENCH_DEVICE_ARRAYS
    if (c.device_arrays) {
      p = device_copy(points, points.size());
      out_ids = device_copy(std::vector<int32_t>(), ids.size());
      out_values = device_copy(std::vector<S>(), values.size());
    }
#endif
    const double query_ms = timed_ms(args.repeats, [&] {
      if (c.signed_distance)
        check_status(signed_distance(handle, p, n, out_ids, out_values, &opt),
                     "knn_mesh_signed_distance");
      else
        check_status(closest(handle, p, n, out_ids, out_values, &opt), "knn_mesh_closest");
    });
#ifdef KNN_BENCH_DEVICE_ARRAYS
    if (c.device_arrays) {
      copy_back(ids, out_ids);
      copy_back(values, out_values);
      cudaFree(const_cast<S*>(p));
      cudaFree(out_ids);
      cudaFree(out_values);
    }
#endif
    const Check check = check_against(row.oracle, mesh, relative, [&](int64_t i) {
      const double v = static_cast<double>(values[static_cast<size_t>(i)]);
      return c.signed_distance ? v * v : v;
    });
    print_result(row.name, c.name, build_ms, query_ms, check);
  }
  free_mesh();
}

std::vector<Contender> contenders(const std::string& backends, bool closest_only) {
  std::vector<Contender> list;
  const bool cuda = (backends == "all" || backends == "cuda") && cuGetDeviceCount() > 0;
  if (backends == "cuda" && !cuda) std::printf("# no CUDA device: the CUDA rows are skipped\n");
  const bool omp = backends == "all" || backends == "openmp";
  for (int b = 0; b < 2; ++b) {
    if (b == 0 ? !cuda : !omp) continue;
    const std::string base = b == 0 ? "ours-cuda" : "ours-omp";
    const int backend = b == 0 ? KNN_BACKEND_CUDA : KNN_BACKEND_OPENMP;
    list.push_back({base, backend, false, false});
#ifdef KNN_BENCH_DEVICE_ARRAYS
    if (b == 0) list.push_back({base + "-dev", backend, false, true});
#endif
    list.push_back({base + "-f64", backend, false, false});
    if (closest_only) continue;
    list.push_back({base + "-signed", backend, true, false});
    list.push_back({base + "-f64-signed", backend, true, false});
  }
  return list;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backends = "all";
  bool closest_only = false;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--backend" && i + 1 < argc)
      backends = argv[++i];
    else if (arg == "--closest-only")
      closest_only = true;
    else
      rest.push_back(argv[i]);
  }
  if (backends != "all" && backends != "cuda" && backends != "openmp") {
    std::fprintf(stderr, "%s: --backend takes cuda, openmp or all\n", argv[0]);
    return 2;
  }
  return run_driver(static_cast<int>(rest.size()), rest.data(), [&](DriverArgs args) {
    args.mesh = prepare_rows(args.dir, args.mesh, args.scan_sizes);
    const Mesh mesh = read_mesh(mesh_path(args.dir, args.mesh), args.mesh);
    std::printf("# %s: %lld vertices, %lld triangles\n", mesh.name.c_str(),
                static_cast<long long>(mesh.n_vertices()),
                static_cast<long long>(mesh.n_triangles()));
    for (const Contender& c : contenders(backends, closest_only)) {
      if (c.name.find("f64") != std::string::npos)
        run_contender<double>(args, mesh, c);
      else
        run_contender<float>(args, mesh, c);
    }
  });
}
