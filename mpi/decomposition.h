// The global spatial decomposition: recursive coordinate bisection of a
// sample of the points into one region per rank. Every rank computes the same
// tree from the same gathered sample, so routing a point to its region needs
// no communication. The regions only steer work: any point may lie anywhere
// (the answers stay exact through the bounding boxes of what each rank holds).
#pragma once

#include <cstdint>
#include <vector>

namespace knn_mpi {

class Decomposition {
 public:
  Decomposition() = default;
  // Splits `ranks` regions over the sample (count rows of dim floats): each
  // node halves its ranks and splits its sample at the matching quantile of
  // its widest dimension. Deterministic in the sample's order.
  Decomposition(const std::vector<float>& sample, int64_t count, int dim, int ranks);

  // The rank whose region holds point p (dim floats).
  int owner(const float* p) const;

 private:
  struct Node {
    int axis = -1;       // -1: a leaf
    float value = 0.0f;  // points with p[axis] < value go left
    int left = -1, right = -1;
    int rank = -1;  // leaves: the region's rank
  };
  int split(const float* sample, std::vector<int64_t>& rows, int64_t first, int64_t last,
            int rank_lo, int rank_hi);

  int dim_ = 0;
  std::vector<Node> nodes_;
};

}  // namespace knn_mpi
