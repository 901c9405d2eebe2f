// Several devices for one call (contract: include/knn_gpgpu.h, "Several
// devices"): which devices a call uses, how its queries are cut into
// contiguous shares, and the host threads that run the shares, one per
// share, each on its device. Plain C++: the device switch is a parameter, so
// that the CPU-only tests drive the same code with a stand-in.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "../include/knn_gpgpu.h"

namespace knn {

// The devices a call may use, before the work size is known.
struct DeviceChoice {
  std::vector<int> devices;  // one share each, in share order; may repeat
  bool forced = false;       // named by the caller (option or KNN_DEVICES): used as listed
};

// The environment variable of the device list (rule 3 of the header's
// "Several devices").
constexpr const char* kDeviceListVar = "KNN_DEVICES";

// Parses KNN_DEVICES: "all" (every one of the `present` devices), or device
// numbers separated by commas, each below `present`, at most KNN_MAX_DEVICES.
// Spaces around entries are allowed. Anything else throws
// Error(KNN_ERR_INVALID_ARGUMENT) quoting the text and naming the fault.
std::vector<int> parse_device_list(const char* text, int present);

// The environment variables a call on a device would read, checked the same
// way whether or not a device is present, so that a setting a CPU-only host
// accepts is not refused on a GPU host: KNN_DEVICES's syntax (set and not
// empty; its device numbers are checked against the devices only where they
// are used) when `device_list`, and KNN_DEVICE_MEMORY_LIMIT
// (parse_device_memory_limit) when `memory_limit`. Throws
// Error(KNN_ERR_INVALID_ARGUMENT) naming the variable and quoting its text.
void check_device_environment(bool device_list, bool memory_limit);

// The rules of the header, in order: `pinned` >= 0 alone; o.devices when
// o.device_count > 0 (each checked below `present`); KNN_DEVICES when set and
// not empty; else every present device (not forced). `first` (>= 0: the
// device the call would run on alone) is moved to the front of the default
// list. An empty list when present is 0.
DeviceChoice choose_devices(int pinned, const knn_options& o, int present, int first);

// Every entry of o.devices[0 .. device_count-1] below `present` (where
// present > 0: without devices an automatic build runs on the CPU and a
// CUDA one reports no device). Throws INVALID_ARGUMENT naming the entry.
void check_device_list(const knn_options& o, int present);

// The devices that take a share of `work` queries: a forced list as listed
// (but no more shares than queries: a share is never empty); the default
// list only as many devices as get KNN_MIN_QUERIES_PER_DEVICE each, at least
// one. Empty when work is 0 or the choice is empty.
std::vector<int> devices_for(const DeviceChoice& choice, int64_t work);

// The first query of share s of `shares` contiguous shares of m queries
// (share s is [share_begin(m, shares, s), share_begin(m, shares, s + 1))).
int64_t share_begin(int64_t m, int shares, int s);

// Runs share s on its own host thread (devices.size() of them), after
// switch_device(devices[s]) on that thread, with the calling thread's cancel
// flag and progress record registered there too. Waits for all of them,
// then rethrows the first failure (a failure other than cancellation before
// a cancellation, else the lowest share's).
void run_shares(const std::vector<int>& devices,
                const std::function<void(int device)>& switch_device,
                const std::function<void(int share, int device)>& share);

}  // namespace knn
