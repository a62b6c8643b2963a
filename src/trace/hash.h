// XXH3-64 (seed 0) of a byte range with the widest vector loop the CPU has. Debian's libxxhash is built for the
// x86-64 baseline (SSE2: 15 GB/s here, 8 us for a 32,000-token vocabulary's logits every step); this is the same
// function with the header's AVX2 and AVX-512 accumulate loops, chosen once at run time. The value is identical
// to XXH3_64bits() on every path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tt {

uint64_t xxh3_64(const void* data, size_t bytes);

}  // namespace tt
