#include "device_choice.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "../common/error.h"
#include "../engine/cancel.h"
#include "../engine/device_budget.h"
#include "../engine/progress.h"

namespace knn {
namespace {

[[noreturn]] void bad_list(const char* text, const std::string& why) {
  fail(KNN_ERR_INVALID_ARGUMENT,
       format("KNN_DEVICES is \"%s\": %s; it must be \"all\" or device numbers separated by commas "
              "(\"0,1\")",
              text, why.c_str()));
}

void check_present(int device, int present, const std::string& what) {
  if (present == 0)
    fail(KNN_ERR_NO_DEVICE,
         format("%s names device %d; no usable CUDA device is present", what.c_str(), device));
  if (device >= present)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("%s is %d; this machine has %d CUDA device%s (0..%d)", what.c_str(), device,
                present, present == 1 ? "" : "s", present - 1));
}

// The device numbers KNN_DEVICES lists, checked for syntax only (no device
// need be present); *all is set, and the list empty, for "all".
std::vector<int> listed_devices(const char* text, bool* all) {
  const std::string whole(text);
  auto trimmed = [](std::string s) {
    const auto not_space = [](unsigned char c) { return !std::isspace(c); };
    s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
    s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
    return s;
  };
  *all = trimmed(whole) == "all";
  std::vector<int> devices;
  if (*all) return devices;
  size_t from = 0;
  for (;;) {
    const size_t comma = whole.find(',', from);
    const std::string entry =
        trimmed(whole.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    const int position = static_cast<int>(devices.size()) + 1;
    if (entry.empty()) bad_list(text, format("entry %d is empty", position));
    if (entry.size() > 4 ||
        !std::all_of(entry.begin(), entry.end(), [](unsigned char c) { return std::isdigit(c); }))
      bad_list(text, format("entry %d (\"%s\") is not a device number", position, entry.c_str()));
    if (devices.size() == KNN_MAX_DEVICES)
      bad_list(text, format("it lists more than KNN_MAX_DEVICES (%d) devices", KNN_MAX_DEVICES));
    devices.push_back(std::atoi(entry.c_str()));
    if (comma == std::string::npos) return devices;
    from = comma + 1;
  }
}

}  // namespace

std::vector<int> parse_device_list(const char* text, int present) {
  bool all = false;
  std::vector<int> devices = listed_devices(text, &all);
  if (all) {
    for (int d = 0; d < std::min(present, KNN_MAX_DEVICES); ++d) devices.push_back(d);
    if (devices.empty())
      fail(KNN_ERR_NO_DEVICE, "KNN_DEVICES is \"all\"; no usable CUDA device is present");
    return devices;
  }
  if (present == 0)
    fail(KNN_ERR_NO_DEVICE,
         format("KNN_DEVICES is \"%s\"; no usable CUDA device is present", text));
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i] >= present)
      bad_list(text, format("entry %d is device %d; this machine has %d CUDA device%s (0..%d)",
                            static_cast<int>(i) + 1, devices[i], present, present == 1 ? "" : "s",
                            present - 1));
  return devices;
}

void check_device_environment(bool device_list, bool memory_limit) {
  const char* list = std::getenv(kDeviceListVar);
  if (device_list && list != nullptr && *list != '\0') {
    bool all = false;
    listed_devices(list, &all);
  }
  if (memory_limit) parse_device_memory_limit(std::getenv(kDeviceMemoryLimitVar));
}

DeviceChoice choose_devices(int pinned, const knn_options& o, int present, int first) {
  DeviceChoice choice;
  if (pinned >= 0) {
    choice.devices = {pinned};
    choice.forced = true;
    return choice;
  }
  if (o.device_count > 0) {
    for (int i = 0; i < o.device_count; ++i) {
      check_present(o.devices[i], present, format("opt->devices[%d]", i));
      choice.devices.push_back(o.devices[i]);
    }
    choice.forced = true;
    return choice;
  }
  const char* env = std::getenv(kDeviceListVar);
  if (env != nullptr && *env != '\0') {
    choice.devices = parse_device_list(env, present);
    choice.forced = true;
    return choice;
  }
  for (int d = 0; d < std::min(present, KNN_MAX_DEVICES); ++d) choice.devices.push_back(d);
  const auto at = std::find(choice.devices.begin(), choice.devices.end(), first);
  if (at != choice.devices.end()) std::rotate(choice.devices.begin(), at, at + 1);
  return choice;
}

void check_device_list(const knn_options& o, int present) {
  if (present == 0) return;
  for (int i = 0; i < o.device_count; ++i)
    check_present(o.devices[i], present, format("opt->devices[%d]", i));
}

std::vector<int> devices_for(const DeviceChoice& choice, int64_t work) {
  if (work <= 0 || choice.devices.empty()) return {};
  const int64_t listed = static_cast<int64_t>(choice.devices.size());
  const int64_t gaining =
      choice.forced ? listed : std::max<int64_t>(1, work / KNN_MIN_QUERIES_PER_DEVICE);
  const int64_t shares = std::min({listed, gaining, work});
  return std::vector<int>(choice.devices.begin(), choice.devices.begin() + shares);
}

int64_t share_begin(int64_t m, int shares, int s) {
  // m * s / shares without overflow: m < 2^63 and s <= shares <= KNN_MAX_DEVICES.
  return (m / shares) * s + (m % shares) * s / shares;
}

void run_shares(const std::vector<int>& devices,
                const std::function<void(int device)>& switch_device,
                const std::function<void(int share, int device)>& share) {
  const volatile int* const cancel = cancel_flag();
  knn_progress* const report = progress();
  const size_t count = devices.size();
  std::vector<std::exception_ptr> failures(count);
  std::vector<int> statuses(count, KNN_OK);
  std::vector<std::thread> threads;
  auto body = [&](size_t s) {
    try {
      set_cancel_flag(cancel);
      set_progress(report);
      switch_device(devices[s]);
      share(static_cast<int>(s), devices[s]);
    } catch (const Error& e) {
      failures[s] = std::current_exception();
      statuses[s] = e.status();
    } catch (...) {
      failures[s] = std::current_exception();
      statuses[s] = KNN_ERR_INTERNAL;
    }
  };
  try {
    for (size_t s = 0; s < count; ++s) threads.emplace_back(body, s);
  } catch (...) {
    // No thread for a share: the shares started finish, then the call fails.
    for (std::thread& t : threads) t.join();
    fail(KNN_ERR_HOST_OUT_OF_MEMORY, "could not start a host thread for a device share");
  }
  for (std::thread& t : threads) t.join();
  size_t first = count;
  for (size_t s = 0; s < count; ++s) {
    if (!failures[s]) continue;
    if (first == count ||
        (statuses[first] == KNN_ERR_CANCELLED && statuses[s] != KNN_ERR_CANCELLED))
      first = s;
  }
  if (first < count) std::rethrow_exception(failures[first]);
}

}  // namespace knn
