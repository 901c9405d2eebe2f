// The exception barrier every exported function goes through: it runs the
// body, turns any exception into a status code, and records the message that
// knn_last_error() returns on this thread.
#pragma once

#include <new>

#include "../common/error.h"

namespace knn {

// "function: message" into this thread's knn_last_error() text; never
// allocates (a message longer than the buffer is cut).
void set_last_error(const char* function, const char* message) noexcept;
void clear_last_error() noexcept;

template <class Body>
int guarded(const char* function, Body&& body) noexcept {
  try {
    clear_last_error();
    body();
    return KNN_OK;
  } catch (const Error& e) {
    set_last_error(function, e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error(function, "host memory allocation failed");
    return KNN_ERR_HOST_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(function, e.what());
    return KNN_ERR_INTERNAL;
  } catch (...) {
    set_last_error(function, "unknown internal exception");
    return KNN_ERR_INTERNAL;
  }
}

// An entry point that hands its arguments to one function of the library:
// body(function, args...) behind the barrier, `function` naming the entry
// point in the body's messages as in the barrier's.
template <class Body, class... Args>
int guarded_call(const char* function, Body&& body, Args... args) noexcept {
  return guarded(function, [&] { body(function, args...); });
}

}  // namespace knn
