// A request to stop work done in someone else's spare time: a thread doing such work while it waits at a barrier
// checks it between small steps and returns as soon as the barrier has let it go, so the work never makes it late.
#pragma once

#include <atomic>
#include <cstdint>

namespace tt {

struct StopRequest {
  const std::atomic<uint32_t>* phase = nullptr;  // none: never requested
  uint32_t seen = 0;                             // the phase the waiting thread saw: a change means stop
  bool requested() const { return phase != nullptr && phase->load(std::memory_order_relaxed) != seen; }
};

}  // namespace tt
