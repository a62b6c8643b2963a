// How a split node's work is handed out to the threads: an even split (small per-row work), or chunks that shrink as
// the work runs out, so the threads reach the barrier after it within about one small chunk of each other without
// a claim per small chunk.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/error.h"

namespace tt {

// The most worker threads the engine runs (`-t`); a run directory claiming more is refused by its reader, which
// sizes per-thread tables from thread ids.
inline constexpr int kMaxThreads = 1024;

// Units [begin, end).
struct Range {
  int64_t begin, end;
};

// Thread ith's share of n units split evenly over nth threads (the last share may be shorter or empty).
inline Range split(int64_t n, int ith, int nth) {
  const int64_t per = (n + nth - 1) / nth;
  const int64_t b = std::min<int64_t>(n, per * ith);
  return {b, std::min<int64_t>(n, b + per)};
}

// n units in chunks for nth threads: rounds of nth equal chunks, each round holding half of the units left (the
// first round about half of them all), down to chunks of min_units.
// Thread i's first chunk is chunk i (no claim); the later ones are claimed in order from a shared counter (a thread
// the machine slows down takes fewer). With fixed chunks a thread waited at the barrier half a chunk on average
// (8.6% of a synth-llama-768 generation step with 4 chunks a thread); here the last chunks are small and the
// first ones large, so there are still few claims (each a cache line crossing between the threads' cores).
// Each thread walks the schedule with its own ShrinkingChunks, forward only: its claims only grow, so the walk to
// all of them costs one pass over the chunks (~20 at most), not one from the start per claim.
class ShrinkingChunks {
 public:
  ShrinkingChunks(int64_t n, int nth, int64_t min_units)
      : n_(n), nth_(nth), floor_(std::max<int64_t>(1, min_units)), size_(round_size()) {}

  // Units of chunk c, c not below the last chunk asked; empty at n past the last chunk.
  Range chunk(int64_t c) {
    TT_CHECK(c >= j_, "chunk {} asked after chunk {}: a thread's chunks are walked forward", c, j_);
    for (; j_ < c && begin_ < n_; ++j_) {
      begin_ = std::min(n_, begin_ + size_);
      if ((j_ + 1) % nth_ == 0) size_ = round_size();  // chunk j_ + 1 starts a round
    }
    if (begin_ == n_) return {n_, n_};
    return {begin_, std::min(n_, begin_ + size_)};
  }

 private:
  // A round: nth chunks holding together half of what is left (ceil), or min_units each.
  int64_t round_size() const { return std::max(floor_, (n_ - begin_ + 2 * nth_ - 1) / (2 * nth_)); }

  int64_t n_, nth_, floor_;
  int64_t j_ = 0, begin_ = 0;  // chunk j_ starts at begin_
  int64_t size_;               // the size of chunk j_'s round's chunks
};

}  // namespace tt
