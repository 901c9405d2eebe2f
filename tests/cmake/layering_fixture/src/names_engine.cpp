#include "../engine/backend.h"
int devices() { return knn::cuda::device_count(); }
