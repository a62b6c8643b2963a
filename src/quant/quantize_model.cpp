#include "quant/quantize_model.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "quant/quant.h"

namespace tt {
namespace {

namespace fs = std::filesystem;

// llama.cpp's GGML_QNT_VERSION, written as general.quantization_version.
constexpr uint32_t kQuantizationVersion = 2;

int64_t require_count(const GgufFile& f, const std::string& key) {
  const std::optional<uint64_t> v = f.get_uint(key);
  if (!v) fail("{}: metadata key '{}' is missing (needed to choose tensor types)", f.path(), key);
  if (*v > INT32_MAX) fail("{}: metadata key '{}' is {}, too large", f.path(), key, *v);
  return static_cast<int64_t>(*v);
}

MixModel mix_model(const GgufFile& f) {
  MixModel m;
  const std::optional<std::string> arch = f.get_string("general.architecture");
  if (!arch) fail("{}: metadata key 'general.architecture' is missing", f.path());
  m.arch = *arch;
  m.n_layer = require_count(f, m.arch + ".block_count");
  m.n_head = require_count(f, m.arch + ".attention.head_count");
  m.n_head_kv =
      f.find(m.arch + ".attention.head_count_kv") ? require_count(f, m.arch + ".attention.head_count_kv") : m.n_head;
  m.n_expert = f.find(m.arch + ".expert_count") ? require_count(f, m.arch + ".expert_count") : 0;
  return m;
}

int64_t rows_of(const GgufTensorInfo& t) { return t.ne[0] == 0 ? 0 : t.n_elements() / t.ne[0]; }

bool is_float_source(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

// Converts rows [begin, end) of a tensor of n_per_row elements: each row to floats, then to the output type.
void convert_rows(const QuantKernels& from, const QuantKernels& to, const uint8_t* src, uint8_t* dst, int64_t n_per_row,
                  int64_t begin, int64_t end) {
  const uint64_t in_row = row_bytes(from.type, n_per_row), out_row = row_bytes(to.type, n_per_row);
  std::vector<float> row(n_per_row);
  for (int64_t r = begin; r < end; ++r) {
    from.dequantize_row(src + r * in_row, row.data(), n_per_row);
    to.quantize_row(row.data(), dst + r * out_row, n_per_row);
  }
}

// The rows split into `threads` contiguous ranges; each row's bytes depend only on that row.
void convert_tensor(const QuantKernels& from, const QuantKernels& to, const uint8_t* src, uint8_t* dst,
                    int64_t n_per_row, int64_t rows, int threads) {
  const int64_t n = std::max<int64_t>(1, std::min<int64_t>(threads, rows));
  std::vector<std::thread> workers;
  for (int64_t t = 1; t < n; ++t)
    workers.emplace_back(convert_rows, std::cref(from), std::cref(to), src, dst, n_per_row, rows * t / n,
                         rows * (t + 1) / n);
  convert_rows(from, to, src, dst, n_per_row, 0, rows / n);
  for (std::thread& w : workers) w.join();
}

void write_all(std::ofstream& out, const uint8_t* data, uint64_t size, const std::string& path) {
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) fail("error writing '{}': {}", path, std::strerror(errno));
}

QuantizeSummary write_quantized(const GgufFile& in, const std::string& tmp, const QuantFileType& target,
                                const QuantizeOptions& options) {
  const std::vector<GgufTensorInfo>& infos = in.tensors();
  std::vector<std::string> names;
  for (const GgufTensorInfo& t : infos) names.push_back(t.name);
  const std::vector<size_t> order = quantize_order(names);
  std::vector<MixTensor> mix;
  for (size_t i : order) {
    MixTensor m{infos[i].name, infos[i].n_dims, {}, infos[i].type};
    std::copy(infos[i].ne, infos[i].ne + kGgufMaxDims, m.ne);
    mix.push_back(m);
  }
  const std::vector<GgmlType> types = choose_tensor_types(target, mix_model(in), mix);

  QuantizeSummary summary;
  GgufWriter w;
  for (const GgufKv& kv : in.kvs()) {
    // llama-quantize sets these two itself (appended last) and drops split information.
    if (kv.key == "general.quantization_version" || kv.key == "general.file_type" || kv.key == "split.no" ||
        kv.key == "split.count" || kv.key == "split.tensors.count")
      continue;
    if (kv.key == "general.alignment")
      w.set_alignment(static_cast<uint32_t>(in.alignment()));
    else
      w.add_kv(kv.key, kv.value);
  }
  w.add_u32("general.quantization_version", kQuantizationVersion);
  w.add_u32("general.file_type", target.file_type);

  for (size_t k = 0; k < order.size(); ++k) {
    const GgufTensorInfo& t = infos[order[k]];
    const GgmlType to = types[k];
    if (to != t.type) {
      if (type_traits(t.type).quantized)
        fail("tensor '{}' is {}: requantizing a quantized source is not supported (sources: F32, F16, BF16)", t.name,
             type_name(t.type));
      if (!is_float_source(t.type))
        fail("tensor '{}' is {}: converting it is not supported (sources: F32, F16, BF16)", t.name, type_name(t.type));
    }
    w.add_tensor_info(t.name, to, t.shape(), row_bytes(to, t.ne[0]) * rows_of(t));
  }

  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot create '{}': {}", tmp, std::strerror(errno));
  const std::vector<uint8_t> header = w.header_bytes();
  write_all(out, header.data(), header.size(), tmp);
  const std::vector<uint8_t> zeros(w.alignment(), 0);
  std::vector<uint8_t> buffer;
  for (size_t k = 0; k < order.size(); ++k) {
    const GgufTensorInfo& t = infos[order[k]];
    const GgmlType to = types[k];
    const int64_t rows = rows_of(t);
    const uint64_t size = row_bytes(to, t.ne[0]) * rows;
    const uint8_t* src = in.tensor_data(t);
    if (to == t.type) {
      write_all(out, src, size, tmp);
    } else {
      const QuantKernels* from = find_kernels(t.type);
      const QuantKernels* dst = find_kernels(to);
      TT_CHECK(from && dst && dst->quantize_row, "no kernels for {} -> {}", type_name(t.type), type_name(to));
      buffer.resize(size);
      convert_tensor(*from, *dst, src, buffer.data(), t.ne[0], rows, options.threads);
      write_all(out, buffer.data(), size, tmp);
    }
    write_all(out, zeros.data(), (w.alignment() - size % w.alignment()) % w.alignment(), tmp);
    summary.bytes_in += t.size_bytes;
    summary.bytes_out += size;
    if (options.progress) options.progress({k + 1, order.size(), t.name, t.type, to, t.size_bytes, size});
  }
  out.close();
  if (!out) fail("error writing '{}': {}", tmp, std::strerror(errno));
  return summary;
}

}  // namespace

QuantizeSummary quantize_model(const std::string& in_path, const std::string& out_path, const QuantFileType& target,
                               const QuantizeOptions& options) {
  if (options.threads < 1) fail("threads must be at least 1, got {}", options.threads);
  std::error_code ec;
  if (!options.overwrite && fs::exists(out_path, ec))
    fail("'{}' already exists (use --overwrite to replace it)", out_path);
  const std::unique_ptr<GgufFile> in = GgufFile::open(in_path);
  const std::string tmp = out_path + ".tmp-" + std::to_string(::getpid());
  QuantizeSummary summary;
  try {
    summary = write_quantized(*in, tmp, target, options);
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
  fs::rename(tmp, out_path, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    fail("cannot rename '{}' to '{}': {}", tmp, out_path, why);
  }
  return summary;
}

}  // namespace tt
