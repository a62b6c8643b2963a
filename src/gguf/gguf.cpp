#include "gguf/gguf.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace tt {
namespace {

constexpr int kMaxArrayNesting = 8;
// Array values held in memory over all metadata: each takes ~100 bytes parsed against 1 byte in the file (UINT8), so
// a count the file can hold could still exhaust memory. Real tokenizers need under a million (Llama 3: ~410k).
constexpr uint64_t kMaxMetadataArrayValues = uint64_t{1} << 24;

struct KnownKey {
  std::string_view key;
  GgufValueType type;
  GgufValueType element_type;  // for arrays
};

// Keys whose type is fixed by the GGUF spec / llama.cpp; a file storing another type is rejected at parse time.
constexpr KnownKey kKnownKeys[] = {
    {"general.alignment", GgufValueType::UINT32, GgufValueType::UINT8},
    {"general.architecture", GgufValueType::STRING, GgufValueType::UINT8},
    {"general.name", GgufValueType::STRING, GgufValueType::UINT8},
    {"tokenizer.ggml.model", GgufValueType::STRING, GgufValueType::UINT8},
    {"tokenizer.ggml.pre", GgufValueType::STRING, GgufValueType::UINT8},
    {"tokenizer.ggml.tokens", GgufValueType::ARRAY, GgufValueType::STRING},
    {"tokenizer.ggml.scores", GgufValueType::ARRAY, GgufValueType::FLOAT32},
    {"tokenizer.ggml.token_type", GgufValueType::ARRAY, GgufValueType::INT32},
    {"tokenizer.ggml.merges", GgufValueType::ARRAY, GgufValueType::STRING},
};

size_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::BOOL:
      return 1;
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
      return 2;
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::FLOAT32:
      return 4;
    case GgufValueType::UINT64:
    case GgufValueType::INT64:
    case GgufValueType::FLOAT64:
      return 8;
    case GgufValueType::STRING:
      return 8;  // at least the length prefix
    case GgufValueType::ARRAY:
      return 12;  // at least element type and count
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::FLOAT64); }

// Bounds-checked little-endian reads from the file bytes; every failure names what was being read and where.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  void need(uint64_t n, std::string_view what) const {
    if (n > remaining())
      fail("{}: truncated file: {} at byte {} needs {} bytes, but the file ends at byte {}", name_, what, pos_, n,
           bytes_.size());
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(std::string_view what) {
    uint64_t at = pos_;
    uint64_t len = read<uint64_t>(what);
    if (len > remaining())
      fail("{}: {} at byte {} has length {}, past the end of the file ({} bytes left)", name_, what, at, len,
           remaining());
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return s;
  }

  [[noreturn]] void error_at(uint64_t at, const std::string& msg) const { fail("{}: at byte {}: {}", name_, at, msg); }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& name_;
  uint64_t pos_ = 0;

 public:
  uint64_t array_values_left = kMaxMetadataArrayValues;  // see kMaxMetadataArrayValues
};

void read_value(Cursor& c, GgufValueType type, GgufValue& v, const std::string& key, int depth) {
  v.type = type;
  switch (type) {
    case GgufValueType::UINT8: v.u = c.read<uint8_t>(key); break;
    case GgufValueType::UINT16: v.u = c.read<uint16_t>(key); break;
    case GgufValueType::UINT32: v.u = c.read<uint32_t>(key); break;
    case GgufValueType::UINT64: v.u = c.read<uint64_t>(key); break;
    case GgufValueType::INT8: v.i = c.read<int8_t>(key); break;
    case GgufValueType::INT16: v.i = c.read<int16_t>(key); break;
    case GgufValueType::INT32: v.i = c.read<int32_t>(key); break;
    case GgufValueType::INT64: v.i = c.read<int64_t>(key); break;
    case GgufValueType::FLOAT32: v.f = c.read<float>(key); break;
    case GgufValueType::FLOAT64: v.f = c.read<double>(key); break;
    case GgufValueType::BOOL: {
      uint64_t at = c.pos();
      uint8_t b = c.read<uint8_t>(key);
      if (b > 1) c.error_at(at, fmt::format("key '{}': bool value {} is neither 0 nor 1", key, b));
      v.u = b;
      break;
    }
    case GgufValueType::STRING: v.str = c.read_string(fmt::format("string value of key '{}'", key)); break;
    case GgufValueType::ARRAY: {
      uint64_t at = c.pos();
      if (depth >= kMaxArrayNesting)
        c.error_at(at, fmt::format("key '{}': arrays nested deeper than {}", key, kMaxArrayNesting));
      uint32_t et = c.read<uint32_t>(fmt::format("array element type of key '{}'", key));
      if (!valid_value_type(et)) c.error_at(at, fmt::format("key '{}': unknown array element type {}", key, et));
      v.element_type = static_cast<GgufValueType>(et);
      uint64_t count_at = c.pos();
      uint64_t n = c.read<uint64_t>(fmt::format("array length of key '{}'", key));
      // Each element needs at least this many bytes, so a count the file cannot hold is rejected before allocating.
      if (n > c.remaining() / scalar_size(v.element_type))
        c.error_at(count_at, fmt::format("key '{}': array of {} {} elements cannot fit in the {} bytes left", key, n,
                                         value_type_name(v.element_type), c.remaining()));
      if (n > c.array_values_left)
        c.error_at(count_at, fmt::format("key '{}': array of {} elements takes the metadata past {} array values in "
                                         "all (a tokenizer needs under a million); not loaded",
                                         key, n, kMaxMetadataArrayValues));
      c.array_values_left -= n;
      v.array.resize(n);
      for (uint64_t k = 0; k < n; ++k) read_value(c, v.element_type, v.array[k], key, depth + 1);
      break;
    }
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

std::string_view value_type_name(GgufValueType type) {
  static constexpr std::string_view names[] = {"UINT8", "INT8",  "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                               "BOOL",  "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
  auto i = static_cast<uint32_t>(type);
  return i < std::size(names) ? names[i] : "UNKNOWN";
}

bool GgufValue::is_signed() const {
  return type == GgufValueType::INT8 || type == GgufValueType::INT16 || type == GgufValueType::INT32 ||
         type == GgufValueType::INT64;
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::UINT8:
    case GgufValueType::UINT16:
    case GgufValueType::UINT32:
    case GgufValueType::UINT64:
    case GgufValueType::INT8:
    case GgufValueType::INT16:
    case GgufValueType::INT32:
    case GgufValueType::INT64:
      return true;
    default:
      return false;
  }
}

std::string GgufValue::to_string(size_t max_items) const {
  switch (type) {
    case GgufValueType::UINT8:
    case GgufValueType::UINT16:
    case GgufValueType::UINT32:
    case GgufValueType::UINT64:
      return std::to_string(u);
    case GgufValueType::INT8:
    case GgufValueType::INT16:
    case GgufValueType::INT32:
    case GgufValueType::INT64:
      return std::to_string(i);
    case GgufValueType::FLOAT32:
    case GgufValueType::FLOAT64:
      return fmt::format("{}", f);
    case GgufValueType::BOOL:
      return u ? "true" : "false";
    case GgufValueType::STRING: {
      std::string s = str.size() > 80 ? str.substr(0, 77) + "..." : str;
      return fmt::format("'{}'", s);
    }
    case GgufValueType::ARRAY: {
      std::string out = fmt::format("[{} × {}]", array.size(), value_type_name(element_type));
      if (max_items == 0) return out;
      out += " [";
      for (size_t k = 0; k < array.size() && k < max_items; ++k) {
        if (k) out += ", ";
        out += array[k].to_string(max_items);
      }
      if (array.size() > max_items) out += ", ...";
      return out + "]";
    }
  }
  return "?";
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path, FileResidency residency) {
  auto mapping = std::make_unique<MappedFile>(path, residency);
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->bytes_ = mapping->bytes();
  f->mapping_ = std::move(mapping);
  f->name_ = path;
  f->parse_all();
  return f;
}

std::unique_ptr<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes, std::string name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->bytes_ = bytes;
  f->name_ = std::move(name);
  f->parse_all();
  return f;
}

void GgufFile::parse_all() {
  Cursor c(bytes_, name_);
  c.need(4, "magic");
  if (std::memcmp(bytes_.data(), "GGUF", 4) != 0) {
    std::string got;
    for (int k = 0; k < 4; ++k) got += fmt::format("{:02x}", bytes_[k]);
    fail("{}: not a GGUF file: bad magic {} at byte 0 (expected 'GGUF' = 47475546)", name_, got);
  }
  c.read<uint32_t>("magic");
  version_ = c.read<uint32_t>("version");
  if (version_ == 1) fail("{}: GGUF v1 is not supported (only v2 and v3)", name_);
  uint32_t swapped = __builtin_bswap32(version_);
  if (swapped == 2 || swapped == 3)
    fail("{}: unsupported GGUF version {} at byte 4: the file is big-endian (version {} byte-swapped); only "
         "little-endian files are supported",
         name_, version_, swapped);
  if (version_ != 2 && version_ != 3)
    fail("{}: unsupported GGUF version {} at byte 4 (supported: 2, 3; big-endian files are not supported)", name_,
         version_);
  uint64_t tensor_count_at = c.pos();
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t kv_count_at = c.pos();
  uint64_t n_kv = c.read<uint64_t>("metadata key-value count");
  header_end_ = c.pos();
  // Smallest records: a kv is key length + type + one byte; a tensor info is name length + n_dims + type + offset.
  if (n_kv > c.remaining() / 13)
    c.error_at(kv_count_at, fmt::format("metadata count {} cannot fit in the {} bytes of the file", n_kv,
                                        bytes_.size()));
  if (n_tensors > c.remaining() / 24)
    c.error_at(tensor_count_at,
               fmt::format("tensor count {} cannot fit in the {} bytes of the file", n_tensors, bytes_.size()));

  kvs_.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    GgufKv kv;
    kv.offset = c.pos();
    kv.key = c.read_string(fmt::format("key of metadata entry {}", k));
    uint64_t type_at = c.pos();
    uint32_t type = c.read<uint32_t>(fmt::format("value type of key '{}'", kv.key));
    if (!valid_value_type(type)) c.error_at(type_at, fmt::format("key '{}': unknown value type {}", kv.key, type));
    read_value(c, static_cast<GgufValueType>(type), kv.value, kv.key, 0);
    if (kv_index_.count(kv.key)) c.error_at(kv.offset, fmt::format("duplicate metadata key '{}'", kv.key));
    for (const KnownKey& known : kKnownKeys) {
      if (known.key != kv.key) continue;
      bool ok = kv.value.type == known.type &&
                (known.type != GgufValueType::ARRAY || kv.value.element_type == known.element_type);
      if (!ok)
        c.error_at(kv.offset,
                   fmt::format("key '{}' has type {}{}, expected {}{}", kv.key, value_type_name(kv.value.type),
                               kv.value.type == GgufValueType::ARRAY
                                   ? fmt::format(" of {}", value_type_name(kv.value.element_type))
                                   : "",
                               value_type_name(known.type),
                               known.type == GgufValueType::ARRAY
                                   ? fmt::format(" of {}", value_type_name(known.element_type))
                                   : ""));
    }
    kv_index_.emplace(kv.key, kvs_.size());
    kvs_.push_back(std::move(kv));
  }
  kv_end_ = c.pos();

  if (const GgufValue* a = find("general.alignment")) {
    if (a->u == 0 || (a->u & (a->u - 1)) != 0)
      c.error_at(kvs_[kv_index_.at("general.alignment")].offset,
                 fmt::format("general.alignment {} is not a power of two", a->u));
    alignment_ = a->u;
  }

  tensors_.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t{};
    t.info_offset = c.pos();
    t.name = c.read_string(fmt::format("name of tensor {}", k));
    if (tensor_index_.count(t.name)) c.error_at(t.info_offset, fmt::format("duplicate tensor name '{}'", t.name));
    uint64_t dims_at = c.pos();
    uint32_t n_dims = c.read<uint32_t>(fmt::format("dimension count of tensor '{}'", t.name));
    if (n_dims == 0 || n_dims > kGgufMaxDims)
      c.error_at(dims_at,
                 fmt::format("tensor '{}' has {} dimensions (must be 1 to {})", t.name, n_dims, kGgufMaxDims));
    t.n_dims = static_cast<int>(n_dims);
    uint64_t n_elements = 1;
    for (int d = 0; d < kGgufMaxDims; ++d) t.ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t at = c.pos();
      uint64_t ne = c.read<uint64_t>(fmt::format("dimension {} of tensor '{}'", d, t.name));
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        c.error_at(at, fmt::format("tensor '{}': dimension {} = {} is negative or too large", t.name, d, ne));
      if (ne != 0 && n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne)
        c.error_at(at, fmt::format("tensor '{}': element count overflows at dimension {} (= {})", t.name, d, ne));
      n_elements *= ne;
      t.ne[d] = static_cast<int64_t>(ne);
    }
    uint64_t type_at = c.pos();
    uint32_t type_id = c.read<uint32_t>(fmt::format("type of tensor '{}'", t.name));
    const GgmlTypeTraits* traits = find_type_traits(type_id);
    if (!traits) c.error_at(type_at, fmt::format("tensor '{}' has unknown type id {}", t.name, type_id));
    t.type = traits->type;
    if (t.ne[0] % traits->block_size != 0)
      c.error_at(dims_at, fmt::format("tensor '{}': row length {} is not a whole number of {} blocks of {} elements",
                                      t.name, t.ne[0], traits->name, traits->block_size));
    uint64_t n_blocks = n_elements / traits->block_size;
    if (n_blocks > std::numeric_limits<uint64_t>::max() / traits->bytes_per_block)
      c.error_at(dims_at, fmt::format("tensor '{}': byte size overflows", t.name));
    t.size_bytes = n_blocks * traits->bytes_per_block;
    uint64_t offset_at = c.pos();
    t.relative_offset = c.read<uint64_t>(fmt::format("data offset of tensor '{}'", t.name));
    if (t.relative_offset % alignment_ != 0)
      c.error_at(offset_at, fmt::format("tensor '{}': data offset {} is not a multiple of the alignment {}", t.name,
                                        t.relative_offset, alignment_));
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }
  tensor_info_end_ = c.pos();
  data_offset_ = align_up(tensor_info_end_, alignment_);
  if (n_tensors > 0 && data_offset_ > bytes_.size())
    fail("{}: truncated file: the data section would start at byte {}, past the end of the file ({} bytes)", name_,
         data_offset_, bytes_.size());
  // A file without tensors needs no data section, and writers may leave out the padding before it.
  data_offset_ = std::min<uint64_t>(data_offset_, bytes_.size());

  // Every tensor inside the file, and no two overlapping.
  for (GgufTensorInfo& t : tensors_) {
    uint64_t room = bytes_.size() - std::min<uint64_t>(data_offset_, bytes_.size());
    if (t.relative_offset > room || t.size_bytes > room - t.relative_offset)
      c.error_at(t.info_offset,
                 fmt::format("tensor '{}' ({} bytes at data offset {}, file offset {}) extends past the end of the "
                             "file ({} bytes)",
                             t.name, t.size_bytes, t.relative_offset, data_offset_ + t.relative_offset,
                             bytes_.size()));
    t.offset = data_offset_ + t.relative_offset;
  }
  // Empty tensors occupy no bytes and overlap nothing. Sorting the others by start (ties in file order, so the
  // message is deterministic), any overlap shows between neighbours.
  std::vector<const GgufTensorInfo*> sorted;
  sorted.reserve(tensors_.size());
  for (const GgufTensorInfo& t : tensors_)
    if (t.size_bytes > 0) sorted.push_back(&t);
  std::stable_sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < sorted.size(); ++k) {
    const GgufTensorInfo* prev = sorted[k - 1];
    const GgufTensorInfo* cur = sorted[k];
    if (cur->offset < prev->offset_end())
      c.error_at(cur->info_offset, fmt::format("tensor '{}' [{}, {}) overlaps tensor '{}' [{}, {})", cur->name,
                                               cur->offset, cur->offset_end(), prev->name, prev->offset,
                                               prev->offset_end()));
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::STRING)
    fail("{}: metadata key '{}' has type {}, expected STRING", name_, key, value_type_name(v->type));
  return v->str;
}

std::optional<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer())
    fail("{}: metadata key '{}' has type {}, expected an integer", name_, key, value_type_name(v->type));
  if (v->is_signed()) {
    if (v->i < 0) fail("{}: metadata key '{}' is negative ({})", name_, key, v->i);
    return static_cast<uint64_t>(v->i);
  }
  return v->u;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->is_float()) return v->f;
  if (v->is_integer()) return v->is_signed() ? static_cast<double>(v->i) : static_cast<double>(v->u);
  fail("{}: metadata key '{}' has type {}, expected a number", name_, key, value_type_name(v->type));
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::BOOL)
    fail("{}: metadata key '{}' has type {}, expected BOOL", name_, key, value_type_name(v->type));
  return v->u != 0;
}

const std::vector<GgufValue>* GgufFile::get_array(std::string_view key, GgufValueType element_type) const {
  const GgufValue* v = find(key);
  if (!v) return nullptr;
  if (v->type != GgufValueType::ARRAY || v->element_type != element_type)
    fail("{}: metadata key '{}' has type {}, expected ARRAY of {}", name_, key, v->to_string(0),
         value_type_name(element_type));
  return &v->array;
}

}  // namespace tt
