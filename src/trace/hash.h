// XXH3-64 (seed 0) of a byte range with the widest vector loop the CPU has. Debian's libxxhash is built for the
// x86-64 baseline (SSE2), and the logits are hashed every step; this is the same
// function with the header's AVX2 and AVX-512 accumulate loops, chosen once at run time. The value is identical
// to XXH3_64bits() on every path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tt {

uint64_t xxh3_64(const void* data, size_t bytes);

// The same hash of bytes given in consecutive pieces (digest() == xxh3_64 of their concatenation), with the same
// vector loops: the tracer hashes a step's logits a piece at a time while the threads wait at barriers.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void reset();
  void update(const void* data, size_t bytes);
  uint64_t digest() const;

 private:
  void* state_;  // XXH3_state_t (64-byte aligned, from XXH3_createState)
};

}  // namespace tt
