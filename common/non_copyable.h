// The base of the classes that own what a copy cannot share (a device made
// current, a stream, device or pinned memory, threads, a communicator): their
// class head says so instead of two deleted members each. It declares no
// move either, so such a class moves only where it writes its own move
// constructor (DeviceBuffer, HandleUse).
#pragma once

namespace knn {

class NonCopyable {
 public:
  NonCopyable(const NonCopyable&) = delete;
  NonCopyable& operator=(const NonCopyable&) = delete;

 protected:
  NonCopyable() = default;
  ~NonCopyable() = default;
};

}  // namespace knn
