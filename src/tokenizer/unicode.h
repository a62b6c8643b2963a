// UTF-8 helpers and the GPT-2 byte <-> unicode map, with llama.cpp's conventions for malformed input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tt::unicode {

// Length of the UTF-8 sequence a lead byte announces, as llama.cpp counts it: continuation bytes and ASCII give 1.
inline int utf8_len(char lead) {
  static constexpr uint8_t kLookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLookup[static_cast<uint8_t>(lead) >> 4];
}

// Decode UTF-8 into code points. A byte that does not start a well-formed sequence gives U+FFFD and decoding
// resumes at the next byte (llama.cpp's unicode_cpts_from_utf8). Overlong forms are accepted as they are there.
std::vector<uint32_t> decode_utf8(std::string_view text);

// Append the UTF-8 encoding of a code point. Values past U+10FFFF are written as U+FFFD.
void append_utf8(std::string& out, uint32_t cpt);

// GPT-2 byte-level map: every byte has a printable code point ("Ġ" for space, "Ċ" for newline ...).
const std::string& byte_to_utf8(uint8_t byte);
// The byte a code point stands for, or -1 when the code point is not in the map.
int utf8_cpt_to_byte(uint32_t cpt);

}  // namespace tt::unicode
