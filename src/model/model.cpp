#include "model/model.h"

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tt {

Model::~Model() = default;

std::unique_ptr<Model> load_model(const std::string& path, FileResidency residency) {
  auto m = std::make_unique<Model>();
  m->file = GgufFile::open(path, residency);
  m->config = read_model_config(*m->file);
  m->weights = bind_weights(*m->file, m->config);
  m->tokenizer = Tokenizer::from_gguf(*m->file);
  if (m->tokenizer->n_vocab() > m->config.n_vocab)
    fail("{}: the tokenizer has {} tokens but token_embd.weight has only {} rows", path, m->tokenizer->n_vocab(),
         m->config.n_vocab);
  return m;
}

}  // namespace tt
