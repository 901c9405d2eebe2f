// Failure injection for malloc inside OpenMP parallel regions, beside
// host_alloc_hook.h (which replaces operator new only): while armed, every
// malloc made by a thread inside a parallel region returns NULL. That is
// where libgomp allocates the tasks a region creates (gomp_malloc, which
// ends the process with exit(1) when malloc fails); the library must
// allocate nothing there. Allocations made on the calling thread outside a
// region, libgomp's teams and thread pool when a region opens included, are
// untouched. glibc only, and not under a sanitizer, whose runtime owns
// malloc (available() is false there): the replacement calls glibc's own
// __libc_malloc.
#pragma once

#include <cstdint>

namespace knn_test {
namespace parallel_malloc {

bool available();
// fails(): whether the calling thread's malloc fails now (armed, inside a
// parallel region); counted.
bool fails();
void arm();
void disarm();
// The mallocs failed since arm().
int64_t failed();

}  // namespace parallel_malloc
}  // namespace knn_test
