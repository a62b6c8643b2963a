// Block layouts of the quantized ggml types, byte for byte as GGUF files store them (ggml-common.h). Scales `d`,
// `dmin`, `m`, `s` are IEEE halves stored as uint16_t (see core/fp16.h).
#pragma once

#include <cstdint>

namespace tt {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK8_1 = 32;
inline constexpr int kQK4_NL = 32;
inline constexpr int kQK_K = 256;       // super-block size of the K-quants
inline constexpr int kKScaleSize = 12;  // packed 6-bit scales/mins of Q4_K and Q5_K

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];  // element j in the low nibble of qs[j], element j+16 in the high nibble
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // fifth bits, little-endian uint32: bit j for element j
  uint8_t qs[kQK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;  // d * sum(qs)
  int8_t qs[kQK8_1];
};
static_assert(sizeof(BlockQ8_1) == 36);

struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // low nibble scale, high nibble min, per 16 elements
  uint8_t qs[kQK_K / 4];       // 2-bit quants
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// A super-block of 16 Q2_K rows stored in a group (ref::group_rows_q2_k): the 16 d, the 16 dmin, the 16 scale
// bytes as 16 parts of 1 (part j: sub-block j's scale and min of the 16 rows) and the 64 quant bytes as 16 parts of
// 4, each part the 16 rows' bytes side by side.
struct Q2KGroup {
  static constexpr uint64_t kBytes = 16 * sizeof(BlockQ2_K);
  static constexpr uint64_t kD = 0, kDmin = 32, kScales = 64, kQuants = 320;
};

struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];  // high bit of each quant
  uint8_t qs[kQK_K / 4];     // low 2 bits
  uint8_t scales[12];        // 16 6-bit scales
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);
// A super-block of 16 Q3_K rows in groups (RowGroups; ref::group_rows_q3_k): the 16 d, the 12 scale bytes as 3 parts
// of 4, the 32 hmask bytes as 8 parts of 4, the 64 qs bytes as 16 parts of 4, each part the 16 rows side by side.
struct Q3KGroup {
  static constexpr uint64_t kBytes = 16 * sizeof(BlockQ3_K);
  static constexpr uint64_t kD = 0, kScales = 32, kHmask = 224, kQs = 736;
};

struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];  // 8 6-bit scales and 8 6-bit mins
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);
// A super-block of 16 Q4_K rows stored in a group (ref::group_rows_q4_k): the 16 d, the 16 dmin, the 12 scale bytes
// as 3 parts of 4 and the 128 quant bytes as 32 parts of 4, each part the 16 rows' bytes side by side.
struct Q4KGroup {
  static constexpr uint64_t kBytes = 16 * sizeof(BlockQ4_K);
  static constexpr uint64_t kD = 0, kDmin = 32, kScales = 64, kQuants = 256;
};

struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // low 4 bits
  uint8_t qh[kQK_K / 4];      // high 2 bits
  int8_t scales[kQK_K / 16];  // 8-bit scales per 16 elements
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];  // sums of qs per 16 elements
};
static_assert(sizeof(BlockQ8_K) == 292);

struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK4_NL / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;             // high 2 bits of the 8 6-bit scales
  uint8_t scales_l[kQK_K / 64];  // low 4 bits
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// The 16 non-linear levels of IQ4_NL / IQ4_XS.
inline constexpr int8_t kValuesIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Scale j (0..7) and min j of the packed 12-byte Q4_K / Q5_K scales.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The 16 signed 6-bit scales of a Q3_K block (already minus 32).
inline void unpack_q3_k_scales(const uint8_t* packed, int8_t* scales) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
    const int high = (packed[8 + (j % 4)] >> (2 * (j / 4))) & 3;
    scales[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

}  // namespace tt
