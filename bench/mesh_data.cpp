// Writes the mesh benchmark's data (bench/mesh_datasets.h) into a folder, for
// bench_mesh and the peer drivers (bench/peers_mesh) to read:
//   bench_mesh_data DIR MESH N [N ...]
// MESH is torus-N, bumpy-N or PATH.off; each N a scan size (1e6). Files
// already there are kept. Prints "MESH <spec> <name> <triangles>".
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "bench_timer.h"
#include "mesh_datasets.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s DIR MESH N [N ...]\n", argv[0]);
    return 2;
  }
  try {
    std::vector<int64_t> sizes;
    for (int i = 3; i < argc; ++i) sizes.push_back(knn_bench::mesh::parse_count(argv[i]));
    const knn_bench::Clock::time_point start = knn_bench::Clock::now();
    const std::string name = knn_bench::mesh::prepare_rows(argv[1], argv[2], sizes);
    const knn_bench::mesh::Mesh mesh =
        knn_bench::mesh::read_mesh(knn_bench::mesh::mesh_path(argv[1], name), name);
    std::printf("MESH %s %s %lld (%.0f ms)\n", argv[2], name.c_str(),
                static_cast<long long>(mesh.n_triangles()), knn_bench::ms_since(start));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
  return 0;
}
