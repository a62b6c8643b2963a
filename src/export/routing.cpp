// A mixture-of-experts run's routing in researchers' formats (docs/export.md "Routing"): NumPy .npy arrays in
// vLLM's routed-experts layout, and CSV.
#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <map>

#include "core/error.h"
#include "export/export.h"
#include "trace/run_dir.h"

namespace tt::exporter {

namespace {

namespace fs = std::filesystem;

// The data is written in the host's byte order and declared little-endian ('<').
static_assert(std::endian::native == std::endian::little, "the .npy writer assumes a little-endian host");

// NumPy's .npy format 1.0: magic "\x93NUMPY", version 1 0, a little-endian uint16 header length, the header (a
// Python dict literal padded with spaces and ended by '\n' so that the data starts at a multiple of 64 bytes), then
// the C-order data.
std::string npy_header(const char* descr, const std::vector<size_t>& shape) {
  std::string dims;
  for (size_t d : shape) dims += fmt::format("{},", d);
  if (shape.size() > 1) dims.pop_back();  // (3,) for one dimension, (3, 4) for more
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  if (dict.size() > 65535) fail("npy header of {} bytes does not fit format 1.0", dict.size());
  std::string h = "\x93NUMPY";
  h += static_cast<char>(1);
  h += static_cast<char>(0);
  h += static_cast<char>(dict.size() & 0xff);
  h += static_cast<char>(dict.size() >> 8);
  return h + dict;
}

template <typename T>
void write_npy(const fs::path& path, const char* descr, const std::vector<size_t>& shape, const std::vector<T>& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail("cannot create '{}': {}", path.string(), std::strerror(errno));
  const std::string h = npy_header(descr, shape);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(T)));
  f.flush();
  if (!f) fail("error writing '{}'", path.string());
}

}  // namespace

RoutingTable routing_table(const RunData& run) {
  if (run.trace.routing.empty())
    fail("'{}' has no routing records (not a mixture-of-experts run): nothing to export", run.dir);
  RoutingTable t;
  // Routed layers: those with a router in the model (the loader checked every record's layer has one).
  std::map<int, size_t> layer_index;
  for (const trace::RoutingRecord& x : run.trace.routing) {
    layer_index.emplace(x.layer, 0);
    t.top_k = std::max(t.top_k, x.experts.size());
  }
  for (const MapTensor& m : run.tensors)
    if (m.layer && m.name == fmt::format("blk.{}.ffn_gate_inp.weight", *m.layer)) layer_index.emplace(*m.layer, 0);
  for (auto& [layer, index] : layer_index) {
    index = t.layers.size();
    t.layers.push_back(layer);
  }
  // Tokens in execution order: by step, then position (records come by layer, then position, within a step).
  std::map<std::pair<uint32_t, int32_t>, size_t> token_index;
  for (const trace::RoutingRecord& x : run.trace.routing) token_index.emplace(std::pair(x.step, x.token_pos), 0);
  for (auto& [token, index] : token_index) {
    index = t.tokens.size();
    t.tokens.push_back(token);
  }
  const size_t n_layers = t.layers.size(), cells = t.tokens.size() * n_layers * t.top_k;
  t.experts.assign(cells, -1);
  t.weights.assign(cells, 0.0f);
  std::vector<bool> routed(t.tokens.size() * n_layers, false);
  for (const trace::RoutingRecord& x : run.trace.routing) {
    const size_t row = token_index.at({x.step, x.token_pos}) * n_layers + layer_index.at(x.layer);
    routed[row] = true;
    for (size_t k = 0; k < x.experts.size(); ++k) {
      if (x.experts[k] > 32767)
        fail("'{}': expert {} of step {} layer {} does not fit the int16 layout", run.dir, x.experts[k], x.step,
             x.layer);
      t.experts[row * t.top_k + k] = static_cast<int16_t>(x.experts[k]);
      t.weights[row * t.top_k + k] = x.weights[k];
    }
  }
  for (bool r : routed) t.absent += !r;
  return t;
}

void export_routing_npy(const RoutingTable& t, const std::string& out_dir) {
  write_dir_atomic(out_dir, [&](const fs::path& tmp) {
    const std::vector<size_t> shape = {t.tokens.size(), t.layers.size(), t.top_k};
    write_npy(tmp / "expert_ids.npy", "<i2", shape, t.experts);
    write_npy(tmp / "expert_weights.npy", "<f4", shape, t.weights);
    std::vector<int32_t> tokens;
    tokens.reserve(2 * t.tokens.size());
    for (const auto& [step, pos] : t.tokens) tokens.insert(tokens.end(), {static_cast<int32_t>(step), pos});
    write_npy(tmp / "tokens.npy", "<i4", {t.tokens.size(), 2}, tokens);
    write_npy(tmp / "layers.npy", "<i4", {t.layers.size()}, std::vector<int32_t>(t.layers.begin(), t.layers.end()));
  });
}

void export_routing_csv(const RoutingTable& t, const std::string& out_path) {
  std::string csv = "token,step,position,layer,slot,expert,weight\n";
  const size_t n_layers = t.layers.size();
  for (size_t i = 0; i < t.tokens.size(); ++i)
    for (size_t l = 0; l < n_layers; ++l)
      for (size_t k = 0; k < t.top_k; ++k) {
        const size_t cell = (i * n_layers + l) * t.top_k + k;
        if (t.experts[cell] < 0) continue;
        // {} prints the shortest decimal that reads back as the same float.
        csv += fmt::format("{},{},{},{},{},{},{}\n", i, t.tokens[i].first, t.tokens[i].second, t.layers[l], k,
                           t.experts[cell], t.weights[cell]);
      }
  write_file_atomic(out_path, csv);
}

}  // namespace tt::exporter
