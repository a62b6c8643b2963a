// libFuzzer target for the GGUF reader: any byte string must parse or give a tt::Error, never crash, hang,
// read out of bounds or allocate without bound. Files that parse are also pushed through everything that
// consumes a parsed file without the model code: the memory-map JSON, value printing and the typed getters.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/memory_map.h"

namespace {

template <typename F>
void ignore_error(F&& f) {
  try {
    f();
  } catch (const tt::Error&) {
  }
}

void exercise(const tt::GgufFile& f) {
  size_t total = 0;
  // A file can parse and still be refused by the memory map (an expert tensor of more experts than a layer may have).
  ignore_error([&] {
    const nlohmann::json map = tt::memory_map_json(f);
    total += map.dump(1, ' ', false, nlohmann::json::error_handler_t::replace).size();
  });
  for (const tt::GgufKv& kv : f.kvs()) {
    total += kv.value.to_string().size() + kv.value.to_string(0).size();
    ignore_error([&] { total += f.get_string(kv.key).value_or("").size(); });
    ignore_error([&] { total += f.get_uint(kv.key).value_or(0); });
    ignore_error([&] { total += static_cast<size_t>(f.get_float(kv.key).value_or(0) != 0); });
    ignore_error([&] { total += f.get_bool(kv.key).value_or(false); });
    ignore_error([&] { total += f.get_array(kv.key, kv.value.element_type) != nullptr; });
    if (f.find(kv.key) != &kv.value) __builtin_trap();
  }
  // Touch the first and last byte of every tensor: ASan reports any tensor the reader let outside the input.
  volatile uint8_t sink = 0;
  for (const tt::GgufTensorInfo& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) __builtin_trap();
    if (t.size_bytes == 0) continue;
    sink = sink + f.tensor_data(t)[0] + f.tensor_data(t)[t.size_bytes - 1];
  }
  sink = sink + static_cast<uint8_t>(total);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<tt::GgufFile> f;
  try {
    f = tt::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz-input");
  } catch (const tt::Error&) {
    return 0;  // rejected with a message: the expected outcome for most inputs
  }
  exercise(*f);
  return 0;
}
