// A loaded model: the file's bytes, its validated configuration, weight views and tokenizer. Read-only after load.
#pragma once

#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "model/config.h"
#include "model/weights.h"

namespace tt {

class Tokenizer;

struct Model {
  std::unique_ptr<GgufFile> file;
  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  ~Model();
};

// Reads (or maps), validates and binds; throws tt::Error naming the problem. IN_MEMORY is what runs fastest;
// MAPPED is for studying how weights come from the file (page cache, prefetching, --weight-budget's storage reads).
std::unique_ptr<Model> load_model(const std::string& path, FileResidency residency = FileResidency::IN_MEMORY);

// Where a run's weights go when it does not ask: IN_MEMORY when the file fits in the memory the kernel reports
// available, else MAPPED, which pages the weights from the file instead of pushing the system into swap or the OOM
// killer. When it maps, `why` (if given) gets a line saying so, for the run to print.
FileResidency default_residency(uint64_t file_bytes, uint64_t available_bytes, std::string* why = nullptr);
// /proc/meminfo's MemAvailable in bytes; UINT64_MAX where it cannot be read.
uint64_t memory_available();
// The same for the file at `path` and this machine now (a file that cannot be sized: IN_MEMORY, so that loading it
// names the problem).
FileResidency default_residency(const std::string& path, std::string* why);

}  // namespace tt
