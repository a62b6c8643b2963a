#include "gguf/writer.h"

#include <cstring>
#include <fstream>

#include "core/error.h"

namespace tt {
namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void put_value(std::vector<uint8_t>& out, const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::UINT8:
      put<uint8_t>(out, v.u);
      break;
    case GgufValueType::UINT16:
      put<uint16_t>(out, v.u);
      break;
    case GgufValueType::UINT32:
      put<uint32_t>(out, v.u);
      break;
    case GgufValueType::UINT64:
      put<uint64_t>(out, v.u);
      break;
    case GgufValueType::INT8:
      put<int8_t>(out, v.i);
      break;
    case GgufValueType::INT16:
      put<int16_t>(out, v.i);
      break;
    case GgufValueType::INT32:
      put<int32_t>(out, v.i);
      break;
    case GgufValueType::INT64:
      put<int64_t>(out, v.i);
      break;
    case GgufValueType::FLOAT32:
      put<float>(out, static_cast<float>(v.f));
      break;
    case GgufValueType::FLOAT64:
      put<double>(out, v.f);
      break;
    case GgufValueType::BOOL:
      put<uint8_t>(out, v.u);
      break;
    case GgufValueType::STRING:
      put_string(out, v.str);
      break;
    case GgufValueType::ARRAY:
      put<uint32_t>(out, static_cast<uint32_t>(v.element_type));
      put<uint64_t>(out, v.array.size());
      for (const GgufValue& e : v.array) put_value(out, e);
      break;
  }
}

GgufValue array_of(GgufValueType element_type) {
  GgufValue v;
  v.type = GgufValueType::ARRAY;
  v.element_type = element_type;
  return v;
}

}  // namespace

GgufValue GgufWriter::scalar_u32(uint32_t x) {
  GgufValue v;
  v.type = GgufValueType::UINT32;
  v.u = x;
  return v;
}

GgufValue GgufWriter::scalar_string(const std::string& s) {
  GgufValue v;
  v.type = GgufValueType::STRING;
  v.str = s;
  return v;
}

void GgufWriter::set_alignment(uint32_t alignment) {
  alignment_ = alignment;
  add_kv("general.alignment", scalar_u32(alignment));
}

void GgufWriter::add_kv(const std::string& key, const GgufValue& value) { kvs_.emplace_back(key, value); }
void GgufWriter::add_string(const std::string& key, const std::string& value) { add_kv(key, scalar_string(value)); }
void GgufWriter::add_u32(const std::string& key, uint32_t value) { add_kv(key, scalar_u32(value)); }

void GgufWriter::add_f32(const std::string& key, float value) {
  GgufValue v;
  v.type = GgufValueType::FLOAT32;
  v.f = value;
  add_kv(key, v);
}

void GgufWriter::add_bool(const std::string& key, bool value) {
  GgufValue v;
  v.type = GgufValueType::BOOL;
  v.u = value;
  add_kv(key, v);
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& values) {
  GgufValue v = array_of(GgufValueType::STRING);
  for (const std::string& s : values) v.array.push_back(scalar_string(s));
  add_kv(key, v);
}

void GgufWriter::add_f32_array(const std::string& key, const std::vector<float>& values) {
  GgufValue v = array_of(GgufValueType::FLOAT32);
  for (float x : values) {
    GgufValue e;
    e.type = GgufValueType::FLOAT32;
    e.f = x;
    v.array.push_back(e);
  }
  add_kv(key, v);
}

void GgufWriter::add_i32_array(const std::string& key, const std::vector<int32_t>& values) {
  GgufValue v = array_of(GgufValueType::INT32);
  for (int32_t x : values) {
    GgufValue e;
    e.type = GgufValueType::INT32;
    e.i = x;
    v.array.push_back(e);
  }
  add_kv(key, v);
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> dims,
                            std::span<const uint8_t> data) {
  tensors_.push_back(
      {name, static_cast<uint32_t>(type), std::move(dims), {data.begin(), data.end()}, data.size(), false});
}

void GgufWriter::add_tensor_info(const std::string& name, GgmlType type, std::vector<int64_t> dims,
                                 uint64_t size_bytes) {
  tensors_.push_back({name, static_cast<uint32_t>(type), std::move(dims), {}, size_bytes, true});
}

uint64_t GgufWriter::tensor_offset(size_t k) const {
  TT_CHECK(k < tensors_.size(), "tensor {} of {}", k, tensors_.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < k; ++i) offset += (tensors_[i].size + alignment() - 1) / alignment() * alignment();
  return offset;
}

void GgufWriter::add_tensor_f32(const std::string& name, std::vector<int64_t> dims, std::span<const float> data) {
  add_tensor(name, GgmlType::F32, std::move(dims),
             {reinterpret_cast<const uint8_t*>(data.data()), data.size() * sizeof(float)});
}

std::vector<uint8_t> GgufWriter::serialise(Layout* layout, bool header_only) const {
  // Lay out with the alignment asked for; a nonsense one (0, for a corrupt fixture) lays out unaligned.
  const uint64_t alignment = this->alignment();
  std::vector<uint8_t> out;
  // The fixed header's room reserved first: growing a 4-byte vector in the first insert trips GCC 12's
  // -Warray-bounds false positive inside std::vector::insert.
  out.reserve(24);
  out.insert(out.end(), {'G', 'G', 'U', 'F'});
  put<uint32_t>(out, version_);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kvs_.size());
  for (const auto& [key, value] : kvs_) {
    if (layout) layout->kv_offsets.push_back(out.size());
    put_string(out, key);
    put<uint32_t>(out, static_cast<uint32_t>(value.type));
    put_value(out, value);
  }
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const Tensor& t : tensors_) {
    if (layout) layout->tensor_info_offsets.push_back(out.size());
    put_string(out, t.name);
    put<uint32_t>(out, t.dims.size());
    for (int64_t d : t.dims) put<uint64_t>(out, d);
    put<uint32_t>(out, t.type);
    put<uint64_t>(out, offset);
    offsets.push_back(offset);
    offset += (t.size + alignment - 1) / alignment * alignment;
  }
  out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
  if (layout) layout->data_offset = out.size();
  if (header_only) return out;
  uint64_t data_start = out.size();
  for (size_t k = 0; k < tensors_.size(); ++k) {
    if (tensors_[k].external) fail("tensor '{}' was declared without its data", tensors_[k].name);
    out.resize(data_start + offsets[k], 0);
    out.insert(out.end(), tensors_[k].data.begin(), tensors_[k].data.end());
  }
  return out;
}

std::vector<uint8_t> GgufWriter::bytes() const { return serialise(nullptr); }
std::vector<uint8_t> GgufWriter::header_bytes() const { return serialise(nullptr, true); }

GgufWriter::Layout GgufWriter::layout() const {
  Layout l;
  serialise(&l, true);
  return l;
}

void GgufWriter::write(const std::string& path) const {
  std::vector<uint8_t> b = bytes();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail("cannot write '{}'", path);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!f) fail("error writing '{}'", path);
}

}  // namespace tt
