// The 32-element block kernels for AVX-512 F/BW/VL/DQ + VNNI (CMakeLists.txt compiles *_avx512.cpp with those flags).
#define TT_SIMD_NS avx512
#define TT_SIMD_VNNI 1
#include "quant/legacy_x86.inc"
