// IEEE half (F16) and bfloat16 (BF16) conversions, bit-exact with ggml's scalar ones: fp32 -> fp16 rounds to
// nearest even (overflow to infinity, NaN becomes a quiet NaN with the sign kept), fp32 -> bf16 rounds to nearest
// even and keeps NaN quiet. Portable integer code only; the bulk row versions (declared here, implemented in
// src/quant) use F16C when the CPU has it.
#pragma once

#include <bit>
#include <cstdint>

namespace tt {

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {  // infinity, or NaN made quiet with its payload kept (as F16C and ggml do)
    bits = sign | 0x7F800000u | (mant << 13) | (mant ? 0x400000u : 0u);
  } else if (exp != 0) {  // normal
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {  // signed zero
    bits = sign;
  } else {             // subnormal: normalize
    uint32_t e = 113;  // exponent of 2^-14 in float bias
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((mant & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return sign | 0x7E00u;   // NaN -> canonical quiet NaN (as ggml)
  if (ax >= 0x477FF000u) return sign | 0x7C00u;  // rounds to >= 65536 -> infinity
  if (ax >= 0x38800000u) {                       // normal half (>= 2^-14)
    // Rebias the exponent, keep 10 mantissa bits, round to nearest even on the 13 dropped bits.
    const uint32_t rebased = ax - (112u << 23);
    const uint32_t round = 0xFFFu + ((rebased >> 13) & 1u);
    return sign | static_cast<uint16_t>((rebased + round) >> 13);
  }
  if (ax < 0x33000000u) return sign;  // below half of the smallest subnormal (2^-25): zero
  // Subnormal half: value = m * 2^-24, m = round(full mantissa >> shift).
  const uint32_t e = ax >> 23;
  const uint32_t mant = (ax & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // e=102 (2^-25) -> 24, e=112 (2^-15) -> 14
  const uint32_t kept = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rounded = kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
  return sign | static_cast<uint16_t>(rounded);
}

inline float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 64u);  // NaN: force quiet
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// Bulk conversions (F16C when the CPU has it, else the scalar functions above; identical results).
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);

}  // namespace tt
