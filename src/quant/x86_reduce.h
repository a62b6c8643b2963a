// Horizontal reductions in the exact order of the x86 intrinsics llama.cpp ends its kernels with, for scalar code
// that must reproduce their rounding.
#pragma once

namespace tt {

// _mm512_reduce_add_ps as GCC implements it: 256-bit halves, 128-bit halves, lanes {0,1}+{2,3}, then [0]+[1].
inline float reduce_add_16_x86(const float* v) {
  float h8[8], h4[4];
  for (int l = 0; l < 8; ++l) h8[l] = v[8 + l] + v[l];
  for (int l = 0; l < 4; ++l) h4[l] = h8[4 + l] + h8[l];
  return (h4[0] + h4[2]) + (h4[1] + h4[3]);
}

}  // namespace tt
