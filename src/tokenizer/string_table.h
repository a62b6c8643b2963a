// A flat open-addressing map from byte strings to int32 values, with its keys in one arena: building it for a
// 100k-entry vocabulary or merge list costs no allocation per entry, and lookups take a string_view.
#pragma once

#include <xxhash.h>

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tt {

class StringTable {
 public:
  void reserve(size_t n) {
    if (n * 2 > slots_.size()) rehash(std::bit_ceil(n * 2 < 16 ? size_t{16} : n * 2));
  }
  size_t size() const { return size_; }

  // Value for key, or -1.
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash(key);
    const uint32_t tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.value < 0) return -1;
      if (s.tag == tag && s.len == key.size() && std::string_view(arena_.data() + s.off, s.len) == key) return s.value;
    }
  }

  // Insert key -> value (value >= 0). An existing key keeps its value unless overwrite.
  void insert(std::string_view key, int32_t value, bool overwrite) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 16 : slots_.size() * 2);
    const uint64_t h = hash(key);
    const uint32_t tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.value < 0) {
        s = {static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), value, tag};
        arena_.append(key);
        ++size_;
        return;
      }
      if (s.tag == tag && s.len == key.size() && std::string_view(arena_.data() + s.off, s.len) == key) {
        if (overwrite) s.value = value;
        return;
      }
    }
  }

 private:
  struct Slot {
    uint32_t off = 0, len = 0;
    int32_t value = -1;
    uint32_t tag = 0;
  };
  static uint64_t hash(std::string_view k) { return XXH3_64bits(k.data(), k.size()); }
  void rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    for (const Slot& s : old) {
      if (s.value < 0) continue;
      const uint64_t h = hash(std::string_view(arena_.data() + s.off, s.len));
      size_t i = h & mask_;
      while (slots_[i].value >= 0) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::string arena_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace tt
