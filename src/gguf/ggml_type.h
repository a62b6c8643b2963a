// The ggml tensor element types that GGUF files use, with their block layout. One table, used everywhere a byte
// size is computed, so a quantized tensor can never be sized as if it were F32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tt {

// Numeric ids as stored in GGUF files (ggml.h). Gaps are ids ggml has retired.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;   // as llama.cpp prints it: "Q4_K", "F32"
  uint32_t block_size;     // elements per block
  uint32_t bytes_per_block;
  bool quantized;
};

// Traits of a known type id, or nullopt for an id no GGUF file should hold.
const GgmlTypeTraits* find_type_traits(uint32_t type_id);
// Traits of a type that is known to be valid (a GgmlType value).
const GgmlTypeTraits& type_traits(GgmlType type);
std::string_view type_name(GgmlType type);
std::optional<GgmlType> type_from_name(std::string_view name);  // case-insensitive

// Bytes of a row of n elements; n must be a multiple of the block size (checked by callers that read files).
inline uint64_t row_bytes(GgmlType type, uint64_t n) {
  const GgmlTypeTraits& t = type_traits(type);
  return n / t.block_size * t.bytes_per_block;
}

}  // namespace tt
