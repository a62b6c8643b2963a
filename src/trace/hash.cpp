#include "trace/hash.h"

// The header's own dispatch hooks (what upstream's xxh_x86dispatch.c uses): the AVX2 and AVX-512 accumulate and
// scramble functions compiled with target attributes in this otherwise baseline file; everything inlined here.
#include <immintrin.h>

#include <new>

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

// The streaming update's stripe loops per instruction set (the digest's last stripes take the header's default).
XXH_TARGET_AVX2 XXH_errorcode update_avx2(XXH3_state_t* state, const void* input, size_t len) {
  return XXH3_update(state, static_cast<const xxh_u8*>(input), len, XXH3_accumulate_512_avx2, XXH3_scrambleAcc_avx2);
}

XXH_TARGET_AVX512 XXH_errorcode update_avx512(XXH3_state_t* state, const void* input, size_t len) {
  return XXH3_update(state, static_cast<const xxh_u8*>(input), len, XXH3_accumulate_512_avx512,
                     XXH3_scrambleAcc_avx512);
}

XXH_errorcode update_default(XXH3_state_t* state, const void* input, size_t len) {
  return XXH3_64bits_update(state, input, len);
}

// Both loops of the widest instruction set the CPU has, chosen once.
struct HashPaths {
  XXH3_hashLong64_f hash_long;
  XXH_errorcode (*update)(XXH3_state_t*, const void*, size_t);
};
const HashPaths& hash_paths() {
  static const HashPaths paths = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return HashPaths{hash_long_avx512, update_avx512};
    if (__builtin_cpu_supports("avx2")) return HashPaths{hash_long_avx2, update_avx2};
    return HashPaths{XXH3_hashLong_64b_default, update_default};
  }();
  return paths;
}

}  // namespace

uint64_t xxh3_64(const void* data, size_t bytes) {
  return XXH3_64bits_internal(data, bytes, 0, XXH3_kSecret, sizeof(XXH3_kSecret), hash_paths().hash_long);
}

Xxh3Stream::Xxh3Stream() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  reset();
}

Xxh3Stream::~Xxh3Stream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Xxh3Stream::reset() { XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_)); }

void Xxh3Stream::update(const void* data, size_t bytes) {
  hash_paths().update(static_cast<XXH3_state_t*>(state_), data, bytes);
}

uint64_t Xxh3Stream::digest() const { return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_)); }

}  // namespace tt
