// The bound a thread search keeps when it appends its candidates to a row
// unsorted (binned_rows.cuh) instead of keeping them in a sorted list or a
// heap: a histogram of the candidates' squared distances, from which an
// upper bound of the k-th smallest follows. Plain C++ for host and device
// over the caller's counters, so that the CPU tests check the very rule the
// kernels run (tests/unit/test_kth_bins.cpp).
//
// Bins. A non-negative scalar's bits order as its value, and their top bits,
// the exponent and the first kSubBits bits of the mantissa, step through
// the octaves in eighths: absolute_bin(d) = bits(d) >> (mantissa bits -
// kSubBits), for float and double alike. The histogram is a window of kBins
// of them from `base`, placed around a guess of the k-th distance (the
// guess moves no answer, only the cost: a guess off by more than the
// window's half, 16x in radius, makes the row overflow and the search hand
// the query on); distances below the window count in bin 0, above it in the
// last bin.
//
// Bound. `top` is the last bin still counted and `total` the candidates
// counted in bins 0..top. While top is the window's last bin every candidate
// is kept. Once bins 0..top-1 hold k candidates, the k-th smallest of what
// was offered lies below bin top, so top is dropped: after every count,
// either top is the last bin or bins 0..top hold at least k candidates.
// A candidate can then be among the k nearest only if its bin is at most
// top, that is if its bits are below limit(). Every offered candidate below
// the limit is kept and counted, and the limit only falls, so at the end
// the kept candidates below the final limit are all the offered ones below
// it, and at least k of them: the k nearest are the k smallest of those.
// Ties need no care: the limit is a distance, and every candidate at a
// distance below it is kept, whatever its index.
#pragma once

#include <cmath>
#include <cstdint>

#include "../../common/float_math.h"
#include "../../common/host_device.h"

namespace knn {
namespace cuda {

template <typename Scalar>
struct KthBins {
  using Bits = FloatBits<Scalar>;
  static constexpr int kSubBits = 3;  // 8 bins an octave of the squared distance
  static constexpr int kBins = 128;   // 16 octaves: the guess's radius x 16 either way
  static_assert(kBins == 128, "occupied_low and occupied_high cover 128 bins");
  static constexpr int kShift = FloatLayout<Scalar>::kMantissaBits - kSubBits;
  // Two 16-bit counters a 32-bit word (a count never exceeds a row's
  // capacity, binned_row_capacity: far below 2^16).
  static constexpr int kCounterWords = kBins / 2;

  int base;           // absolute bin of bin 0
  int top;            // the last bin counted
  int total = 0;      // candidates counted in bins 0..top
  int top_count = 0;  // of which in bin top
  int k;
  // Bins 0..63 and 64..127 that hold a counted candidate: top falls past
  // the empty ones in one step (the first fall crosses most of the window).
  uint64_t occupied_low = 0, occupied_high = 0;

  KNN_HD static int absolute_bin(Scalar d) { return static_cast<int>(bits_of(d) >> kShift); }

  // The window around `guess` (a squared distance >= 0) for lists of k.
  // It never reaches infinity's bin, so that every limit is a finite value.
  KNN_HD KthBins(Scalar guess, int k_) : top(kBins - 1), k(k_) {
    const int highest = absolute_bin(static_cast<Scalar>(HUGE_VAL)) - kBins;
    const int centred = absolute_bin(guess) - kBins / 2;
    base = centred < 0 ? 0 : (centred > highest ? highest : centred);
  }

  KNN_HD int bin(Scalar d) const {
    const int b = absolute_bin(d) - base;
    return b < 0 ? 0 : (b >= kBins ? kBins - 1 : b);
  }

  // Whether every candidate is still kept (no bin dropped yet).
  KNN_HD bool open() const { return top == kBins - 1; }

  // Candidates whose bits are below this can be among the k nearest: every
  // one while open().
  KNN_HD Bits limit() const {
    return open() ? ~Bits{0} : static_cast<Bits>(base + top + 1) << kShift;
  }
  // The same as a distance (a candidate qualifies when strictly below it);
  // only once a bin is dropped.
  KNN_HD Scalar bound() const { return scalar_of_bits<Scalar>(limit()); }

  // Counts a kept candidate of bin b (at most top). counters.add(b) and
  // counters.get(b) keep the counts. True when top fell.
  template <class Counters>
  KNN_HD bool count(int b, Counters& counters) {
    counters.add(b);
    ++total;
    if (b == top) ++top_count;
    if (b < 64)
      occupied_low |= uint64_t{1} << b;
    else
      occupied_high |= uint64_t{1} << (b - 64);
    bool fell = false;
    // Candidates below top exist (total - top_count >= k >= 1), so an
    // occupied bin below it does.
    while (top > 0 && total - top_count >= k) {
      total -= top_count;
      top = highest_occupied_below(top);
      top_count = counters.get(top);
      fell = true;
    }
    return fell;
  }

  // The highest occupied bin below bin `bin` (0 if none).
  KNN_HD int highest_occupied_below(int bin) const {
    if (bin > 64) {
      const uint64_t high = occupied_high & below(bin - 64);
      if (high != 0) return 127 - leading_zeros(high);
    }
    const uint64_t low = occupied_low & below(bin < 64 ? bin : 64);
    return low != 0 ? 63 - leading_zeros(low) : 0;
  }

 private:
  // The bits 0..n-1 (n <= 64).
  KNN_HD static uint64_t below(int n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }
  KNN_HD static int leading_zeros(uint64_t x) {
#if defined(__CUDA_ARCH__)
    return __clzll(static_cast<long long>(x));
#else
    return __builtin_clzll(x);
#endif
  }
};

}  // namespace cuda
}  // namespace knn
