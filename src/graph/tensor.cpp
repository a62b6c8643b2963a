#include "graph/tensor.h"

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

std::string shape_string(const Tensor& t) {
  int n = 4;
  while (n > 1 && t.ne[n - 1] == 1) --n;
  std::string s = "[";
  for (int d = 0; d < n; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

}  // namespace tt
