#include "graph/tensor.h"

#include "core/shape.h"

namespace tt {

std::string shape_string(const Tensor& t) { return shape_text(t.ne); }

}  // namespace tt
