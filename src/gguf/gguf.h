// GGUF v2/v3 reader. The file is memory-mapped; metadata is parsed and every count, length, offset and size is
// validated against the file before use, so a hostile or truncated file gives an Error that names the field and
// the byte offset, never a crash, a hang or an unbounded allocation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/mapped_file.h"
#include "gguf/ggml_type.h"

namespace tt {

enum class GgufValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
std::string_view value_type_name(GgufValueType type);

constexpr int kGgufMaxDims = 4;
constexpr uint32_t kGgufDefaultAlignment = 32;

// One metadata value. Scalars keep their stored type; arrays hold elements of one type (possibly arrays).
struct GgufValue {
  GgufValueType type = GgufValueType::UINT8;
  uint64_t u = 0;                                     // UINT*, BOOL
  int64_t i = 0;                                      // INT*
  double f = 0;                                       // FLOAT*
  std::string str;                                    // STRING
  GgufValueType element_type = GgufValueType::UINT8;  // ARRAY
  std::vector<GgufValue> array;                       // ARRAY

  bool is_integer() const;
  bool is_signed() const;  // INT8..INT64
  bool is_float() const { return type == GgufValueType::FLOAT32 || type == GgufValueType::FLOAT64; }
  // Short human form; long arrays are summarised ("[512 × STRING] ['<unk>', '<s>', ...]").
  std::string to_string(size_t max_items = 8) const;
};

struct GgufKv {
  std::string key;
  GgufValue value;
  uint64_t offset;  // byte offset of the key in the file
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type;
  int n_dims;
  int64_t ne[kGgufMaxDims];  // ggml order: ne[0] is the row length; unused dims are 1
  uint64_t relative_offset;  // as stored: from the start of the data section
  uint64_t offset;           // absolute file offset of the first byte
  uint64_t size_bytes;       // exact, from the type's block size and bytes per block
  uint64_t info_offset;      // byte offset of this tensor's info record in the file

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  uint64_t offset_end() const { return offset + size_bytes; }
  std::vector<int64_t> shape() const { return {ne, ne + n_dims}; }
};

class GgufFile {
 public:
  // Map (or read, FileResidency::IN_MEMORY) and parse a file. Throws tt::Error naming the path and problem.
  static std::unique_ptr<GgufFile> open(const std::string& path, FileResidency residency = FileResidency::MAPPED);
  // Parse bytes already in memory (fuzzing, tests). The bytes must outlive the object.
  static std::unique_ptr<GgufFile> parse(std::span<const uint8_t> bytes, std::string name = "<memory>");

  const std::string& path() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return bytes_.size(); }
  uint64_t alignment() const { return alignment_; }
  // Byte ranges of the file's sections: [0, header_end) magic, version and counts; [header_end, kv_end)
  // metadata; [kv_end, tensor_info_end) tensor infos; [data_offset, file_size) tensor data.
  uint64_t header_end() const { return header_end_; }
  uint64_t kv_end() const { return kv_end_; }
  uint64_t tensor_info_end() const { return tensor_info_end_; }
  uint64_t data_offset() const { return data_offset_; }

  const std::vector<GgufKv>& kvs() const { return kvs_; }
  const GgufValue* find(std::string_view key) const;
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;

  // Typed metadata access. Missing keys give nullopt; a present key of the wrong type is an Error naming it.
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<uint64_t> get_uint(std::string_view key) const;  // any non-negative integer type
  std::optional<double> get_float(std::string_view key) const;   // float or integer types
  std::optional<bool> get_bool(std::string_view key) const;
  const std::vector<GgufValue>* get_array(std::string_view key, GgufValueType element_type) const;

  std::span<const uint8_t> bytes() const { return bytes_; }
  const uint8_t* tensor_data(const GgufTensorInfo& t) const { return bytes_.data() + t.offset; }
  // File descriptor of the mapping, or -1 for in-memory data.
  int fd() const { return mapping_ ? mapping_->fd() : -1; }
  // How the file's bytes are held; in-memory data (parse()) reads IN_MEMORY.
  FileResidency residency() const { return mapping_ ? mapping_->residency() : FileResidency::IN_MEMORY; }
  // Whether the bytes are this object's private copy (opened IN_MEMORY), which rewrite() may change.
  bool rewritable() const { return mapping_ && mapping_->residency() == FileResidency::IN_MEMORY; }
  // Lets `edit` rewrite the copy's bytes (MappedFile::rewrite); the parsed metadata must stay as it is.
  void rewrite(const std::function<void(uint8_t* data)>& edit) { mapping_->rewrite(edit); }

 private:
  GgufFile() = default;
  void parse_all();

  std::unique_ptr<MappedFile> mapping_;
  std::span<const uint8_t> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t header_end_ = 0, kv_end_ = 0, tensor_info_end_ = 0, data_offset_ = 0;
  std::vector<GgufKv> kvs_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace tt
