void build() { knn::omp::build_kdtree(nullptr, 0, nullptr); }
