// Builds GGUF files in memory: used by tests to make fixtures of any type, and by tools that write models.
// It writes what it is told (including nonsense, on request through the raw setters), so tests can craft
// corrupt files; the reader is what validates.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace tt {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  void set_alignment(uint32_t alignment);  // also writes general.alignment
  void add_kv(const std::string& key, const GgufValue& value);
  void add_string(const std::string& key, const std::string& value);
  void add_u32(const std::string& key, uint32_t value);
  void add_f32(const std::string& key, float value);
  void add_bool(const std::string& key, bool value);
  void add_string_array(const std::string& key, const std::vector<std::string>& values);
  void add_f32_array(const std::string& key, const std::vector<float>& values);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& values);

  // dims in ggml order (ne[0] first); data must hold exactly the tensor's bytes. Tensors are laid out in the
  // order added, each aligned.
  void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> dims, std::span<const uint8_t> data);
  // A tensor whose data the caller writes itself, after header_bytes() (for files too large to build in memory):
  // its data goes at data_offset() + tensor_offset(k), followed by zeros up to the alignment.
  void add_tensor_info(const std::string& name, GgmlType type, std::vector<int64_t> dims, uint64_t size_bytes);
  // Convenience for F32 tensors.
  void add_tensor_f32(const std::string& name, std::vector<int64_t> dims, std::span<const float> data);

  // Serialised file. Offsets of interesting places are recorded for tests that corrupt them.
  // Errors when a tensor was declared with add_tensor_info (its data is not here).
  std::vector<uint8_t> bytes() const;
  // Everything before the first tensor's data: header, metadata, tensor infos and the padding after them.
  std::vector<uint8_t> header_bytes() const;
  uint64_t alignment() const { return alignment_ == 0 ? 1 : alignment_; }
  // Offset of tensor k's data from the start of the data section.
  uint64_t tensor_offset(size_t k) const;
  void write(const std::string& path) const;

  struct Layout {
    uint64_t tensor_count_offset = 8;
    uint64_t kv_count_offset = 16;
    std::vector<uint64_t> kv_offsets;           // start of each kv record
    std::vector<uint64_t> tensor_info_offsets;  // start of each tensor info record
    uint64_t data_offset = 0;
  };
  Layout layout() const;

  static GgufValue scalar_u32(uint32_t v);
  static GgufValue scalar_string(const std::string& s);

 private:
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
    uint64_t size;  // data.size(), or the declared size of a tensor added with add_tensor_info
    bool external;  // added with add_tensor_info
  };
  // header_only: stop after the padding that precedes the data section.
  std::vector<uint8_t> serialise(Layout* layout, bool header_only = false) const;

  uint32_t version_;
  uint32_t alignment_ = kGgufDefaultAlignment;
  std::vector<std::pair<std::string, GgufValue>> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace tt
