// Checks of a polygon set handed to the point-in-polygon calls (contract
// section 4). Each check throws knn::Error with a message naming the array
// and the element at fault; nothing is written to any output before they
// pass.
#pragma once

#include <cstdint>

#include "../engine/quadtree_engine.h"

namespace knn {

// Validates the offsets and the vertices and returns the set the engines
// take. Rules (documented in include/knn_gpgpu.h, section 4):
//  - n_rings, n_polygons >= 0; arrays non-NULL where they have entries;
//  - polygon_offsets[0] == 0, each polygon has at least one ring (offsets
//    strictly increasing), polygon_offsets[n_polygons] == n_rings;
//  - ring_offsets[0] == 0, non-decreasing; ring_offsets[n_rings] is the
//    number of vertices, at most PTRDIFF_MAX / (2 * sizeof(V)) (checked
//    before any vertex is read);
//  - each ring keeps at least 3 vertices once consecutive repeats (the
//    closing repeat of a closed ring included) are dropped;
//  - every vertex coordinate is finite, and for double vertices within the
//    exact predicate's range (check_pip_coordinates).
template <class V>
PolygonSet<V> validate_polygons(const V* vertices_xy, const int64_t* ring_offsets, int64_t n_rings,
                                const int64_t* polygon_offsets, int64_t n_polygons, int threads);

// The coordinates of n (x, y) rows, named `what` ("point", "vertex") in the
// message: a NaN or infinite one is KNN_ERR_NONFINITE_INPUT; for doubles,
// one that is neither 0 nor of magnitude within [2^-485, 2^500]
// (pip::kMinMagnitude, pip::kMaxMagnitude) is KNN_ERR_INVALID_ARGUMENT.
// The first bad row is named. `threads` (here and above): the call's thread
// count (knn_options.threads; 0: the default), as common/team_size.h takes it.
void check_pip_coordinates(const float* xy, int64_t n, const char* what, int threads);
void check_pip_coordinates(const double* xy, int64_t n, const char* what, int threads);

}  // namespace knn
