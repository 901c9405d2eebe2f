// cuBQL (header-only CUDA): its closest-point-on-any-triangle query
// (cuBQL::triangles::CPAT, float32) on a binary BVH from its GPU builders:
//   median    gpuBuilder, BuildConfig() (adaptive spatial median, leaves of 1)
//   median8   gpuBuilder, BuildConfig(8) (leaves of up to 8)
//   sah       gpuBuilder, BuildConfig().enableSAH()
//   radix     cuda::radixBuilder (Morton codes)
// Each builder gives two contenders:
//   cubql-<b>       host arrays in and out, as knn_mesh_build/closest take
//                   them: build = upload the vertices and triangles, gather
//                   them into cuBQL's Triangle array and boxes, build; query =
//                   upload the points, run, bring the ids and squared
//                   distances back.
//   cubql-<b>-dev   everything already on the device: build = gather + build;
//                   query = the query kernel alone.
// Host wall clock around synchronised work (the warm-up absorbs the
// context's start and cuBQL's memory pool).
#define CUBQL_GPU_BUILDER_IMPLEMENTATION 1
// cuBQL's builders need its BVH types first.
#include "cuBQL/bvh.h"

#include "cuBQL/builder/cuda.h"
#include "cuBQL/builder/cuda/radix.h"
#include "cuBQL/queries/triangleData/closestPointOnAnyTriangle.h"

#include <cuda_runtime.h>

#include <functional>
#include <stdexcept>

#include "peer_driver.h"

using namespace knn_bench::mesh;

namespace {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

template <class T>
T* device_array(size_t count) {
  T* p = nullptr;
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&p), count * sizeof(T)), "cudaMalloc");
  return p;
}

__global__ void gather_triangles(const cuBQL::vec3f* vertices, const cuBQL::vec3i* indices, int n,
                                 cuBQL::Triangle* triangles, cuBQL::box3f* boxes) {
  const int i = threadIdx.x + blockIdx.x * blockDim.x;
  if (i >= n) return;
  const cuBQL::vec3i t = indices[i];
  const cuBQL::Triangle triangle(vertices[t.x], vertices[t.y], vertices[t.z]);
  triangles[i] = triangle;
  boxes[i] = triangle.bounds();
}

__global__ void closest_points(cuBQL::bvh3f bvh, const cuBQL::Triangle* triangles,
                               const cuBQL::vec3f* points, int n, int* ids, float* sq_distances) {
  const int i = threadIdx.x + blockIdx.x * blockDim.x;
  if (i >= n) return;
  cuBQL::triangles::CPAT result;
  result.runQuery(triangles, bvh, points[i]);
  ids[i] = result.triangleIdx;
  sq_distances[i] = result.sqrDist;
}

int blocks(int64_t n) { return static_cast<int>((n + 127) / 128); }

struct Builder {
  const char* name;
  std::function<void(cuBQL::bvh3f&, const cuBQL::box3f*, uint32_t)> build;
};

}  // namespace

int main(int argc, char** argv) {
  return run_driver(argc, argv, [](const DriverArgs& args) {
    const Mesh mesh = read_mesh(mesh_path(args.dir, args.mesh), args.mesh);
    const int nt = static_cast<int>(mesh.n_triangles());
    const size_t nv = static_cast<size_t>(mesh.n_vertices());
    auto* d_vertices = device_array<cuBQL::vec3f>(nv);
    auto* d_indices = device_array<cuBQL::vec3i>(static_cast<size_t>(nt));
    auto* d_triangles = device_array<cuBQL::Triangle>(static_cast<size_t>(nt));
    auto* d_boxes = device_array<cuBQL::box3f>(static_cast<size_t>(nt));
    const std::vector<Builder> builders = {
        {"median", [](cuBQL::bvh3f& b, const cuBQL::box3f* x,
                      uint32_t n) { cuBQL::gpuBuilder(b, x, n, cuBQL::BuildConfig()); }},
        {"median8", [](cuBQL::bvh3f& b, const cuBQL::box3f* x,
                       uint32_t n) { cuBQL::gpuBuilder(b, x, n, cuBQL::BuildConfig(8)); }},
        {"sah", [](cuBQL::bvh3f& b, const cuBQL::box3f* x,
                   uint32_t n) { cuBQL::gpuBuilder(b, x, n, cuBQL::BuildConfig().enableSAH()); }},
        {"radix", [](cuBQL::bvh3f& b, const cuBQL::box3f* x, uint32_t n) {
           cuBQL::cuda::radixBuilder(b, x, n, cuBQL::BuildConfig());
         }}};
    for (const Builder& builder : builders) {
      cuBQL::bvh3f bvh;
      bool built = false;
      auto free_bvh = [&] {
        if (built) cuBQL::cuda::free(bvh);
        built = false;
      };
      auto gather_and_build = [&] {
        gather_triangles<<<blocks(nt), 128>>>(d_vertices, d_indices, nt, d_triangles, d_boxes);
        builder.build(bvh, d_boxes, static_cast<uint32_t>(nt));
        built = true;
        check_cuda(cudaDeviceSynchronize(), "build");
      };
      auto upload_mesh = [&] {
        check_cuda(cudaMemcpy(d_vertices, mesh.vertices.data(), nv * sizeof(cuBQL::vec3f),
                              cudaMemcpyHostToDevice),
                   "upload");
        check_cuda(cudaMemcpy(d_indices, mesh.triangles.data(), nt * sizeof(cuBQL::vec3i),
                              cudaMemcpyHostToDevice),
                   "upload");
      };
      const double build_host_ms = timed_ms(
          args.repeats,
          [&] {
            upload_mesh();
            gather_and_build();
          },
          free_bvh);
      // The timed runs leave the device-resident build's tree for the queries.
      const double build_device_ms = timed_ms(args.repeats, gather_and_build, free_bvh);
      for (const int64_t n64 : args.scan_sizes) {
        const Row row = read_row(args.dir, args.mesh, n64);
        const int n = static_cast<int>(n64);
        auto* d_points = device_array<cuBQL::vec3f>(static_cast<size_t>(n));
        int* d_ids = device_array<int>(static_cast<size_t>(n));
        float* d_sq = device_array<float>(static_cast<size_t>(n));
        std::vector<int> ids(static_cast<size_t>(n));
        std::vector<float> sq_distances(static_cast<size_t>(n));
        auto query = [&] {
          closest_points<<<blocks(n), 128>>>(bvh, d_triangles, d_points, n, d_ids, d_sq);
          check_cuda(cudaDeviceSynchronize(), "query");
        };
        const double query_host_ms = timed_ms(args.repeats, [&] {
          check_cuda(cudaMemcpy(d_points, row.scan.data(), n * sizeof(cuBQL::vec3f),
                                cudaMemcpyHostToDevice),
                     "upload");
          query();
          check_cuda(cudaMemcpy(ids.data(), d_ids, n * sizeof(int), cudaMemcpyDeviceToHost),
                     "download");
          check_cuda(
              cudaMemcpy(sq_distances.data(), d_sq, n * sizeof(float), cudaMemcpyDeviceToHost),
              "download");
        });
        const double query_device_ms = timed_ms(args.repeats, query);
        const Check check = check_against(row.oracle, mesh, 1e-5, [&](int64_t i) {
          return sq_distances[static_cast<size_t>(i)];
        });
        const std::string name = std::string("cubql-") + builder.name;
        print_result(row.name, name, build_host_ms, query_host_ms, check);
        print_result(row.name, name + "-dev", build_device_ms, query_device_ms, check);
        cudaFree(d_points);
        cudaFree(d_ids);
        cudaFree(d_sq);
      }
      free_bvh();
    }
    cudaFree(d_vertices);
    cudaFree(d_indices);
    cudaFree(d_triangles);
    cudaFree(d_boxes);
  });
}
