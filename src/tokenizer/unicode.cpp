#include "tokenizer/unicode.h"

#include <array>

namespace tt::unicode {

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  const size_t n = s.size();
  auto cont = [&](size_t k) { return k < n && (static_cast<uint8_t>(s[k]) & 0xC0) == 0x80; };
  while (i < n) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    if (!(b & 0x80)) {
      out.push_back(b);
      i += 1;
    } else if (!(b & 0x40)) {
      out.push_back(0xFFFD);  // stray continuation byte
      i += 1;
    } else if (!(b & 0x20)) {
      if (!cont(i + 1)) {
        out.push_back(0xFFFD);
        i += 1;
        continue;
      }
      out.push_back(((b & 0x1Fu) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3Fu));
      i += 2;
    } else if (!(b & 0x10)) {
      if (!cont(i + 1) || !cont(i + 2)) {
        out.push_back(0xFFFD);
        i += 1;
        continue;
      }
      out.push_back(((b & 0x0Fu) << 12) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 6) |
                    (static_cast<uint8_t>(s[i + 2]) & 0x3Fu));
      i += 3;
    } else if (!(b & 0x08)) {
      if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) {
        out.push_back(0xFFFD);
        i += 1;
        continue;
      }
      out.push_back(((b & 0x07u) << 18) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 12) |
                    ((static_cast<uint8_t>(s[i + 2]) & 0x3Fu) << 6) | (static_cast<uint8_t>(s[i + 3]) & 0x3Fu));
      i += 4;
    } else {
      out.push_back(0xFFFD);
      i += 1;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt <= 0x7F) {
    out += static_cast<char>(cpt);
  } else if (cpt <= 0x7FF) {
    out += static_cast<char>(0xC0 | (cpt >> 6));
    out += static_cast<char>(0x80 | (cpt & 0x3F));
  } else if (cpt <= 0xFFFF) {
    out += static_cast<char>(0xE0 | (cpt >> 12));
    out += static_cast<char>(0x80 | ((cpt >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cpt & 0x3F));
  } else if (cpt <= 0x10FFFF) {
    out += static_cast<char>(0xF0 | (cpt >> 18));
    out += static_cast<char>(0x80 | ((cpt >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cpt >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cpt & 0x3F));
  } else {
    append_utf8(out, 0xFFFD);
  }
}

namespace {

struct ByteMap {
  std::array<std::string, 256> to_utf8;
  std::array<uint32_t, 256> to_cpt{};
  std::array<int16_t, 256 + 68> from_cpt{};
  ByteMap() {
    from_cpt.fill(-1);
    // Printable bytes keep their own code point; the rest are numbered from U+0100 in byte order.
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cpt[b] = printable ? static_cast<uint32_t>(b) : next++;
      append_utf8(to_utf8[b], to_cpt[b]);
      from_cpt[to_cpt[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& byte_to_utf8(uint8_t byte) { return byte_map().to_utf8[byte]; }

int utf8_cpt_to_byte(uint32_t cpt) {
  const auto& m = byte_map().from_cpt;
  return cpt < m.size() ? m[cpt] : -1;
}

}  // namespace tt::unicode
