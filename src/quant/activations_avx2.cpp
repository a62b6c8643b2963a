// The activation quantizer kernels for AVX2 + FMA + F16C (CMakeLists.txt compiles *_avx2.cpp with those flags).
#define TT_SIMD_NS avx2
#define TT_SIMD_VNNI 0
#include "quant/activations_x86.inc"
