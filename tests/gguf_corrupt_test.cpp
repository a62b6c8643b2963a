// A corpus of handcrafted corrupt GGUF files, built with GgufWriter and byte patches at its Layout offsets. Each
// must be rejected with its own specific message (what is wrong, which key or tensor, at which byte), never
// accepted, never a crash. Valid edge cases at the end check the reader does not reject what it must accept.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/memory_map.h"
#include "gguf/writer.h"

namespace tt {
namespace {

using Bytes = std::vector<uint8_t>;

// The file must be rejected with a message holding every one of `words`.
testing::AssertionResult Rejects(const Bytes& bytes, std::initializer_list<std::string> words) {
  try {
    GgufFile::parse(bytes, "corrupt.gguf");
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.find("corrupt.gguf") == std::string::npos)
      return testing::AssertionFailure() << "message does not name the file: " << msg;
    for (const std::string& w : words)
      if (msg.find(w) == std::string::npos)
        return testing::AssertionFailure() << "message lacks \"" << w << "\": " << msg;
    return testing::AssertionSuccess() << msg;
  } catch (const std::exception& e) {
    return testing::AssertionFailure() << "threw a non-tt::Error: " << e.what();
  }
  return testing::AssertionFailure() << "the reader accepted the file";
}

// A parsed file together with its bytes, which must outlive it.
struct Parsed {
  Bytes bytes;
  std::unique_ptr<GgufFile> file;
  explicit operator bool() const { return file != nullptr; }
  const GgufFile* operator->() const { return file.get(); }
  const GgufFile& operator*() const { return *file; }
};

Parsed Accepts(Bytes bytes) {
  Parsed p{std::move(bytes), nullptr};
  try {
    p.file = GgufFile::parse(p.bytes, "valid.gguf");
  } catch (const Error& e) {
    ADD_FAILURE() << "rejected: " << e.what();
  }
  return p;
}

void put_u32(Bytes& b, uint64_t at, uint32_t v) {
  ASSERT_LE(at + 4, b.size());
  std::memcpy(b.data() + at, &v, 4);
}
void put_u64(Bytes& b, uint64_t at, uint64_t v) {
  ASSERT_LE(at + 8, b.size());
  std::memcpy(b.data() + at, &v, 8);
}

Bytes pattern(size_t n, uint8_t seed = 1) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 13);
  return b;
}

GgufValue scalar(GgufValueType type) {
  GgufValue v;
  v.type = type;
  return v;
}

GgufValue array_value(GgufValueType element_type, std::vector<GgufValue> items) {
  GgufValue v;
  v.type = GgufValueType::ARRAY;
  v.element_type = element_type;
  v.array = std::move(items);
  return v;
}

// Offsets inside records, from the Layout's record starts.
uint64_t kv_type_offset(const GgufWriter::Layout& l, size_t k, const std::string& key) {
  return l.kv_offsets[k] + 8 + key.size();
}
uint64_t kv_value_offset(const GgufWriter::Layout& l, size_t k, const std::string& key) {
  return kv_type_offset(l, k, key) + 4;
}
uint64_t tensor_dims_offset(const GgufWriter::Layout& l, size_t k, const std::string& name) {
  return l.tensor_info_offsets[k] + 8 + name.size();
}
uint64_t tensor_type_offset(const GgufWriter::Layout& l, size_t k, const std::string& name, int n_dims) {
  return tensor_dims_offset(l, k, name) + 4 + 8 * n_dims;
}
uint64_t tensor_offset_offset(const GgufWriter::Layout& l, size_t k, const std::string& name, int n_dims) {
  return tensor_type_offset(l, k, name, n_dims) + 4;
}

// A small valid file with a bit of everything: three kvs (string, u32, string array, bool) and two tensors.
struct Small {
  GgufWriter w;
  Small() {
    w.add_string("general.architecture", "llama");
    w.add_u32("test.count", 7);
    w.add_string_array("tokenizer.ggml.tokens", {"<unk>", "hello", ""});
    w.add_bool("test.flag", true);
    w.add_tensor("token_embd.weight", GgmlType::F32, {4, 2}, pattern(32));
    w.add_tensor("blk.0.ffn_down.weight", GgmlType::Q8_0, {32, 1}, pattern(34, 7));
  }
  Bytes bytes() const { return w.bytes(); }
  GgufWriter::Layout layout() const { return w.layout(); }
};

const std::vector<std::string> kSmallKeys = {"general.architecture", "test.count", "tokenizer.ggml.tokens",
                                             "test.flag"};
const std::vector<std::string> kSmallTensors = {"token_embd.weight", "blk.0.ffn_down.weight"};

TEST(GgufCorrupt, SmallFixtureIsValid) {
  Small s;
  auto f = Accepts(s.bytes());
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kvs().size(), 4u);
  EXPECT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->data_offset(), s.layout().data_offset);
  EXPECT_EQ(f->tensors()[1].offset_end(), f->file_size());
}

TEST(GgufCorrupt, RejectsHelperIsStrict) {
  EXPECT_FALSE(Rejects(Small().bytes(), {}));  // a valid file is not "rejected"
  Bytes b = Small().bytes();
  b[0] = 'X';
  EXPECT_FALSE(Rejects(b, {"a word the message does not hold"}));
}

// ---- header ----

TEST(GgufCorrupt, BadMagic) {
  Bytes b = Small().bytes();
  std::memcpy(b.data(), "GGML", 4);
  EXPECT_TRUE(Rejects(b, {"not a GGUF file", "bad magic 47474d4c", "at byte 0"}));
  std::memcpy(b.data(),
              "\x7f"
              "ELF",
              4);
  EXPECT_TRUE(Rejects(b, {"bad magic 7f454c46"}));
  EXPECT_TRUE(Rejects(Bytes{'G', 'G', 'U'}, {"truncated", "magic"}));
  EXPECT_TRUE(Rejects(Bytes{}, {"truncated", "magic"}));
}

TEST(GgufCorrupt, UnsupportedVersions) {
  Bytes b = Small().bytes();
  put_u32(b, 4, 1);
  EXPECT_TRUE(Rejects(b, {"GGUF v1 is not supported"}));
  put_u32(b, 4, 0);
  EXPECT_TRUE(Rejects(b, {"unsupported GGUF version 0", "at byte 4"}));
  put_u32(b, 4, 4);
  EXPECT_TRUE(Rejects(b, {"unsupported GGUF version 4", "at byte 4"}));
  put_u32(b, 4, 0xffffffffu);
  EXPECT_TRUE(Rejects(b, {"unsupported GGUF version 4294967295"}));
  // A big-endian file stores version 3 as 00 00 00 03.
  put_u32(b, 4, 0x03000000u);
  EXPECT_TRUE(Rejects(b, {"unsupported GGUF version 50331648", "big-endian"}));
  put_u32(b, 4, 0x02000000u);
  EXPECT_TRUE(Rejects(b, {"big-endian"}));
}

TEST(GgufCorrupt, HugeCounts) {
  Small s;
  Bytes b = s.bytes();
  put_u64(b, s.layout().tensor_count_offset, uint64_t{1} << 63);
  EXPECT_TRUE(Rejects(b, {"tensor count 9223372036854775808 cannot fit", "at byte 8"}));
  b = s.bytes();
  put_u64(b, s.layout().kv_count_offset, std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(Rejects(b, {"metadata count 18446744073709551615 cannot fit", "at byte 16"}));
  // Plausible but still more than the file could hold.
  b = s.bytes();
  put_u64(b, s.layout().kv_count_offset, b.size());
  EXPECT_TRUE(Rejects(b, {"metadata count", "cannot fit"}));
  b = s.bytes();
  put_u64(b, s.layout().tensor_count_offset, b.size() / 24 + 1);
  EXPECT_TRUE(Rejects(b, {"tensor count", "cannot fit"}));
  // One more kv than the file has: the reader reads the tensor infos as a kv and fails somewhere, cleanly.
  b = s.bytes();
  put_u64(b, s.layout().kv_count_offset, 5);
  EXPECT_TRUE(Rejects(b, {}));
}

// Every prefix of a valid file is rejected, with a message naming what was being read where the cut falls.
TEST(GgufCorrupt, TruncatedAtEveryLength) {
  Small s;
  const Bytes full = s.bytes();
  const GgufWriter::Layout l = s.layout();
  auto f = GgufFile::parse(full);
  const uint64_t n_kv = 4, n_tensors = 2;
  for (size_t len = 0; len < full.size(); ++len) {
    SCOPED_TRACE("truncated to " + std::to_string(len) + " bytes");
    Bytes b(full.begin(), full.begin() + len);
    if (len < 4) {
      EXPECT_TRUE(Rejects(b, {"truncated", "magic"}));
    } else if (len < 8) {
      EXPECT_TRUE(Rejects(b, {"truncated", "version"}));
    } else if (len < 16) {
      EXPECT_TRUE(Rejects(b, {"truncated", "tensor count", "at byte 8"}));
    } else if (len < 24) {
      EXPECT_TRUE(Rejects(b, {"truncated", "metadata key-value count", "at byte 16"}));
    } else if (len - 24 < 13 * n_kv) {
      EXPECT_TRUE(Rejects(b, {"metadata count 4 cannot fit", "at byte 16"}));
    } else if (len - 24 < 24 * n_tensors) {
      EXPECT_TRUE(Rejects(b, {"tensor count 2 cannot fit", "at byte 8"}));
    } else if (len < f->kv_end()) {
      size_t k = 0;
      while (k + 1 < n_kv && l.kv_offsets[k + 1] <= len) ++k;
      const std::string& key = kSmallKeys[k];
      // Inside the key itself the entry is known by number; after it, by name.
      if (len < l.kv_offsets[k] + 8 + key.size())
        EXPECT_TRUE(Rejects(b, {"key of metadata entry " + std::to_string(k)}));
      else
        EXPECT_TRUE(Rejects(b, {key}));
    } else if (len < f->tensor_info_end()) {
      size_t k = 0;
      while (k + 1 < n_tensors && l.tensor_info_offsets[k + 1] <= len) ++k;
      const std::string& name = kSmallTensors[k];
      if (len < l.tensor_info_offsets[k] + 8 + name.size())
        EXPECT_TRUE(Rejects(b, {"name of tensor " + std::to_string(k)}));
      else
        EXPECT_TRUE(Rejects(b, {"truncated", "tensor '" + name + "'"}));
    } else if (len < f->data_offset()) {
      EXPECT_TRUE(Rejects(b, {"truncated", "data section would start at byte " + std::to_string(f->data_offset())}));
    } else {
      // Inside the data: the first tensor (in file order) that no longer fits is named.
      const GgufTensorInfo& t = f->tensors()[len < f->tensors()[0].offset_end() ? 0 : 1];
      EXPECT_TRUE(Rejects(b, {"tensor '" + t.name + "'", "extends past the end of the file (" + std::to_string(len)}));
    }
  }
}

// Truncation inside each kind of value, in a file with one long kv of each type (so the count checks pass).
TEST(GgufCorrupt, TruncatedInsideEveryValueType) {
  const std::string key = "a.key.long.enough.that.the.count.check.passes";
  for (uint32_t t = 0; t <= 12; ++t) {
    auto type = static_cast<GgufValueType>(t);
    SCOPED_TRACE(std::string(value_type_name(type)));
    GgufValue v = scalar(type);
    if (type == GgufValueType::STRING) v.str = "some string value";
    if (type == GgufValueType::ARRAY)
      v = array_value(GgufValueType::UINT64, {scalar(GgufValueType::UINT64), scalar(GgufValueType::UINT64)});
    GgufWriter w;
    w.add_kv(key, v);
    Bytes full = w.bytes();
    uint64_t value_at = kv_value_offset(w.layout(), 0, key);
    auto f = GgufFile::parse(full);
    for (uint64_t len = value_at; len < f->kv_end(); ++len)
      EXPECT_TRUE(Rejects(Bytes(full.begin(), full.begin() + len), {key})) << len;
  }
}

// ---- lengths and counts inside records ----

TEST(GgufCorrupt, StringLengthPastTheEnd) {
  Small s;
  const GgufWriter::Layout l = s.layout();
  Bytes b = s.bytes();
  put_u64(b, l.kv_offsets[0], uint64_t{1} << 40);
  EXPECT_TRUE(Rejects(b, {"key of metadata entry 0", "at byte 24", "has length 1099511627776", "past the end"}));
  put_u64(b, l.kv_offsets[0], std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(Rejects(b, {"has length 18446744073709551615", "past the end"}));
  // The string value of a key.
  b = s.bytes();
  uint64_t at = kv_value_offset(l, 0, kSmallKeys[0]);
  put_u64(b, at, b.size());
  EXPECT_TRUE(
      Rejects(b, {"string value of key 'general.architecture'", "at byte " + std::to_string(at), "past the end"}));
  // A string element of an array.
  b = s.bytes();
  at = kv_value_offset(l, 2, kSmallKeys[2]) + 12;
  put_u64(b, at, uint64_t{1} << 62);
  EXPECT_TRUE(Rejects(b, {"tokenizer.ggml.tokens", "at byte " + std::to_string(at), "past the end"}));
  // A tensor name.
  b = s.bytes();
  put_u64(b, l.tensor_info_offsets[1], 1000000);
  EXPECT_TRUE(Rejects(b, {"name of tensor 1", "at byte " + std::to_string(l.tensor_info_offsets[1]),
                          "has length 1000000", "past the end"}));
}

TEST(GgufCorrupt, ArrayLengthPastTheEnd) {
  Small s;
  const GgufWriter::Layout l = s.layout();
  Bytes b = s.bytes();
  uint64_t count_at = kv_value_offset(l, 2, kSmallKeys[2]) + 4;
  put_u64(b, count_at, uint64_t{1} << 61);
  EXPECT_TRUE(Rejects(b, {"key 'tokenizer.ggml.tokens'", "array of 2305843009213693952 STRING elements cannot fit",
                          "at byte " + std::to_string(count_at)}));
  // Byte arrays: one byte more than the file holds.
  GgufWriter w;
  GgufValue bytes = array_value(GgufValueType::UINT8, std::vector<GgufValue>(10, scalar(GgufValueType::UINT8)));
  w.add_kv("blob", bytes);
  b = w.bytes();
  count_at = kv_value_offset(w.layout(), 0, "blob") + 4;
  put_u64(b, count_at, b.size() - count_at - 8 + 1);
  EXPECT_TRUE(Rejects(b, {"key 'blob'", "UINT8 elements cannot fit"}));
}

// ---- tensor dimensions ----

TEST(GgufCorrupt, DimensionCount) {
  GgufWriter w;
  w.add_tensor("five", GgmlType::F32, {1, 1, 1, 1, 1}, pattern(4));
  uint64_t at = tensor_dims_offset(w.layout(), 0, "five");
  EXPECT_TRUE(Rejects(w.bytes(), {"tensor 'five' has 5 dimensions (must be 1 to 4)", "at byte " + std::to_string(at)}));

  GgufWriter z;
  z.add_tensor("scalar", GgmlType::F32, {}, pattern(4));
  EXPECT_TRUE(Rejects(z.bytes(), {"tensor 'scalar' has 0 dimensions"}));

  Small s;
  Bytes b = s.bytes();
  put_u32(b, tensor_dims_offset(s.layout(), 0, kSmallTensors[0]), 0xffffffffu);
  EXPECT_TRUE(Rejects(b, {"tensor 'token_embd.weight' has 4294967295 dimensions"}));
}

TEST(GgufCorrupt, DimensionOverflow) {
  {
    GgufWriter w;
    w.add_tensor("big", GgmlType::F32, {int64_t{1} << 32, int64_t{1} << 32}, {});
    EXPECT_TRUE(Rejects(w.bytes(), {"tensor 'big': element count overflows at dimension 1 (= 4294967296)"}));
  }
  {
    GgufWriter w;
    w.add_tensor("big", GgmlType::F32, {3, int64_t{1} << 31, int64_t{1} << 31}, {});
    EXPECT_TRUE(Rejects(w.bytes(), {"tensor 'big': element count overflows at dimension 2"}));
  }
  {
    GgufWriter w;
    w.add_tensor("negative", GgmlType::F32, {4, -1}, {});
    uint64_t at = tensor_dims_offset(w.layout(), 0, "negative") + 4 + 8;
    EXPECT_TRUE(Rejects(w.bytes(), {"tensor 'negative': dimension 1 = 18446744073709551615 is negative or too large",
                                    "at byte " + std::to_string(at)}));
  }
  {
    // Elements fit in int64 but bytes do not fit in uint64.
    GgufWriter w;
    w.add_tensor("wide", GgmlType::F64, {int64_t{1} << 62}, {});
    EXPECT_TRUE(Rejects(w.bytes(), {"tensor 'wide': byte size overflows"}));
  }
  {
    // Sizes that do not overflow but are far larger than the file.
    GgufWriter w;
    w.add_tensor("huge", GgmlType::F32, {int64_t{1} << 40}, {});
    EXPECT_TRUE(Rejects(w.bytes(), {"tensor 'huge' (4398046511104 bytes at data offset 0", "extends past the end"}));
  }
}

TEST(GgufCorrupt, RowNotWholeBlocks) {
  GgufWriter w;
  w.add_tensor("q", GgmlType::Q4_0, {48, 2}, pattern(54));
  EXPECT_TRUE(Rejects(w.bytes(), {"tensor 'q': row length 48 is not a whole number of Q4_0 blocks of 32 elements"}));
  GgufWriter k;
  k.add_tensor("k", GgmlType::Q4_K, {128}, pattern(72));
  EXPECT_TRUE(Rejects(k.bytes(), {"tensor 'k': row length 128", "Q4_K blocks of 256"}));
  // Blocks run along ne[0] only: a total that is a multiple of the block size does not help.
  GgufWriter m;
  m.add_tensor("m", GgmlType::Q8_0, {16, 2}, pattern(34));
  EXPECT_TRUE(Rejects(m.bytes(), {"tensor 'm': row length 16"}));
}

TEST(GgufCorrupt, UnknownTensorType) {
  for (uint32_t id : {4u, 5u, 31u, 36u, 40u, 1000u, 0xffffffffu}) {
    Small s;
    Bytes b = s.bytes();
    uint64_t at = tensor_type_offset(s.layout(), 1, kSmallTensors[1], 2);
    put_u32(b, at, id);
    EXPECT_TRUE(Rejects(b, {"tensor 'blk.0.ffn_down.weight' has unknown type id " + std::to_string(id),
                            "at byte " + std::to_string(at)}));
  }
}

// ---- tensor offsets ----

TEST(GgufCorrupt, OffsetPastTheEnd) {
  Small s;
  const GgufWriter::Layout l = s.layout();
  Bytes b = s.bytes();
  put_u64(b, tensor_offset_offset(l, 1, kSmallTensors[1], 2), 1 << 20);
  EXPECT_TRUE(Rejects(b, {"tensor 'blk.0.ffn_down.weight' (34 bytes at data offset 1048576", "extends past the end",
                          "at byte " + std::to_string(l.tensor_info_offsets[1])}));
  // Where offset + size would wrap around.
  put_u64(b, tensor_offset_offset(l, 1, kSmallTensors[1], 2), std::numeric_limits<uint64_t>::max() - 31);
  EXPECT_TRUE(Rejects(b, {"tensor 'blk.0.ffn_down.weight'", "extends past the end"}));
  // Starts inside the file, ends one byte past it.
  b = s.bytes();
  b.pop_back();
  EXPECT_TRUE(Rejects(b, {"tensor 'blk.0.ffn_down.weight'",
                          "extends past the end of the file (" + std::to_string(b.size()) + " bytes)"}));
}

TEST(GgufCorrupt, MisalignedOffset) {
  Small s;
  Bytes b = s.bytes();
  uint64_t at = tensor_offset_offset(s.layout(), 1, kSmallTensors[1], 2);
  put_u64(b, at, 36);
  EXPECT_TRUE(Rejects(b, {"tensor 'blk.0.ffn_down.weight': data offset 36 is not a multiple of the alignment 32",
                          "at byte " + std::to_string(at)}));
  // With a declared alignment, that one counts.
  GgufWriter w;
  w.set_alignment(64);
  w.add_tensor("a", GgmlType::F32, {8}, pattern(32));
  w.add_tensor("b", GgmlType::F32, {8}, pattern(32));
  b = w.bytes();
  put_u64(b, tensor_offset_offset(w.layout(), 1, "b", 1), 32);
  EXPECT_TRUE(Rejects(b, {"tensor 'b': data offset 32 is not a multiple of the alignment 64"}));
}

TEST(GgufCorrupt, AlignmentNotPowerOfTwo) {
  for (uint32_t a : {0u, 3u, 48u, 100u, 65535u}) {
    GgufWriter w;
    w.add_string("general.name", "x");
    w.set_alignment(a);
    w.add_tensor("t", GgmlType::F32, {4}, pattern(16));
    EXPECT_TRUE(Rejects(w.bytes(), {"general.alignment " + std::to_string(a) + " is not a power of two",
                                    "at byte " + std::to_string(w.layout().kv_offsets[1])}));
  }
}

TEST(GgufCorrupt, OverlappingTensors) {
  GgufWriter w;
  w.add_tensor("first", GgmlType::F32, {16}, pattern(64));
  w.add_tensor("second", GgmlType::F32, {8}, pattern(32));
  w.add_tensor("third", GgmlType::F32, {8}, pattern(32));
  const GgufWriter::Layout l = w.layout();
  // "second" moved into the middle of "first".
  Bytes b = w.bytes();
  put_u64(b, tensor_offset_offset(l, 1, "second", 1), 32);
  EXPECT_TRUE(Rejects(
      b, {"tensor 'second' [", "overlaps tensor 'first' [", "at byte " + std::to_string(l.tensor_info_offsets[1])}));
  // Two tensors at the same offset: the later one in the file is reported.
  b = w.bytes();
  put_u64(b, tensor_offset_offset(l, 2, "third", 1), 64);
  EXPECT_TRUE(Rejects(b, {"tensor 'third'", "overlaps tensor 'second'"}));
  // "first" moved onto "third", out of file order.
  b = w.bytes();
  put_u64(b, tensor_offset_offset(l, 0, "first", 1), 96);
  EXPECT_TRUE(Rejects(b, {"extends past the end"}));  // 64 bytes at 96 does not fit
  put_u64(b, tensor_offset_offset(l, 0, "first", 1), 64);
  EXPECT_TRUE(Rejects(b, {"overlaps"}));
}

// ---- metadata values ----

TEST(GgufCorrupt, UnknownValueType) {
  for (uint32_t type : {13u, 100u, 0xffffffffu}) {
    Small s;
    Bytes b = s.bytes();
    uint64_t at = kv_type_offset(s.layout(), 1, kSmallKeys[1]);
    put_u32(b, at, type);
    EXPECT_TRUE(
        Rejects(b, {"key 'test.count': unknown value type " + std::to_string(type), "at byte " + std::to_string(at)}));
  }
}

// A byte array the file can hold but whose parsed values (~100 bytes each) would exhaust memory: refused by the
// reader's budget of array values over all metadata before anything is allocated.
TEST(GgufCorrupt, ArrayValuesPastTheMetadataBudget) {
  GgufWriter w;
  w.add_kv("blob", array_value(GgufValueType::UINT8, std::vector<GgufValue>(10, scalar(GgufValueType::UINT8))));
  Bytes b = w.bytes();
  const uint64_t count_at = kv_value_offset(w.layout(), 0, "blob") + 4;
  const uint64_t n = (uint64_t{1} << 24) + 1;
  b.resize(b.size() + n);  // room for every byte: only the budget stops it
  put_u64(b, count_at, n);
  EXPECT_TRUE(Rejects(b, {"key 'blob'", "array of 16777217 elements takes the metadata past 16777216 array values",
                          "at byte " + std::to_string(count_at)}));
}

TEST(GgufCorrupt, UnknownArrayElementType) {
  Small s;
  Bytes b = s.bytes();
  uint64_t at = kv_value_offset(s.layout(), 2, kSmallKeys[2]);
  put_u32(b, at, 13);
  EXPECT_TRUE(
      Rejects(b, {"key 'tokenizer.ggml.tokens': unknown array element type 13", "at byte " + std::to_string(at)}));
}

GgufValue nested(int depth) {
  GgufValue v = array_value(GgufValueType::INT8, {scalar(GgufValueType::INT8)});
  for (int d = 1; d < depth; ++d) v = array_value(GgufValueType::ARRAY, {v});
  return v;
}

TEST(GgufCorrupt, ArraysNestedTooDeep) {
  GgufWriter ok;
  ok.add_kv("deep", nested(8));
  auto f = Accepts(ok.bytes());
  ASSERT_TRUE(f);
  EXPECT_EQ(f->find("deep")->to_string(),
            "[1 × ARRAY] [[1 × ARRAY] [[1 × ARRAY] [[1 × ARRAY] [[1 × ARRAY] [[1 × "
            "ARRAY] [[1 × ARRAY] [[1 × INT8] [0]]]]]]]]");
  GgufWriter bad;
  bad.add_kv("deeper", nested(9));
  EXPECT_TRUE(Rejects(bad.bytes(), {"key 'deeper': arrays nested deeper than 8"}));
  GgufWriter worse;
  worse.add_kv("deepest", nested(1000));
  EXPECT_TRUE(Rejects(worse.bytes(), {"key 'deepest': arrays nested deeper than 8"}));
}

TEST(GgufCorrupt, DuplicateKey) {
  GgufWriter w;
  w.add_u32("test.count", 1);
  w.add_string("general.name", "x");
  w.add_u32("test.count", 2);
  EXPECT_TRUE(Rejects(w.bytes(),
                      {"duplicate metadata key 'test.count'", "at byte " + std::to_string(w.layout().kv_offsets[2])}));
}

TEST(GgufCorrupt, DuplicateTensorName) {
  GgufWriter w;
  w.add_tensor("w", GgmlType::F32, {4}, pattern(16));
  w.add_tensor("v", GgmlType::F32, {4}, pattern(16));
  w.add_tensor("w", GgmlType::F32, {4}, pattern(16));
  EXPECT_TRUE(Rejects(w.bytes(),
                      {"duplicate tensor name 'w'", "at byte " + std::to_string(w.layout().tensor_info_offsets[2])}));
}

TEST(GgufCorrupt, WrongTypeForKnownKey) {
  {
    GgufWriter w;
    w.add_string("general.alignment", "32");
    EXPECT_TRUE(Rejects(w.bytes(), {"key 'general.alignment' has type STRING, expected UINT32", "at byte 24"}));
  }
  {
    GgufWriter w;
    GgufValue v = scalar(GgufValueType::UINT64);
    v.u = 32;
    w.add_kv("general.alignment", v);
    EXPECT_TRUE(Rejects(w.bytes(), {"key 'general.alignment' has type UINT64, expected UINT32"}));
  }
  {
    GgufWriter w;
    w.add_i32_array("tokenizer.ggml.tokens", {1, 2, 3});
    EXPECT_TRUE(Rejects(w.bytes(), {"key 'tokenizer.ggml.tokens' has type ARRAY of INT32, expected ARRAY of STRING"}));
  }
  {
    GgufWriter w;
    w.add_string("tokenizer.ggml.tokens", "a b c");
    EXPECT_TRUE(Rejects(w.bytes(), {"key 'tokenizer.ggml.tokens' has type STRING, expected ARRAY of STRING"}));
  }
  {
    GgufWriter w;
    w.add_u32("general.architecture", 1);
    EXPECT_TRUE(Rejects(w.bytes(), {"key 'general.architecture' has type UINT32, expected STRING"}));
  }
  {
    GgufWriter w;
    w.add_string_array("tokenizer.ggml.scores", {"0.5"});
    EXPECT_TRUE(
        Rejects(w.bytes(), {"key 'tokenizer.ggml.scores' has type ARRAY of STRING, expected ARRAY of FLOAT32"}));
  }
}

TEST(GgufCorrupt, BoolNotZeroOrOne) {
  Small s;
  for (uint8_t v : {2, 0x80, 0xff}) {
    Bytes b = s.bytes();
    uint64_t at = kv_value_offset(s.layout(), 3, kSmallKeys[3]);
    ASSERT_EQ(b[at], 1);
    b[at] = v;
    EXPECT_TRUE(Rejects(b, {"key 'test.flag': bool value " + std::to_string(v) + " is neither 0 nor 1",
                            "at byte " + std::to_string(at)}));
  }
  // Inside an array too.
  GgufWriter w;
  GgufValue t = scalar(GgufValueType::BOOL);
  t.u = 1;
  GgufValue bad = scalar(GgufValueType::BOOL);
  bad.u = 7;
  w.add_kv("flags", array_value(GgufValueType::BOOL, {t, bad}));
  EXPECT_TRUE(Rejects(w.bytes(), {"key 'flags': bool value 7 is neither 0 nor 1"}));
}

TEST(GgufCorrupt, TypedGettersNameTheKey) {
  GgufWriter w;
  w.add_string("s", "x");
  w.add_u32("n", 3);
  GgufValue neg = scalar(GgufValueType::INT32);
  neg.i = -2;
  w.add_kv("neg", neg);
  auto f = Accepts(w.bytes());
  ASSERT_TRUE(f);
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { f->get_uint("s"); }).find("metadata key 's' has type STRING, expected an integer"),
            std::string::npos);
  EXPECT_NE(message([&] { f->get_string("n"); }).find("metadata key 'n' has type UINT32, expected STRING"),
            std::string::npos);
  EXPECT_NE(message([&] { f->get_uint("neg"); }).find("metadata key 'neg' is negative (-2)"), std::string::npos);
  EXPECT_NE(message([&] { f->get_bool("n"); }).find("expected BOOL"), std::string::npos);
  EXPECT_NE(message([&] { f->get_array("s", GgufValueType::STRING); }).find("expected ARRAY of STRING"),
            std::string::npos);
  EXPECT_EQ(f->get_uint("missing"), std::nullopt);
  EXPECT_EQ(f->get_float("n"), 3.0);
}

// ---- valid edge cases ----

TEST(GgufValid, EveryMetadataTypeRoundTrips) {
  GgufWriter w;
  auto add = [&](const std::string& key, GgufValueType type, auto set) {
    GgufValue v = scalar(type);
    set(v);
    w.add_kv(key, v);
  };
  add("u8", GgufValueType::UINT8, [](GgufValue& v) { v.u = 255; });
  add("i8", GgufValueType::INT8, [](GgufValue& v) { v.i = -128; });
  add("u16", GgufValueType::UINT16, [](GgufValue& v) { v.u = 65535; });
  add("i16", GgufValueType::INT16, [](GgufValue& v) { v.i = -32768; });
  add("u32", GgufValueType::UINT32, [](GgufValue& v) { v.u = 4294967295u; });
  add("i32", GgufValueType::INT32, [](GgufValue& v) { v.i = std::numeric_limits<int32_t>::min(); });
  add("u64", GgufValueType::UINT64, [](GgufValue& v) { v.u = std::numeric_limits<uint64_t>::max(); });
  add("i64", GgufValueType::INT64, [](GgufValue& v) { v.i = std::numeric_limits<int64_t>::min(); });
  add("f32", GgufValueType::FLOAT32, [](GgufValue& v) { v.f = -1.25; });
  add("f64", GgufValueType::FLOAT64, [](GgufValue& v) { v.f = 0.1; });
  add("f32.inf", GgufValueType::FLOAT32, [](GgufValue& v) { v.f = std::numeric_limits<double>::infinity(); });
  add("f64.nan", GgufValueType::FLOAT64, [](GgufValue& v) { v.f = std::nan(""); });
  add("true", GgufValueType::BOOL, [](GgufValue& v) { v.u = 1; });
  add("false", GgufValueType::BOOL, [](GgufValue& v) { v.u = 0; });
  const std::string with_nul = std::string("utf-8 ünïcødé, a NUL ") + '\0' + " inside";
  add("str", GgufValueType::STRING, [&](GgufValue& v) { v.str = with_nul; });
  add("empty", GgufValueType::STRING, [](GgufValue& v) { v.str = ""; });
  add("", GgufValueType::UINT8, [](GgufValue& v) { v.u = 1; });  // an empty key is legal
  auto f = Accepts(w.bytes());
  ASSERT_TRUE(f);
  ASSERT_EQ(f->kvs().size(), 17u);
  EXPECT_EQ(f->find("u8")->u, 255u);
  EXPECT_EQ(f->find("i8")->i, -128);
  EXPECT_EQ(f->find("u16")->u, 65535u);
  EXPECT_EQ(f->find("i16")->i, -32768);
  EXPECT_EQ(f->find("u32")->u, 4294967295u);
  EXPECT_EQ(f->find("i32")->i, std::numeric_limits<int32_t>::min());
  EXPECT_EQ(f->find("u64")->u, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f->find("i64")->i, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->find("f32")->f, -1.25);
  EXPECT_EQ(f->find("f64")->f, 0.1);
  EXPECT_TRUE(std::isinf(f->find("f32.inf")->f));
  EXPECT_TRUE(std::isnan(f->find("f64.nan")->f));
  EXPECT_EQ(f->get_bool("true"), true);
  EXPECT_EQ(f->get_bool("false"), false);
  EXPECT_EQ(f->get_string("str"), with_nul);
  EXPECT_EQ(f->get_string("empty"), "");
  EXPECT_EQ(f->find("")->u, 1u);
  const GgufWriter::Layout l = w.layout();
  for (size_t k = 0; k < f->kvs().size(); ++k) EXPECT_EQ(f->kvs()[k].offset, l.kv_offsets[k]);
  // Types as stored, and the short forms.
  EXPECT_EQ(f->find("i16")->type, GgufValueType::INT16);
  EXPECT_EQ(f->find("f32")->type, GgufValueType::FLOAT32);
  EXPECT_EQ(f->find("i8")->to_string(), "-128");
  EXPECT_EQ(f->find("true")->to_string(), "true");
  EXPECT_EQ(f->find("empty")->to_string(), "''");
  EXPECT_TRUE(f->tensors().empty());
}

TEST(GgufValid, ArraysOfStringsAndNestedArrays) {
  GgufWriter w;
  std::vector<std::string> strings = {"", "a", "ünï", std::string(1000, 'x'), std::string("\0\1", 2)};
  w.add_string_array("strings", strings);
  w.add_f32_array("floats", {});
  GgufValue inner1 = array_value(GgufValueType::INT32, {});
  for (int32_t x : {1, -2, 3}) {
    GgufValue e = scalar(GgufValueType::INT32);
    e.i = x;
    inner1.array.push_back(e);
  }
  GgufValue inner2 = array_value(GgufValueType::STRING, {GgufWriter::scalar_string("s")});
  // Inner arrays of one outer array may hold different element types.
  w.add_kv("nested", array_value(GgufValueType::ARRAY, {inner1, inner2, array_value(GgufValueType::UINT8, {})}));
  auto f = Accepts(w.bytes());
  ASSERT_TRUE(f);
  const auto* got = f->get_array("strings", GgufValueType::STRING);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->size(), strings.size());
  for (size_t k = 0; k < strings.size(); ++k) EXPECT_EQ((*got)[k].str, strings[k]);
  EXPECT_TRUE(f->get_array("floats", GgufValueType::FLOAT32)->empty());
  const GgufValue* n = f->find("nested");
  ASSERT_EQ(n->array.size(), 3u);
  EXPECT_EQ(n->array[0].element_type, GgufValueType::INT32);
  EXPECT_EQ(n->array[0].array[1].i, -2);
  EXPECT_EQ(n->array[1].array[0].str, "s");
  EXPECT_EQ(n->to_string(), "[3 × ARRAY] [[3 × INT32] [1, -2, 3], [1 × STRING] ['s'], [0 × UINT8] []]");
  EXPECT_EQ(f->find("strings")->to_string(2), "[5 × STRING] ['', 'a', ...]");
}

TEST(GgufValid, ZeroTensors) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  Bytes b = w.bytes();
  auto f = Accepts(b);
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->data_offset(), b.size());
  EXPECT_EQ(b.size() % 32, 0u);
  // Without the padding after the metadata: accepted, with the data section empty at the end of the file.
  b.resize(f->kv_end());
  f = Accepts(b);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->data_offset(), b.size());
  nlohmann::json map = memory_map_json(*f);
  EXPECT_EQ(map["sections"]["data"], nlohmann::json::array({b.size(), b.size()}));
  EXPECT_TRUE(map["tensors"].empty());
  // The smallest file: header only.
  Bytes header = GgufWriter().bytes();
  header.resize(24);
  f = Accepts(header);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->header_end(), 24u);
  EXPECT_EQ(f->kv_end(), 24u);
}

TEST(GgufValid, VersionTwo) {
  GgufWriter w(2);
  w.add_string("general.name", "v2");
  w.add_tensor_f32("t", {2}, std::vector<float>{1.f, 2.f});
  auto f = Accepts(w.bytes());
  ASSERT_TRUE(f);
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->get_string("general.name"), "v2");
  const float* data = reinterpret_cast<const float*>(f->tensor_data(f->tensors()[0]));
  EXPECT_EQ(data[1], 2.f);
}

TEST(GgufValid, EveryTypeHasItsExactSize) {
  GgufWriter w;
  std::vector<const GgmlTypeTraits*> types;
  for (uint32_t id = 0; id < 64; ++id)
    if (const GgmlTypeTraits* t = find_type_traits(id)) types.push_back(t);
  ASSERT_EQ(types.size(), 32u);
  for (const GgmlTypeTraits* t : types) {
    // Two blocks per row, three rows: 6 blocks.
    w.add_tensor(std::string(t->name), t->type, {2 * int64_t{t->block_size}, 3},
                 pattern(6 * t->bytes_per_block, static_cast<uint8_t>(t->bytes_per_block)));
  }
  Bytes b = w.bytes();
  auto f = Accepts(b);
  ASSERT_TRUE(f);
  ASSERT_EQ(f->tensors().size(), types.size());
  for (size_t k = 0; k < types.size(); ++k) {
    const GgufTensorInfo& info = f->tensors()[k];
    const GgmlTypeTraits* t = types[k];
    SCOPED_TRACE(std::string(t->name));
    EXPECT_EQ(info.name, t->name);
    EXPECT_EQ(info.type, t->type);
    EXPECT_EQ(info.n_elements(), 6 * int64_t{t->block_size});
    EXPECT_EQ(info.size_bytes, 6u * t->bytes_per_block);
    EXPECT_EQ(info.size_bytes, 3 * row_bytes(t->type, 2 * t->block_size));
    EXPECT_EQ(info.offset % 32, 0u);
    EXPECT_EQ(
        std::memcmp(f->tensor_data(info), pattern(6 * t->bytes_per_block, t->bytes_per_block).data(), info.size_bytes),
        0);
    EXPECT_EQ(type_from_name(t->name), t->type);
  }
  EXPECT_EQ(f->tensors().back().offset_end(), b.size());
}

TEST(GgufValid, EmptyTensorsOverlapNothing) {
  GgufWriter w;
  w.add_tensor("empty", GgmlType::F32, {0, 5}, {});
  w.add_tensor("data", GgmlType::F32, {4}, pattern(16));
  w.add_tensor("also_empty", GgmlType::Q4_0, {32, 0}, {});
  Bytes b = w.bytes();
  // Both empty tensors at the very start of "data".
  put_u64(b, tensor_offset_offset(w.layout(), 2, "also_empty", 2), 0);
  auto f = Accepts(b);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->tensors()[0].size_bytes, 0u);
  EXPECT_EQ(f->tensors()[0].n_elements(), 0);
  EXPECT_EQ(f->tensors()[2].offset, f->tensors()[1].offset);
}

TEST(GgufValid, CustomAlignments) {
  for (uint32_t a : {1u, 8u, 64u, 4096u}) {
    SCOPED_TRACE(a);
    GgufWriter w;
    w.set_alignment(a);
    w.add_tensor("a", GgmlType::F16, {3}, pattern(6));
    w.add_tensor("b", GgmlType::F16, {5}, pattern(10));
    auto f = Accepts(w.bytes());
    ASSERT_TRUE(f);
    EXPECT_EQ(f->alignment(), a);
    EXPECT_EQ(f->data_offset() % a, 0u);
    EXPECT_EQ(f->tensors()[1].offset % a, 0u);
    EXPECT_EQ(f->tensors()[1].relative_offset, (6 + a - 1) / a * a);
  }
}

}  // namespace
}  // namespace tt
