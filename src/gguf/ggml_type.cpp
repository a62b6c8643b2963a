#include "gguf/ggml_type.h"

#include <array>
#include <cctype>

#include "core/error.h"

namespace tt {
namespace {

// Block sizes and bytes per block from ggml's block structs (ggml-common.h).
constexpr std::array<GgmlTypeTraits, 32> kTypes = {{
    {GgmlType::F32, "F32", 1, 4, false},
    {GgmlType::F16, "F16", 1, 2, false},
    {GgmlType::Q4_0, "Q4_0", 32, 18, true},
    {GgmlType::Q4_1, "Q4_1", 32, 20, true},
    {GgmlType::Q5_0, "Q5_0", 32, 22, true},
    {GgmlType::Q5_1, "Q5_1", 32, 24, true},
    {GgmlType::Q8_0, "Q8_0", 32, 34, true},
    {GgmlType::Q8_1, "Q8_1", 32, 36, true},
    {GgmlType::Q2_K, "Q2_K", 256, 84, true},
    {GgmlType::Q3_K, "Q3_K", 256, 110, true},
    {GgmlType::Q4_K, "Q4_K", 256, 144, true},
    {GgmlType::Q5_K, "Q5_K", 256, 176, true},
    {GgmlType::Q6_K, "Q6_K", 256, 210, true},
    {GgmlType::Q8_K, "Q8_K", 256, 292, true},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66, true},
    {GgmlType::IQ2_XS, "IQ2_XS", 256, 74, true},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98, true},
    {GgmlType::IQ1_S, "IQ1_S", 256, 50, true},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18, true},
    {GgmlType::IQ3_S, "IQ3_S", 256, 110, true},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82, true},
    {GgmlType::IQ4_XS, "IQ4_XS", 256, 136, true},
    {GgmlType::I8, "I8", 1, 1, false},
    {GgmlType::I16, "I16", 1, 2, false},
    {GgmlType::I32, "I32", 1, 4, false},
    {GgmlType::I64, "I64", 1, 8, false},
    {GgmlType::F64, "F64", 1, 8, false},
    {GgmlType::IQ1_M, "IQ1_M", 256, 56, true},
    {GgmlType::BF16, "BF16", 1, 2, false},
    {GgmlType::TQ1_0, "TQ1_0", 256, 54, true},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66, true},
    {GgmlType::MXFP4, "MXFP4", 32, 17, true},
}};

}  // namespace

const GgmlTypeTraits* find_type_traits(uint32_t type_id) {
  for (const GgmlTypeTraits& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == type_id) return &t;
  }
  return nullptr;
}

const GgmlTypeTraits& type_traits(GgmlType type) {
  const GgmlTypeTraits* t = find_type_traits(static_cast<uint32_t>(type));
  TT_CHECK(t != nullptr, "type id {} has no traits", static_cast<uint32_t>(type));
  return *t;
}

std::string_view type_name(GgmlType type) { return type_traits(type).name; }

std::optional<GgmlType> type_from_name(std::string_view name) {
  for (const GgmlTypeTraits& t : kTypes) {
    if (t.name.size() != name.size()) continue;
    bool equal = true;
    for (size_t i = 0; i < name.size() && equal; ++i)
      equal = std::toupper(static_cast<unsigned char>(name[i])) == t.name[i];
    if (equal) return t.type;
  }
  return std::nullopt;
}

}  // namespace tt
