// tensortrace inspect MODEL.gguf [--json] [--kv]: the file's layout, metadata and exact memory map.
#include <fmt/format.h>

#include <map>

#include "gguf/gguf.h"
#include "gguf/memory_map.h"
#include "tools/command.h"

namespace tt::cli {
namespace {

std::string human_bytes(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", b / double(1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.2f} MiB", b / double(1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.2f} KiB", b / double(1ull << 10));
  return fmt::format("{} B", b);
}

std::string shape_string(const GgufTensorInfo& t) {
  std::string s = "[";
  for (int d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

void print_human(const GgufFile& f, bool all_kv) {
  fmt::print("file        {}\n", f.path());
  fmt::print("size        {} bytes ({})\n", f.file_size(), human_bytes(f.file_size()));
  fmt::print("gguf        v{}, alignment {}\n\n", f.version(), f.alignment());
  fmt::print("layout\n");
  fmt::print("  header       [{:>12}, {:>12})  {:>12} bytes\n", 0, f.header_end(), f.header_end());
  fmt::print("  metadata     [{:>12}, {:>12})  {:>12} bytes  ({} keys)\n", f.header_end(), f.kv_end(),
             f.kv_end() - f.header_end(), f.kvs().size());
  fmt::print("  tensor info  [{:>12}, {:>12})  {:>12} bytes  ({} tensors)\n", f.kv_end(), f.tensor_info_end(),
             f.tensor_info_end() - f.kv_end(), f.tensors().size());
  fmt::print("  data         [{:>12}, {:>12})  {:>12} bytes\n\n", f.data_offset(), f.file_size(),
             f.file_size() - f.data_offset());

  std::string arch = f.get_string("general.architecture").value_or("(none)");
  fmt::print("architecture {}\n", arch);
  fmt::print("name         {}\n", f.get_string("general.name").value_or("(none)"));
  const std::string prefix = arch + ".";
  for (const GgufKv& kv : f.kvs()) {
    if (kv.key.starts_with(prefix)) fmt::print("  {:<40} {}\n", kv.key.substr(prefix.size()), kv.value.to_string());
  }
  std::string tok_model = f.get_string("tokenizer.ggml.model").value_or("(none)");
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  fmt::print("tokenizer    {}{}, vocabulary {}\n", tok_model,
             f.find("tokenizer.ggml.pre") ? " (pre " + *f.get_string("tokenizer.ggml.pre") + ")" : "",
             tokens ? tokens->array.size() : 0);

  if (all_kv) {
    fmt::print("\nmetadata ({} keys)\n", f.kvs().size());
    for (const GgufKv& kv : f.kvs())
      fmt::print("  @{:<10} {:<48} {:<8} {}\n", kv.offset, kv.key, value_type_name(kv.value.type),
                 kv.value.to_string());
  }

  struct TypeTotals {
    uint64_t tensors = 0, bytes = 0, params = 0;
  };
  std::map<std::string, TypeTotals> by_type;
  uint64_t params = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    TypeTotals& tt = by_type[std::string(type_name(t.type))];
    tt.tensors++;
    tt.bytes += t.size_bytes;
    tt.params += t.n_elements();
    params += t.n_elements();
  }
  fmt::print("\nparameters   {} ({:.3f} M)\n", params, params / 1e6);
  fmt::print("by type\n");
  for (const auto& [name, tt] : by_type)
    fmt::print("  {:<8} {:>5} tensors  {:>14} params  {:>14} bytes ({})\n", name, tt.tensors, tt.params, tt.bytes,
               human_bytes(tt.bytes));

  fmt::print("\ntensors\n  {:<32} {:<7} {:<20} {:>12} {:>12} {:>12} {:>5}\n", "name", "type", "shape", "start", "end",
             "bytes", "layer");
  for (const GgufTensorInfo& t : f.tensors()) {
    TensorRole role = tensor_role(t.name);
    fmt::print("  {:<32} {:<7} {:<20} {:>12} {:>12} {:>12} {:>5}\n", t.name, type_name(t.type), shape_string(t),
               t.offset, t.offset_end(), t.size_bytes, role.layer ? std::to_string(*role.layer) : "-");
  }

  bool experts_header = false;
  for (const GgufTensorInfo& t : f.tensors()) {
    const std::optional<ExpertSlabs> x = expert_slabs(t);
    if (!x) continue;
    if (!experts_header) fmt::print("\nexperts (expert e: [start + e x bytes, start + (e+1) x bytes))\n");
    experts_header = true;
    fmt::print("  {:<32} {:>4} experts x {:>10} bytes:", t.name, x->count, x->bytes_per_expert);
    for (int64_t e = 0; e < x->count; ++e)
      fmt::print(" {}:[{}, {})", e, x->begin(e), x->begin(e) + x->bytes_per_expert);
    fmt::print("\n");
  }
}

RegisterCommand reg("inspect", "Show a GGUF file's layout, metadata and tensor memory map", 10, [](CLI::App& cmd) {
  auto model = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto kv = std::make_shared<bool>(false);
  cmd.add_option("model", *model, "GGUF model file")->required();
  cmd.add_flag("--json", *json, "Print the memory map as JSON (docs/memory-map.md)");
  cmd.add_flag("--kv", *kv, "Print all metadata (long arrays summarised)");
  return [=]() {
    auto f = GgufFile::open(*model);
    if (*json) {
      nlohmann::json j = memory_map_json(*f);
      if (*kv) {
        nlohmann::json meta = nlohmann::json::object();
        for (const GgufKv& e : f->kvs()) meta[e.key] = e.value.to_string();
        j["metadata"] = meta;
      }
      // Keys and names are meant to be UTF-8 but the reader does not insist; replace bad bytes rather than throw.
      fmt::print("{}\n", j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      print_human(*f, *kv);
    }
    return 0;
  };
});

}  // namespace
}  // namespace tt::cli
