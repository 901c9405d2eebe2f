// The set of live handles of one kind (knn_index, knn_quadtree). Every entry
// point looks a handle up here before it reads the handle, so a freed, stale
// or foreign pointer is refused without touching the memory it points to
// (a marker inside the handle would be read from freed memory). A freed
// address that a later build happens to reuse is that later handle.
#pragma once

#include <mutex>
#include <set>

namespace knn {

template <class Handle>
class LiveHandles {
 public:
  // The one registry of this handle type; never destroyed, so handles freed
  // by a host during exit are still recognised.
  static LiveHandles& instance() {
    static LiveHandles* const registry = new LiveHandles;
    return *registry;
  }

  // Throws std::bad_alloc (nothing registered) when the entry cannot be made.
  void add(const Handle* handle) {
    const std::lock_guard<std::mutex> lock(mutex_);
    live_.insert(handle);
  }
  bool contains(const Handle* handle) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return live_.count(handle) != 0;
  }
  // Unregisters the handle; false when it was not live. Of two threads that
  // free one handle at once, exactly one gets true.
  bool remove(const Handle* handle) {
    const std::lock_guard<std::mutex> lock(mutex_);
    return live_.erase(handle) != 0;
  }

 private:
  LiveHandles() = default;
  mutable std::mutex mutex_;
  std::set<const Handle*> live_;  // a node per handle, freed with it
};

}  // namespace knn
