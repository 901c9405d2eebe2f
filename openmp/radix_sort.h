// A parallel, stable LSD radix sort of unsigned keys, optionally carrying
// one payload per key: the mesh build sorts Morton codes carrying triangle
// ids (given ascending, so equal codes keep ascending ids: the order by
// (code, id) the BVH definition asks), the deviation report sorts the
// ordered keys of signed distances (common/float_math.h ordered_key).
//
// Each pass takes kRadixBits bits: the threads count the digits of their
// contiguous shares, the counts are laid out digit by digit and thread by
// thread, and each thread scatters its share in order, so the pass is stable
// and the result does not depend on the thread count. A pass whose digit is
// the same for every key moves nothing and is skipped. The cancel flag is
// read before every pass.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../engine/cancel.h"

namespace knn {
namespace omp {

constexpr int kRadixBits = 11;
constexpr int kRadixDigits = 1 << kRadixBits;

// Sorts keys[0, n) (and payload alongside unless NULL) by the low key_bits
// bits of each key, on `threads` threads; `key_buffer` and `payload_buffer`
// are scratch of n entries each (payload_buffer only with a payload).
template <class Key, class Payload>
void radix_sort(Key* keys, Payload* payload, Key* key_buffer, Payload* payload_buffer, int64_t n,
                int key_bits, int threads, const volatile int* cancel) {
  if (n < 2) return;
  const int64_t shares = std::max<int64_t>(1, std::min<int64_t>(threads, n / 4096));
  std::vector<int64_t> start(static_cast<size_t>(shares * kRadixDigits));
  Key* from_keys = keys;
  Key* to_keys = key_buffer;
  Payload* from_payload = payload;
  Payload* to_payload = payload_buffer;
  for (int shift = 0; shift < key_bits; shift += kRadixBits) {
    throw_if_cancelled(cancel);
    std::fill(start.begin(), start.end(), int64_t{0});
#pragma omp parallel for num_threads(static_cast <int>(shares)) schedule(static, 1)
    for (int64_t s = 0; s < shares; ++s) {
      int64_t* count = start.data() + s * kRadixDigits;
      for (int64_t i = n * s / shares; i < n * (s + 1) / shares; ++i)
        ++count[(from_keys[i] >> shift) & (kRadixDigits - 1)];
    }
    // The first digit of the first key holds every key: nothing moves.
    const int first_digit = static_cast<int>((from_keys[0] >> shift) & (kRadixDigits - 1));
    int64_t of_first_digit = 0;
    for (int64_t s = 0; s < shares; ++s) of_first_digit += start[s * kRadixDigits + first_digit];
    if (of_first_digit == n) continue;
    int64_t position = 0;
    for (int digit = 0; digit < kRadixDigits; ++digit)
      for (int64_t s = 0; s < shares; ++s) {
        const int64_t count = start[s * kRadixDigits + digit];
        start[s * kRadixDigits + digit] = position;
        position += count;
      }
#pragma omp parallel for num_threads(static_cast <int>(shares)) schedule(static, 1)
    for (int64_t s = 0; s < shares; ++s) {
      int64_t* next = start.data() + s * kRadixDigits;
      for (int64_t i = n * s / shares; i < n * (s + 1) / shares; ++i) {
        const int64_t to = next[(from_keys[i] >> shift) & (kRadixDigits - 1)]++;
        to_keys[to] = from_keys[i];
        if (payload) to_payload[to] = from_payload[i];
      }
    }
    std::swap(from_keys, to_keys);
    std::swap(from_payload, to_payload);
  }
  if (from_keys != keys) {
    std::copy(from_keys, from_keys + n, keys);
    if (payload) std::copy(from_payload, from_payload + n, payload);
  }
}

}  // namespace omp
}  // namespace knn
