// A loaded model: the mapped file, its validated configuration, weight views and tokenizer. Read-only after load.
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

// Maps, validates and binds; throws tt::Error naming the problem.
std::unique_ptr<Model> load_model(const std::string& path);

}  // namespace tt
