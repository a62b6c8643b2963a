#include "tracer/value_check.h"

#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <span>

#include "core/error.h"
#include "core/fp16.h"

namespace tt {

namespace {

// The values an op wrote: its output, or for SET_ROWS the cache rows written (converted to f32).
void output_values(const Node& n, std::vector<float>& buf, std::span<const float>& values) {
  if (n.op == OpKind::SET_ROWS) {
    const Tensor& cache = n.out->storage();
    const int64_t count = static_cast<int64_t>(n.write.length / (cache.type == GgmlType::F16 ? 2 : 4));
    buf.resize(count);
    const uint8_t* p = cache.data + (n.write.offset - cache.offset);
    if (cache.type == GgmlType::F16)
      fp16_to_fp32_row(reinterpret_cast<const uint16_t*>(p), buf.data(), count);
    else
      std::memcpy(buf.data(), p, count * sizeof(float));
    values = buf;
    return;
  }
  values = {n.out->as<const float>(), static_cast<size_t>(n.out->n_elements())};
}

}  // namespace

void ValueCheck::on_graph_ready(size_t n_nodes, int32_t step) {
  step_ = step;
  if (wanted()) stats_.assign(n_nodes, trace::ValueStats{});
}

void ValueCheck::on_node_done(int node, const Node& n) {
  if (op_is_view(n.op)) return;
  thread_local std::vector<float> buf;
  std::span<const float> v;
  output_values(n, buf, v);
  trace::ValueStats s;
  double sum = 0;
  float mn = INFINITY, mx = -INFINITY;
  auto first_nonfinite = [&](const char* what, size_t i) {
    if (check_finite_ && !nonfinite_)
      nonfinite_ = fmt::format("{} in the output of {} '{}' (step {}, layer {}, element {})", what, op_name(n.op),
                               n.out->name, step_, n.layer, i);
  };
  for (size_t i = 0; i < v.size(); ++i) {
    const float x = v[i];
    if (std::isnan(x)) {
      if (!s.nan_count++) first_nonfinite("NaN", i);
      continue;
    }
    if (std::isinf(x)) {
      if (!s.inf_count++) first_nonfinite("Inf", i);
      continue;
    }
    sum += x;
    mn = std::min(mn, x);
    mx = std::max(mx, x);
  }
  const uint64_t finite = v.size() - s.nan_count - s.inf_count;
  s.min = finite ? mn : 0;
  s.max = finite ? mx : 0;
  s.mean = finite ? sum / finite : 0;
  s.hash = XXH64(v.data(), v.size_bytes(), 0);
  stats_[node] = s;
}

void ValueCheck::check() const {
  if (nonfinite_) fail("--check-finite: {}", *nonfinite_);
}

}  // namespace tt
