#include "core/vocab_scan.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/vocab_clones.h"

namespace tt {
namespace {

typedef float Float4 __attribute__((vector_size(16)));
typedef float Float8 __attribute__((vector_size(32)));
constexpr size_t kBlock = 64;

// Comparisons to a mask vector compile to lane-by-lane moves, so a block's maximum is found by halving. A NaN lane
// maximum would hide its successors, so the maxima start at -inf (x > m is false for a NaN x).
TT_VOCAB_CLONES VocabHit next_above_clones(const float* l, size_t i, size_t n, float threshold) {
  float m = -INFINITY;
  auto one_by_one = [&](size_t end) {
    for (; i < end; ++i) {
      if (l[i] > threshold) return true;
      m = l[i] > m ? l[i] : m;
    }
    return false;
  };
  if (one_by_one(std::min(n, (i + kBlock - 1) / kBlock * kBlock))) return {i, m};
  for (; i + kBlock <= n; i += kBlock) {
    // Two 8-lane maxima (a 16-lane vector's selects compile to scalar moves on AVX2).
    Float8 lo = Float8{} - INFINITY, hi = lo;
    for (size_t j = 0; j < kBlock; j += 16) {
      Float8 x, y;
      std::memcpy(&x, l + i + j, sizeof(x));
      std::memcpy(&y, l + i + j + 8, sizeof(y));
      lo = x > lo ? x : lo;
      hi = y > hi ? y : hi;
    }
    lo = hi > lo ? hi : lo;
    Float4 a, b;
    std::memcpy(&a, &lo, sizeof(a));
    std::memcpy(&b, reinterpret_cast<const char*>(&lo) + sizeof(a), sizeof(b));
    a = b > a ? b : a;
    const float block_max = std::max(std::max(a[0], a[1]), std::max(a[2], a[3]));
    if (block_max > threshold) break;
    m = block_max > m ? block_max : m;
  }
  one_by_one(n);
  return {i, m};
}

}  // namespace

VocabHit next_above(const float* v, size_t i, size_t n, float threshold) {
  return next_above_clones(v, i, n, threshold);
}

}  // namespace tt
