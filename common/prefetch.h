// Asks for a cache line ahead of its use: for loops whose reads land at
// random places (a query's coordinates taken in leaf order, the normals of a
// point's neighbours), each a cache miss the loop would otherwise wait on.
#pragma once

namespace knn {

inline void prefetch_line(const void* p, bool for_write) {
#if defined(__GNUC__)
  if (for_write)
    __builtin_prefetch(p, 1);
  else
    __builtin_prefetch(p, 0);
#else
  (void)p;
  (void)for_write;
#endif
}

}  // namespace knn
