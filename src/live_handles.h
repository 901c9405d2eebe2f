// The live handles of one type (knn_index, knn_quadtree, and any handle type
// to come) and the calls in flight on each.
//
// Every entry point that takes a handle holds it for the whole call: a
// HandleUse acquires it (one more call in flight, granted under the
// registry's lock only while the handle is live) and releases it when the
// call returns. A freed, stale or foreign pointer is refused without touching
// the memory it points to (a marker inside the handle would be read from
// freed memory).
//
// Free is deferred as in sqlite3_close_v2: free() unregisters the handle at
// once, so that calls which begin later, and a second free, are refused as
// not live; it destroys the handle at once when no call is in flight, else
// the last call in flight destroys it as it returns, on its own thread, after
// finishing normally. Free never blocks on a call and never fails for a live
// handle, also when it runs inside a call on the same handle (code the call
// runs, on its thread or a worker's): nothing is destroyed under the lock,
// and no call holds the lock while it runs. An address stays registered until
// its handle is destroyed, so no build can reuse it meanwhile; a freed
// address that a later build reuses is that later handle.
//
// A handle type supplies destroy_handle<Handle>, declared below: it releases
// everything the handle holds (device memory included) and must not throw,
// since it runs inside free or at the end of whichever call is last. Define
// it in the file that defines the handle type, before that file's first use
// of LiveHandles<Handle>.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "../common/error.h"
#include "../common/non_copyable.h"

namespace knn {

template <class Handle>
void destroy_handle(Handle* handle) noexcept;

template <class Handle>
class LiveHandles {
 public:
  // The one registry of this handle type; never destroyed, so handles freed
  // by a host during exit are still recognised.
  static LiveHandles& instance() {
    static LiveHandles* const registry = new LiveHandles;
    return *registry;
  }

  // Registers a new handle. Throws std::bad_alloc (nothing registered) when
  // the entry cannot be made.
  void add(Handle* handle) {
    const std::lock_guard<std::mutex> lock(mutex_);
    handles_.emplace(handle, Entry{handle, 0, false});
  }

  // Begins a call on `handle`: true, with one more call in flight, when the
  // handle is live; false (nothing held) when it is not a registered handle
  // or has been freed.
  bool acquire(const Handle* handle) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = handles_.find(handle);
    if (it == handles_.end() || it->second.freed) return false;
    ++it->second.calls;
    return true;
  }

  // Ends a call that acquire() began; the last call on a freed handle
  // destroys it.
  void release(const Handle* handle) noexcept {
    Handle* doomed = nullptr;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      const auto it = handles_.find(handle);
      if (--it->second.calls == 0 && it->second.freed) {
        doomed = it->second.owned;
        handles_.erase(it);
      }
    }
    if (doomed) destroy_handle(doomed);
  }

  // Unregisters `handle` and destroys it now, or when its last call in
  // flight returns; false (nothing done) when it is not live. Of two threads
  // that free one handle at once, exactly one gets true.
  bool free(const Handle* handle) {
    Handle* doomed = nullptr;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      const auto it = handles_.find(handle);
      if (it == handles_.end() || it->second.freed) return false;
      if (it->second.calls > 0) {
        it->second.freed = true;
        return true;
      }
      doomed = it->second.owned;
      handles_.erase(it);
    }
    destroy_handle(doomed);
    return true;
  }

 private:
  struct Entry {
    Handle* owned;  // the handle itself, to destroy
    int64_t calls;  // calls in flight
    bool freed;     // free() ran: no new call; the last one destroys it
  };
  LiveHandles() = default;
  std::mutex mutex_;
  std::map<const Handle*, Entry> handles_;  // a node per handle, freed with it
};

// One call's hold on a handle (LiveHandles::acquire, released when the call
// returns): holds nothing when the handle is not live (check with bool).
// Declare it before anything of the call that uses the handle, so that it is
// released last.
template <class Handle>
class HandleUse : NonCopyable {
 public:
  explicit HandleUse(const Handle* handle)
      : handle_(LiveHandles<Handle>::instance().acquire(handle) ? handle : nullptr) {}
  HandleUse(HandleUse&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  HandleUse& operator=(HandleUse&&) = delete;
  ~HandleUse() {
    if (handle_) LiveHandles<Handle>::instance().release(handle_);
  }

  explicit operator bool() const { return handle_ != nullptr; }
  const Handle& operator*() const { return *handle_; }
  const Handle* operator->() const { return handle_; }

 private:
  const Handle* handle_;
};

// How the messages of a handle type name it: the argument ("index") and the
// refusal of a pointer that is not live (what it is and which calls make it).
struct HandleNames {
  const char* argument;
  const char* not_live;
};

// Holds the live handle of an entry point until the call returns; refuses
// NULL and a pointer that is not live.
template <class Handle>
HandleUse<Handle> use_live(const Handle* handle, const HandleNames& names) {
  if (handle == nullptr) fail(KNN_ERR_INVALID_ARGUMENT, std::string(names.argument) + " is NULL");
  HandleUse<Handle> use(handle);
  if (!use) fail(KNN_ERR_INVALID_ARGUMENT, names.not_live);
  return use;
}

// knn_*_free: NULL is nothing to do; a pointer that is not live is refused.
template <class Handle>
void free_live(Handle* handle, const HandleNames& names) {
  if (handle == nullptr) return;
  if (!LiveHandles<Handle>::instance().free(handle)) fail(KNN_ERR_INVALID_ARGUMENT, names.not_live);
}

// The out parameter of a call that makes a handle: refused when NULL, else
// NULL until the call succeeds.
template <class Handle>
void clear_out(Handle** out) {
  if (out == nullptr) fail(KNN_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = nullptr;
}

}  // namespace knn
