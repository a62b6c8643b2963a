#include "graph/tensor.h"
#include "core/shape.h"

namespace tt {

const char* pool_name(Pool pool) {
  switch (pool) {
    case Pool::MODEL_FILE: return "MODEL_FILE";
    case Pool::KV_CACHE: return "KV_CACHE";
    case Pool::ACTIVATION: return "ACTIVATION";
    case Pool::INPUT: return "INPUT";
    case Pool::SCRATCH: return "SCRATCH";
  }
  return "?";
}

std::string shape_string(const Tensor& t) { return shape_text(t.ne); }

}  // namespace tt
