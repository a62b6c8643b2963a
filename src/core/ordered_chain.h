// Runs an action on parts 0, 1, 2, ... strictly in order and once each, on whichever thread finishes the part that
// lets it run, without any thread waiting for another: the thread marking part p done runs the chain from the first
// part not yet run for as long as parts are done, unless another thread is running it, which then picks p up
// before it lets go. (The tracer hashes the logits a landscape part at a time this way, each part on the worker
// that just read it.)
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "core/error.h"

namespace tt {

class OrderedChain {
 public:
  // Starts a chain of n parts, none done; not while part_done() runs.
  void begin(size_t n_parts) {
    if (n_parts > capacity_) {
      done_ = std::make_unique<std::atomic<bool>[]>(n_parts);
      capacity_ = n_parts;
    }
    for (size_t i = 0; i < n_parts; ++i) done_[i].store(false, std::memory_order_relaxed);
    n_ = n_parts;
    next_ = 0;
    busy_.store(false, std::memory_order_release);
  }

  // Marks `part` done; runs action(i) for every part i that is now next in line (possibly none, possibly others').
  template <typename Action>
  void part_done(size_t part, Action&& action) {
    TT_CHECK(part < n_, "part {} of a chain of {}", part, n_);
    // Sequentially consistent: a thread letting go of the chain then re-reading the next flag, and a thread setting
    // that flag then finding the chain taken, cannot both miss the part.
    done_[part].store(true);
    while (!busy_.exchange(true)) {
      size_t i = next_;
      for (; i < n_ && done_[i].load(); ++i) action(i);
      next_ = i;
      busy_.store(false);
      if (i == n_ || !done_[i].load()) return;
    }
  }

  // After every part_done() call has returned (e.g. after the pool's job): how many parts the action ran on.
  size_t completed() const { return next_; }
  bool all_completed() const { return next_ == n_; }

 private:
  std::unique_ptr<std::atomic<bool>[]> done_;
  size_t capacity_ = 0, n_ = 0;
  size_t next_ = 0;  // the first part the action has not run on; only the thread holding busy_ touches it
  std::atomic<bool> busy_{false};
};

}  // namespace tt
