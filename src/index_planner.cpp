#include "index_planner.h"

#include <algorithm>

#include "../common/error.h"
#include "../common/index_leaf_size.h"
#include "../common/saturating.h"
#include "../engine/cancel.h"
#include "backends.h"

namespace knn {

int auto_structure(int backend, int64_t n, int dim) {
  const bool gpu = backend == KNN_BACKEND_CUDA;
  const int64_t brute_force_max = gpu ? kGpuBruteForceMaxPoints : kCpuBruteForceMaxPoints;
  const bool kd_tree_wins = gpu ? gpu_kdtree_beats_brute_force(n, dim) : dim <= kKdTreeMaxUsefulDim;
  if (n <= brute_force_max || !kd_tree_wins) return KNN_STRUCTURE_BRUTE_FORCE;
  return dim == 3 ? KNN_STRUCTURE_GRID : KNN_STRUCTURE_KDTREE;
}

bool primary_refuses(int backend, int primary, int64_t n, int list_k) {
  if (backend != KNN_BACKEND_CUDA) return false;
  if (primary == KNN_STRUCTURE_BRUTE_FORCE) return std::min<int64_t>(list_k, n) > kGpuMaxListK;
  return primary == KNN_STRUCTURE_GRID && list_k > kGpuMaxListK;
}

namespace {
// Whether the CUDA grid's search leads the kd-tree's at kNN lists of list_k
// (index_planner.h: kGpuGridMaxLeadingK).
bool grid_leads_at(int list_k) { return list_k <= kGpuGridMaxLeadingK; }

// The isolated share x n above which the grid of `backend` gives way.
double max_isolated_scan(int backend) {
  return backend == KNN_BACKEND_CUDA ? kGpuGridMaxIsolatedScan : kCpuGridMaxIsolatedScan;
}
}  // namespace

bool reads_isolated_share(int backend, int primary, int64_t n, int list_k, CallKind kind) {
  // The OpenMP grid leads at every k (index_planner.h).
  const bool grid_serves = backend != KNN_BACKEND_CUDA || grid_leads_at(list_k);
  return primary == KNN_STRUCTURE_GRID && kind == CallKind::Nearest && grid_serves &&
         static_cast<double>(n) > max_isolated_scan(backend);
}

int serving_structure(int backend, int primary, int64_t n, int list_k, CallKind kind,
                      double isolated_share, double stacked_cell_points) {
  if (primary == KNN_STRUCTURE_KDTREE) return primary;
  const bool isolated = reads_isolated_share(backend, primary, n, list_k, kind) &&
                        isolated_share * static_cast<double>(n) > max_isolated_scan(backend);
  const bool crowded = primary == KNN_STRUCTURE_GRID && kind == CallKind::Nearest &&
                       static_cast<double>(list_k) < stacked_cell_points;
  if (backend != KNN_BACKEND_CUDA) return isolated || crowded ? KNN_STRUCTURE_KDTREE : primary;
  if (primary_refuses(backend, primary, n, list_k)) return KNN_STRUCTURE_KDTREE;
  const bool long_lists = kind == CallKind::Nearest && !grid_leads_at(list_k);
  return primary == KNN_STRUCTURE_GRID && (long_lists || isolated || crowded) ? KNN_STRUCTURE_KDTREE
                                                                              : primary;
}

template <typename Scalar>
int structure_serving_call(const BasicIndexEngine<Scalar>& primary, int64_t n, int list_k,
                           CallKind kind, const Scalar* queries, int64_t m) {
  const int backend = primary.backend(), structure = primary.structure();
  double isolated_share = 0.0;
  if (reads_isolated_share(backend, structure, n, list_k, kind)) {
    // Asked only here, where the answer is used: it costs a driver call.
    // Null queries: the indexed points (all-kNN), read by the engine.
    CallParams placement;
    placement.queries_on_device = queries != nullptr && device_backend().is_device_pointer(queries);
    isolated_share = primary.share_of_isolated_queries(queries, m, placement);
  }
  return serving_structure(backend, structure, n, list_k, kind, isolated_share,
                           primary.stacked_cell_points());
}

template int structure_serving_call<float>(const IndexEngine&, int64_t, int, CallKind, const float*,
                                           int64_t);
template int structure_serving_call<double>(const IndexEngine64&, int64_t, int, CallKind,
                                            const double*, int64_t);

namespace {
size_t scalar_size(int scalar) {
  return scalar == KNN_SCALAR_FLOAT64 ? sizeof(double) : sizeof(float);
}
}  // namespace

size_t device_build_bytes(int structure, int64_t n, int dim, int scalar) {
  return device_backend().index_build_bytes(structure, n, dim, scalar_size(scalar));
}

size_t device_query_bytes(int structure, int64_t m, int k, int64_t n, int dim, int scalar) {
  const Backend& device = device_backend();
  const size_t bytes = scalar_size(scalar);
  const size_t one = device.index_query_bytes(structure, m, k, n, dim, bytes);
  if (structure != KNN_STRUCTURE_AUTO || n <= kGpuMaxListK) return one;
  // Every primary (an upper bound of its resident part), and beside it the
  // kd-tree's build peak with the device copy of the points it is built from
  // (Backend::build_kdtree_index_of), or the kd-tree resident with the
  // call's scratch.
  const size_t kdtree =
      std::max(saturating_add(device.kdtree_build_bytes(n, dim, bytes),
                              device.index_points_bytes(n, dim, bytes)),
               device.kdtree_query_bytes(m, k, n, dim, kKdTreeDefaultLeafSize, bytes));
  return std::max(
      one, saturating_add(device.index_build_bytes(KNN_STRUCTURE_AUTO, n, dim, bytes), kdtree));
}

int resolve_backend(int requested, int64_t n, int dim, int structure, size_t device_memory_limit,
                    int scalar) {
  if (requested == KNN_BACKEND_OPENMP) return KNN_BACKEND_OPENMP;
  const Backend& device = device_backend();
  const bool have_device = device.device_count() > 0;
  if (requested == KNN_BACKEND_CUDA) {
    if (!have_device)
      fail(KNN_ERR_NO_DEVICE, "backend is KNN_BACKEND_CUDA but no usable CUDA device was found");
    return KNN_BACKEND_CUDA;
  }
  if (!have_device) return KNN_BACKEND_OPENMP;
  const int planned =
      structure == KNN_STRUCTURE_AUTO ? auto_structure(KNN_BACKEND_CUDA, n, dim) : structure;
  const size_t budget = device.device_budget(device_memory_limit).bytes();
  return device_build_bytes(planned, n, dim, scalar) <= budget ? KNN_BACKEND_CUDA
                                                               : KNN_BACKEND_OPENMP;
}

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_index_engine(int backend, int structure,
                                                             const Scalar* points, int64_t n,
                                                             int dim, const IndexParams& params) {
  const Backend& engines = backend_of(backend);
  IndexParams grid_params = params;
  if (structure == KNN_STRUCTURE_AUTO) {
    structure = auto_structure(backend, n, dim);
    // On the CPU the kd-tree beats a grid refined for a surface (10^6 points
    // on a sphere, 2 cores, k = 8: 442 against 689 ms, build included), so
    // AUTO takes the kd-tree there; on the GPU the refined grid is 2x faster.
    grid_params.refine_grid = backend == KNN_BACKEND_CUDA;
    // On a curve the kd-tree is as fast or faster, far faster than a grid
    // refined for it (grid_layout.h "Curves"); both backends refuse alike.
    grid_params.refuse_curves = true;
  }
  if (structure == KNN_STRUCTURE_GRID) {
    if (dim != 3)
      fail(KNN_ERR_UNSUPPORTED,
           format("structure KNN_STRUCTURE_GRID needs dim 3, dim is %d; use KNN_STRUCTURE_KDTREE "
                  "or KNN_STRUCTURE_AUTO",
                  dim));
    std::unique_ptr<BasicIndexEngine<Scalar>> grid =
        engines.build_grid_index(points, n, grid_params);
    if (grid) return grid;
    structure = KNN_STRUCTURE_KDTREE;  // the data would make a poor grid
    // A cancel raised during the grid's last pass stops the build here,
    // before the kd-tree's begins.
    throw_if_cancelled(cancel_flag());
  }
  if (structure == KNN_STRUCTURE_BRUTE_FORCE)
    return engines.build_brute_force_index(points, n, dim, params);
  return engines.build_kdtree_index(points, n, dim, params);
}

template std::unique_ptr<IndexEngine> build_index_engine<float>(int, int, const float*, int64_t,
                                                                int, const IndexParams&);
template std::unique_ptr<IndexEngine64> build_index_engine<double>(int, int, const double*, int64_t,
                                                                   int, const IndexParams&);

}  // namespace knn
