#include "trace/json_line.h"

#include <fmt/compile.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <type_traits>

namespace tt {

void JsonLine::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.back()) out_ += ',';
  first_.back() = 0;
}

JsonLine& JsonLine::open(char bracket) {
  separate();
  out_ += bracket;
  first_.push_back(1);
  return *this;
}

JsonLine& JsonLine::close(char bracket) {
  out_ += bracket;
  first_.pop_back();
  return *this;
}

namespace {

// Characters a JSON string holds as they are: printable ASCII but the quote and the backslash.
bool is_plain_char(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}
bool is_plain(std::string_view s) {
  for (char c : s)
    if (!is_plain_char(c)) return false;
  return true;
}

}  // namespace

JsonLine& JsonLine::begin_object() { return open('{'); }
JsonLine& JsonLine::end_object() { return close('}'); }
JsonLine& JsonLine::begin_array(std::string_view k) { return key(k).open('['); }
JsonLine& JsonLine::begin_array() { return open('['); }
JsonLine& JsonLine::end_array() { return close(']'); }

JsonLine& JsonLine::key(std::string_view k) {
  separate();
  // Keys are short plain literals: quoted with the colon in one append (a line has ~60 of them).
  char buf[64];
  if (k.size() + 3 <= sizeof(buf) && is_plain(k)) {
    buf[0] = '"';
    std::memcpy(buf + 1, k.data(), k.size());
    buf[k.size() + 1] = '"';
    buf[k.size() + 2] = ':';
    out_.append(buf, k.size() + 3);
  } else {
    append_json_string(out_, k);
    out_ += ':';
  }
  after_key_ = true;
  return *this;
}

namespace {

// Formats into a stack buffer, then one append (a back_inserter into the string appends character by character).
// JSON has no NaN or infinity: those are null.
template <typename T>
void append_number(std::string& out, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) {
      out += "null";
      return;
    }
  }
  char buf[40];
  const char* end = fmt::format_to(buf, FMT_COMPILE("{}"), v);
  out.append(buf, static_cast<size_t>(end - buf));
}

}  // namespace

JsonLine& JsonLine::value(double v) {
  separate();
  append_number(out_, v);
  return *this;
}

JsonLine& JsonLine::value(float v) {
  separate();
  append_number(out_, v);
  return *this;
}

JsonLine& JsonLine::value(int64_t v) {
  separate();
  append_number(out_, v);
  return *this;
}

JsonLine& JsonLine::value(uint64_t v) {
  separate();
  append_number(out_, v);
  return *this;
}

JsonLine& JsonLine::value(bool v) {
  separate();
  out_ += v ? "true" : "false";
  return *this;
}

JsonLine& JsonLine::value(std::string_view s) {
  separate();
  append_json_string(out_, s);
  return *this;
}

JsonLine& JsonLine::null() {
  separate();
  out_ += "null";
  return *this;
}

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not one (overlong forms, surrogates and
// code points above U+10FFFF are invalid, as in RFC 3629).
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4, cp = c & 0x07;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return 0;
  return n;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  // Most strings (ASCII token pieces) need no escape: copied whole.
  size_t i = 0;
  while (i < s.size() && is_plain_char(s[i])) ++i;
  out.append(s.substr(0, i));
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      switch (c) {
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        default:
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
      }
      ++i;
    } else if (const size_t n = utf8_sequence(s, i)) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the invalid byte
      ++i;
    }
  }
  out += '"';
}

}  // namespace tt
