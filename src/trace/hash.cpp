#include "trace/hash.h"

// The header's own dispatch hooks (what upstream's xxh_x86dispatch.c uses): the AVX2 and AVX-512 accumulate and
// scramble functions compiled with target attributes in this otherwise baseline file; everything inlined here.
#include <immintrin.h>

// GCC 12 reports the AVX-512 intrinsics' internal _mm512_undefined_epi32() operands as (maybe) uninitialised
// (a false positive of the header, not of this code).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define XXH_INLINE_ALL
#define XXH_X86DISPATCH  // accumulators aligned for AVX-512
#define XXH_DISPATCH_AVX2 1
#define XXH_TARGET_AVX2 __attribute__((__target__("avx2")))
#define XXH_DISPATCH_AVX512 1
#define XXH_TARGET_AVX512 __attribute__((__target__("avx512f")))
#include <xxhash.h>

namespace tt {
namespace {

// The long-input loop (inputs over 240 bytes) per instruction set; shorter inputs take the scalar paths.
XXH_TARGET_AVX2 XXH64_hash_t hash_long_avx2(const void* input, size_t len, XXH64_hash_t, const xxh_u8*, size_t) {
  return XXH3_hashLong_64b_internal(input, len, XXH3_kSecret, sizeof(XXH3_kSecret), XXH3_accumulate_512_avx2,
                                    XXH3_scrambleAcc_avx2);
}

XXH_TARGET_AVX512 XXH64_hash_t hash_long_avx512(const void* input, size_t len, XXH64_hash_t, const xxh_u8*, size_t) {
  return XXH3_hashLong_64b_internal(input, len, XXH3_kSecret, sizeof(XXH3_kSecret), XXH3_accumulate_512_avx512,
                                    XXH3_scrambleAcc_avx512);
}

// The loop of the widest instruction set the CPU has, chosen once.
XXH3_hashLong64_f hash_long() {
  static const XXH3_hashLong64_f f = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return &hash_long_avx512;
    if (__builtin_cpu_supports("avx2")) return &hash_long_avx2;
    return &XXH3_hashLong_64b_default;
  }();
  return f;
}

}  // namespace

uint64_t xxh3_64(const void* data, size_t bytes) {
  return XXH3_64bits_internal(data, bytes, 0, XXH3_kSecret, sizeof(XXH3_kSecret), hash_long());
}

}  // namespace tt
