#include "../cuda/cuda_backend.h"
#include "../engine/backend.h"
const void* registered() { return &knn::cuda::cuda_backend(); }
