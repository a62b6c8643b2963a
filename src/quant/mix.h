// Which type each tensor of a model gets when it is quantized to a file type: llama-quantize's rules
// (llama.cpp src/llama-quant.cpp, llama_tensor_get_type, without an importance matrix or overrides), so a model
// quantized here holds the same tensor types as llama-quantize's file of that type.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"

namespace tt {

// A file type `quantize` can write: its name (as llama-quantize spells it), the general.file_type value
// (llama_ftype) and the type most tensors get.
struct QuantFileType {
  std::string_view name;
  uint32_t file_type;
  GgmlType default_type;
};

// The file type of that name (case-insensitive), or nullptr.
const QuantFileType* find_quant_file_type(std::string_view name);
// "F16, BF16, Q8_0, ..." for error messages and help.
std::string quant_file_type_names();

// What the rules look at: the architecture and hyperparameters of the model, and per tensor its name and shape.
struct MixModel {
  std::string arch;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_expert = 0;
};
struct MixTensor {
  std::string name;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};
  GgmlType type = GgmlType::F32;
};

// The order llama-quantize writes (and decides) tensors in: tensors outside layers first, then layer by layer
// (blk.N. numerically), by name within each group. Indices into `names`.
std::vector<size_t> quantize_order(const std::vector<std::string>& names);

// The output type of every tensor, in the order given (which must be quantize_order's: the attn_v / ffn_down
// promotions count tensors in that order). Tensors that are not quantized keep their type. An Error for a
// tensor the rules cannot place (a layer number outside the model in an MoE model).
std::vector<GgmlType> choose_tensor_types(const QuantFileType& target, const MixModel& model,
                                          const std::vector<MixTensor>& tensors);

}  // namespace tt
