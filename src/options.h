// knn_options as the index and point-in-polygon entry points read them: the
// caller's fields over the defaults, only those that lie wholly within
// opt->struct_size (an older, shorter struct keeps working), and the checks
// of the fields both APIs use.
#pragma once

#include "../include/knn_gpgpu.h"

namespace knn {

// NULL gives the defaults. Throws Error(KNN_ERR_INVALID_ARGUMENT) for a
// struct_size too small to hold `backend`, an unknown backend or structure
// (the quadtree calls refuse the same values as the index calls, and ignore
// a valid structure), a device below -1, a negative leaf_size or thread
// count, a device_count outside 0..KNN_MAX_DEVICES or beyond struct_size, or
// a negative entry of devices; whether a device number exists is the
// caller's to check (check_device_number, check_device_list). A thread count
// above max_threads() (common/team_size.h) is reduced to it
// before it reaches OpenMP: libgomp ends the process when it cannot create
// or allocate a team, and more threads than that never run faster.
knn_options read_options(const knn_options* opt);

// A device number the caller names (opt->device >= 0) must exist among the
// `devices` present. Without any device it only matters to a CUDA call
// (NO_DEVICE, from the backend choice); AUTO runs on the CPU.
void check_device_number(int device, int devices);

// The extent of the version-1 fields (40 bytes on 64-bit platforms): what
// knn_options_init writes, in every release.
size_t options_v1_size();

}  // namespace knn
