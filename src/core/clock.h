// The clocks the engine and the tracer time with.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace tt {

// Monotonic nanoseconds (steady clock).
inline uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// The cheapest monotonic counter for timing ops: the time-stamp counter on x86 (11 ns a read on the test VM
// against 28 ns for the steady clock, and a step reads it twice per op on every worker); the observer maps ticks
// to nanoseconds with steady-clock readings taken around the step. Elsewhere, nanoseconds.
inline uint64_t tick_count() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return now_ns();
#endif
}

}  // namespace tt
