// Quantizes a GGUF model to one of llama-quantize's file types (quant/mix.h chooses each tensor's type; the
// scalar references of quant.h quantize its rows), writing a new GGUF with the metadata copied and
// general.quantization_version / general.file_type set as llama-quantize sets them. Tensor data is byte-identical
// to llama-quantize's from the same source without an importance matrix.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "gguf/ggml_type.h"
#include "quant/mix.h"

namespace tt {

// One tensor written: its position (1-based) among `count`, name, types and sizes.
struct QuantizeStep {
  size_t index;
  size_t count;
  const std::string& name;
  GgmlType from;
  GgmlType to;
  uint64_t bytes_in;
  uint64_t bytes_out;
};
using QuantizeProgressFn = std::function<void(const QuantizeStep&)>;

struct QuantizeOptions {
  int threads = 1;         // rows of a tensor are split among this many threads; the output does not depend on it
  bool overwrite = false;  // replace an existing output file
  QuantizeProgressFn progress;
};

struct QuantizeSummary {
  uint64_t bytes_in = 0;   // tensor data read
  uint64_t bytes_out = 0;  // tensor data written
};

// Errors (tt::Error) name the problem: unreadable input, a source tensor of a type other than F32 / F16 / BF16
// that would need converting, an existing output without `overwrite`, write failures. The output is written to
// OUT.tmp-PID and renamed when complete; on error the temporary file is removed and OUT is untouched.
QuantizeSummary quantize_model(const std::string& in_path, const std::string& out_path, const QuantFileType& target,
                               const QuantizeOptions& options);

}  // namespace tt
