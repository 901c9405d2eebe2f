// Host allocation failure injection for tests, in the manner of SQLite's OOM
// tests: host_alloc_hook.cpp replaces the global operator new and delete of
// the test executable (and so, by the C++ replacement rule, of every
// operator new call in the process, libknn_gpgpu.so and libstdc++
// included). While armed, it counts allocations and makes the N-th fail
// (transient) or the N-th and every later one fail (persistent); it always
// counts live allocations and bytes, so a test can tell that a call left
// nothing behind. Only test executables link it: the released library's
// allocations are untouched.
//
// Not covered: allocations with malloc, which the library does not make
// itself (libgomp's thread pool and team structures, and the C++ runtime's
// exception objects, allocate that way; libgomp ends the process when they
// fail, which no library built on it can prevent).
#pragma once

#include <cstddef>
#include <cstdint>

namespace knn_test {
namespace alloc_hook {

enum class Mode { Transient, Persistent };

// From the next allocation on, allocation number `nth` (1-based) fails, and
// in Persistent mode every one after it too.
void arm(int64_t nth, Mode mode);
// Stops failing; counts stay readable until the next arm().
void disarm();
// Allocations attempted since arm(), and how many of them were failed.
int64_t attempted();
int64_t failed();

// Allocations made through operator new and not yet deleted, in the whole
// process, and their bytes.
int64_t live_count();
int64_t live_bytes();
// The largest single request since reset_largest().
size_t largest_request();
void reset_largest();
// The most bytes live at once since reset_peak() (which starts it at
// live_bytes()).
int64_t peak_live_bytes();
void reset_peak();

}  // namespace alloc_hook
}  // namespace knn_test
