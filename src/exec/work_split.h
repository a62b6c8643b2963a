// How a split node's work is handed out to the threads: chunks that shrink as the work runs out, so the threads
// reach the barrier after it within about one small chunk of each other without a claim per small chunk.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tt {

// n units in chunks for nth threads: rounds of nth equal chunks, each round holding half of the units left (the
// first round about half of them all), down to chunks of min_units.
// Thread i's first chunk is chunk i (no claim); the later ones are claimed in order from a shared counter (a thread
// the machine slows down takes fewer). With fixed chunks a thread waited at the barrier half a chunk on average
// (8.6% of a synth-llama-768 generation step with 4 chunks a thread); here the last chunks are small and the
// first ones large, so there are still few claims (each a cache line crossing between the threads' cores).
struct ShrinkingChunks {
  int64_t n = 0;
  int nth = 1;
  int64_t min_units = 1;

  struct Range {
    int64_t begin, end;
  };
  // Units [begin, end) of chunk c; empty at n past the last chunk.
  Range chunk(int64_t c) const {
    const int64_t floor = std::max<int64_t>(1, min_units);
    int64_t begin = 0;
    for (int64_t j = 0;;) {
      // A round: nth chunks holding together half of what is left (ceil), or min_units each.
      const int64_t size = std::max(floor, (n - begin + 2 * nth - 1) / (2 * nth));
      for (int k = 0; k < nth; ++k, ++j) {
        const int64_t end = std::min(n, begin + size);
        if (j == c) return {begin, end};
        if (end == n) return {n, n};
        begin = end;
      }
    }
  }
};

}  // namespace tt
