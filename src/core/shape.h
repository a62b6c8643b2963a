// Tensor shapes as ggml stores them (ne[0] first, 4 dimensions) and as people read them: trailing 1s dropped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tt {

// Dimensions up to the last one above 1 (at least one): [64, 5, 1, 1] has rank 2.
inline int shape_rank(const int64_t* ne) {
  int n = 4;
  while (n > 1 && ne[n - 1] == 1) --n;
  return n;
}

// The dimensions up to the rank, for JSON: {64, 5}.
inline std::vector<int64_t> shape_dims(const int64_t* ne) { return {ne, ne + shape_rank(ne)}; }

// "[64, 5]" (or "[64,5]" with sep ","), trailing 1s dropped.
inline std::string shape_text(const int64_t* ne, std::string_view sep = ", ") {
  std::string s = "[";
  for (int d = 0; d < shape_rank(ne); ++d) {
    if (d) s += sep;
    s += std::to_string(ne[d]);
  }
  return s + "]";
}

}  // namespace tt
