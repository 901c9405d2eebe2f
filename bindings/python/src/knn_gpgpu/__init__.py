"""knn_gpgpu: exact k-nearest-neighbour search, radius search, point in
polygon and point-to-mesh distance on NVIDIA GPUs and on the CPU (OpenMP), through the C library
libknn_gpgpu (ctypes + numpy, no compiled extension).

Quick start::

    import numpy as np
    import knn_gpgpu as knn

    pts = np.random.rand(10000, 3).astype(np.float32)
    tree = knn.build_kdtree(pts)            # (n,) NODE_DTYPE, GPU or CPU
    nn = knn.query_all(pts, tree, k=8)      # (n, 8) int32 original indices
    d2, ind = knn.brute_force(pts, pts[:5], k=3)

    with knn.Index(pts, backend="auto") as index:   # any dimension
        d2, ind = index.query(pts[:100], k=8)       # distances first

    tree = knn.KDTree(pts)                          # scipy.spatial.KDTree's surface
    d, i = tree.query(pts[:100], k=8)               # Euclidean distances first

    with knn.Quadtree(pts[:, :2]) as tree:          # point in polygon (2-D)
        square = [[0, 0], [0.5, 0], [0.5, 0.5], [0, 0.5]]
        members = tree.points_in_each_polygon(*knn.pack_polygons([[square]]))

    with knn.Index(scan) as index:                  # neighbourhood statistics (3-D)
        normals, curvature = index.normals(30, viewpoint=(0, 0, 10))
        kept = index.statistical_inliers(16, std_ratio=2.0).ids

    with knn.Mesh(vertices, faces) as design:       # scan versus design
        sq_d, tri, closest = design.closest(scan)   # as igl.point_mesh_squared_distance
        report = design.deviation_report(scan, tolerance=0.05)

The library is found through ``KNN_GPGPU_LIBRARY`` (full path), next to this
package, or the system search (see :func:`load_library`). Failures raise
:class:`KnnError` subclasses carrying the status and ``knn_last_error()``.
"""

from __future__ import annotations

from typing import Tuple

from ._library import (ENV_VAR, Native, last_error, library_path, load_library, native,
                       status_string)
from ._types import (NODE_DTYPE, POINT_DTYPE, Backend, IndexStructure, Node, OptionsStruct,
                     Point, ProgressStage)
from .cancel import CancelFlag, set_cancel_flag
from .classic import (brute_force, build_kdtree, cu_build_kdtree, cu_query_all, free_bytes_on_gpu,
                      get_device, get_device_count, mp_build_kdtree, mp_query_all,
                      needed_bytes_for_building_kdtree, needed_bytes_for_query_all,
                      needed_bytes_in_search, query_all, set_device, tree_size)
from .errors import (CancelledError, DeviceError, DeviceOutOfMemoryError, HostOutOfMemoryError,
                     InternalError, InvalidArgumentError, InvalidTreeError, KnnError,
                     LibraryNotFoundError, NoDeviceError, NonfiniteInputError, Status,
                     UnsupportedError)
from .index import (Index, IndexInfo, KnnResult, LegacyKnnResult, RadiusCsr, RadiusResult,
                    RadiusRows, estimate_build_bytes, estimate_query_bytes)
from .mesh import (DEFAULT_PERCENTILES, AlignResult, ClosestBarycentricResult, ClosestResult,
                   DeviationReport, Mesh, MeshInfo, estimate_mesh_bytes)
from .options import Options
from .progress import Progress, ProgressSnapshot, set_progress
from .spatial import KDTree, cKDTree
from .stats import (Inliers, NormalsResult, estimate_stats_bytes, kth_distances, neighbor_counts,
                    normals, outlier_scores, radius_inliers, statistical_inliers)
from .quadtree import (Quadtree, pack_polygons, points_in_each_polygon, points_in_polygons,
                       points_in_polygons_count)

__version__ = "1.0.0"


def version() -> int:
    """``knn_version()`` of the loaded library: MAJOR * 10000 + MINOR * 100 + PATCH."""
    return int(native().knn_version())


def version_tuple() -> Tuple[int, int, int]:
    """The loaded library's version as ``(major, minor, patch)``."""
    v = version()
    return (v // 10000, v // 100 % 100, v % 100)


__all__ = [
    "ENV_VAR", "Native", "last_error", "library_path", "load_library", "native", "status_string",
    "version", "version_tuple",
    "NODE_DTYPE", "POINT_DTYPE", "Backend", "IndexStructure", "Node", "OptionsStruct", "Point",
    "Options",
    "brute_force", "build_kdtree", "cu_build_kdtree", "cu_query_all", "free_bytes_on_gpu",
    "get_device", "get_device_count", "mp_build_kdtree", "mp_query_all",
    "needed_bytes_for_building_kdtree", "needed_bytes_for_query_all", "needed_bytes_in_search",
    "query_all", "set_device", "tree_size",
    "CancelledError", "DeviceError", "DeviceOutOfMemoryError", "HostOutOfMemoryError",
    "InternalError", "InvalidArgumentError", "InvalidTreeError", "KnnError",
    "LibraryNotFoundError", "NoDeviceError", "NonfiniteInputError", "Status", "UnsupportedError",
    "Index", "IndexInfo", "KnnResult", "LegacyKnnResult", "RadiusCsr", "RadiusResult",
    "RadiusRows", "estimate_build_bytes", "estimate_query_bytes", "KDTree", "cKDTree",
    "Quadtree", "pack_polygons", "points_in_each_polygon", "points_in_polygons",
    "points_in_polygons_count",
    "Mesh", "MeshInfo", "ClosestResult", "ClosestBarycentricResult", "DeviationReport",
    "DEFAULT_PERCENTILES", "estimate_mesh_bytes", "AlignResult",
    "CancelFlag", "set_cancel_flag",
    "Progress", "ProgressSnapshot", "ProgressStage", "set_progress",
    "NormalsResult", "Inliers", "estimate_stats_bytes", "normals", "outlier_scores",
    "statistical_inliers", "kth_distances", "neighbor_counts", "radius_inliers",
]
