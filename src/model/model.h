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

}  // namespace tt
