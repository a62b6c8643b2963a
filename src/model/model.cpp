#include "model/model.h"

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tt {

Model::~Model() = default;

std::unique_ptr<Model> load_model(const std::string& path, FileResidency residency) {
  auto m = std::make_unique<Model>();
  m->file = GgufFile::open(path, residency);
  m->config = read_model_config(*m->file);
  m->weights = bind_weights(*m->file, m->config);
  if (const int grouped = group_weight_rows(*m->file, m->weights))
    m->weights.notes.push_back(fmt::format(
        "{} matrices stored in memory in groups of 16 rows, one row per SIMD lane (the same bytes in another order; "
        "docs/engine.md \"Row groups\")",
        grouped));
  m->tokenizer = Tokenizer::from_gguf(*m->file);
  if (m->tokenizer->n_vocab() > m->config.n_vocab)
    fail("{}: the tokenizer has {} tokens but token_embd.weight has only {} rows", path, m->tokenizer->n_vocab(),
         m->config.n_vocab);
  return m;
}

FileResidency default_residency(uint64_t file_bytes, uint64_t available_bytes, std::string* why) {
  if (file_bytes <= available_bytes) return FileResidency::IN_MEMORY;
  if (why)
    *why = fmt::format(
        "the model file ({:.2f} GiB) is larger than the memory available ({:.2f} GiB): its weights are "
        "mapped in place, as with --mmap",
        file_bytes / 1073741824.0, available_bytes / 1073741824.0);
  return FileResidency::MAPPED;
}

FileResidency default_residency(const std::string& path, std::string* why) {
  std::error_code ec;
  const uint64_t bytes = std::filesystem::file_size(path, ec);
  return ec ? FileResidency::IN_MEMORY : default_residency(bytes, memory_available(), why);
}

uint64_t memory_available() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    meminfo.ignore(64, '\n');
  }
  return UINT64_MAX;
}

}  // namespace tt
