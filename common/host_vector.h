// A std::vector whose resize leaves new elements uninitialised (trivial
// types only): the library fills such arrays itself, in parallel, and a
// resize that zeroes hundreds of megabytes first would fault every page in
// on one thread (a tenth of a second per 100 MB on a loaded machine) before
// the real writes fault nothing.
#pragma once

#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace knn {

template <class T>
class DefaultInitAllocator : public std::allocator<T> {
 public:
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}

  // resize(n) and the like: default-initialisation, nothing written.
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible<U>::value) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <class T>
using HostVector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace knn
