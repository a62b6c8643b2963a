// The per-token JSON layout (/work/shared/reference/formats/tokens-json.md; our version in docs/export.md):
// OUT/memory-map.json, OUT/buffer-timeline.json, OUT/graphs/token-NNNNN.json, OUT/traces/token-NNNNN.json.
// Written into OUT.tmp-PID and renamed to OUT when complete (replacing an earlier export).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "core/shape.h"
#include "core/text.h"
#include "export/export.h"
#include "gguf/memory_map.h"

namespace tt::exporter {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormatVersion = "tensortrace.tokens-json.1";

json layer_json(std::optional<int> l) { return l ? json(*l) : json(nullptr); }
json layer_json(int l) { return l >= 0 ? json(l) : json(nullptr); }

// A stable stand-in for the old tool's tensor pointer: the file offset for weights, else buffer id + 1 above
// bit 40 and the offset in the buffer below.
std::string location_key(Pool pool, int32_t buffer_id, uint64_t offset) {
  if (pool == Pool::MODEL_FILE) return fmt::format("0x{:x}", offset);
  return fmt::format("0x{:x}", (static_cast<uint64_t>(buffer_id + 1) << 40) | offset);
}

// Tensor-level category/component in the reference vocabulary (embedding, attention, ffn, output; query, key,
// value, output, gate, up, down); what has no equivalent keeps tensortrace's word (norm, embedding, ...).
std::string weight_category(const MapTensor& t) {
  if (t.category != "norm") return t.category;
  const std::string& n = t.name;
  if (n.find("attn") != std::string::npos) return "attention";
  if (n.find("ffn") != std::string::npos || n.find("ffw") != std::string::npos) return "ffn";
  if (n.starts_with("output")) return "output";
  if (n.starts_with("token_embd")) return "embedding";
  return "norm";
}

std::string weight_component(const std::string& c) {
  static const std::map<std::string, std::string> names = {
      {"q", "query"}, {"k", "key"}, {"v", "value"}, {"o", "output"}, {"qkv", "query_key_value"}};
  std::string base = c, suffix;
  if (base.ends_with("_bias")) base.resize(base.size() - 5), suffix = "_bias";
  auto it = names.find(base);
  return (it != names.end() ? it->second : base) + suffix;
}

// Graph node category in the reference vocabulary (input, attention, ffn, output).
std::string node_category(const std::string& category, const std::string& name) {
  if (category == "embedding") return "input";
  if (category == "attention" || category == "ffn" || category == "output") return category;
  if (name.starts_with("result_norm") || name.starts_with("inp_last")) return "output";
  if (name.starts_with("ffn_") || name.starts_with("l_out")) return "ffn";
  return "attention";  // norm-N, attn_norm-N, the residual before the feed-forward block
}

void write_json_file(const fs::path& path, const json& j) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail("cannot create '{}': {}", path.string(), std::strerror(errno));
  f << j.dump(1, ' ', false, json::error_handler_t::replace) << '\n';
  f.flush();
  if (!f) fail("error writing '{}'", path.string());
}

json source_json(const RunData& run, const trace::TensorRecord& in) {
  uint64_t read = 0;
  json ranges = json::array();
  for (const trace::RangeRecord& r : in.ranges) {
    read += r.length;
    json jr = {{"offset", r.offset}, {"length", r.length}};
    if (r.pool != Pool::MODEL_FILE) jr["buffer_id"] = r.buffer_id;
    if (r.pos_begin >= 0) jr["pos_begin"] = r.pos_begin, jr["pos_end"] = r.pos_end;
    ranges.push_back(std::move(jr));
  }
  std::optional<int> layer = layer_from_name(in.name);
  json s = {{"name", in.name},
            {"tensor_ptr", location_key(in.pool, in.buffer_id, in.offset)},
            {"size_bytes", in.bytes},
            {"layer_id", layer_json(layer)},
            {"dtype", ascii_lower(std::string(type_name(in.type)))},
            {"shape", shape_dims(in.ne)},
            {"pool", pool_name(in.pool)}};
  if (in.pool == Pool::MODEL_FILE) {
    s["memory_source"] = "DISK";
    s["disk_offset"] = in.offset;
  } else {
    s["memory_source"] = "BUFFER";
    s["buffer_id"] = in.buffer_id;
    s["buffer_offset"] = in.offset;
  }
  s["bytes_read"] = read;
  s["read_ranges"] = std::move(ranges);
  return s;
}

json trace_json(const RunData& run, const trace::StepMarker& m) {
  auto ops = run.ops_of_step(m.step);
  json entries = json::array();
  uint64_t end = m.end_ns;
  for (const trace::OpRecord& o : ops) {
    if (!m.ended) end = std::max(end, o.end_ns);
    json sources = json::array();
    for (const trace::TensorRecord& in : o.inputs) sources.push_back(source_json(run, in));
    json e = {{"entry_id", entries.size()},
              {"timestamp_ns", o.start_ns},
              {"timestamp_relative_ms", (static_cast<double>(o.start_ns) - static_cast<double>(m.start_ns)) / 1e6},
              {"duration_ns", o.end_ns - o.start_ns},
              {"token_id", m.step},
              {"layer_id", layer_json(o.layer)},
              {"thread_id", o.thread},
              {"n_threads", o.n_threads},
              {"phase", phase_name(o.phase)},
              {"operation_type", op_name(o.op)},
              {"dst_name", o.name},
              {"node", o.node},
              {"num_sources", o.inputs.size()},
              {"sources", std::move(sources)}};
    json dst = {{"tensor_ptr", location_key(o.out.pool, o.out.buffer_id, o.out.offset)},
                {"size_bytes", o.out.bytes},
                {"dtype", ascii_lower(std::string(type_name(o.out.type)))},
                {"shape", shape_dims(o.out.ne)},
                {"pool", pool_name(o.out.pool)},
                {"buffer_id", o.out.buffer_id}};
    if (o.has_stats)
      dst["stats"] = {{"min", o.stats.min},
                      {"max", o.stats.max},
                      {"mean", o.stats.mean},
                      {"nan_count", o.stats.nan_count},
                      {"inf_count", o.stats.inf_count},
                      {"hash", fmt::format("{:016x}", o.stats.hash)}};
    e["dst"] = std::move(dst);
    if (o.op == OpKind::MUL_MAT_ID) {
      // Per token the layer routes (in position order): the experts it chose, in llama.cpp's order, their weights.
      json ids = json::array(), weights = json::array(), pos = json::array();
      for (const trace::RoutingRecord& x : run.routing_of_layer(m.step, o.layer)) {
        ids.push_back(x.experts);
        weights.push_back(x.weights);
        pos.push_back(x.token_pos);
      }
      e["expert_ids"] = std::move(ids);
      e["expert_weights"] = std::move(weights);
      e["expert_token_pos"] = std::move(pos);
    }
    entries.push_back(std::move(e));
  }
  end = std::max(end, m.start_ns);
  json meta = {{"total_entries", entries.size()},
               {"duration_ms", static_cast<double>(end - m.start_ns) / 1e6},
               {"timestamp_start_ns", m.start_ns},
               {"format_version", kFormatVersion},
               {"phase", phase_name(m.phase)},
               {"pos_begin", m.pos_begin},
               {"pos_end", m.pos_end},
               {"complete", m.ended}};
  if (m.step < run.steps.size()) {
    const RunStep& s = run.steps[m.step];
    meta["input_tokens"] = s.input_tokens;
    meta["next_token"] = s.token ? json(*s.token) : json(nullptr);
    meta["next_token_text"] = s.token ? json(s.token_text) : json(nullptr);
  }
  return {{"token_id", m.step}, {"metadata", std::move(meta)}, {"entries", std::move(entries)}};
}

json graph_json(const RunData& run, const trace::StepMarker& m, int n_layers) {
  const json* g = run.graph_of_step(m.step);
  if (!g) return nullptr;
  auto ops = run.ops_of_step(m.step);
  // Locations and exact shapes of this step's tensors, by name (leaves from the inputs that read them).
  std::map<std::string, const trace::TensorRecord*> tensors;
  for (const trace::OpRecord& o : ops)
    for (const trace::TensorRecord& in : o.inputs) tensors.emplace(in.name, &in);
  json nodes = json::array(), edges = json::array();
  for (const json& n : (*g)["nodes"]) {
    const std::string name = n.value("name", "");
    const std::string op = n.value("op", "");
    const trace::TensorRecord* t = nullptr;
    if (n.contains("index") && n["index"].is_number_unsigned()) {
      const size_t idx = n["index"].get<size_t>();
      if (idx < ops.size() && ops[idx].node == idx) t = &ops[idx].out;
    } else if (auto it = tensors.find(name); it != tensors.end()) {
      t = it->second;
    }
    json node = {{"id", n.value("id", "")},
                 {"address", t ? json(location_key(t->pool, t->buffer_id, t->offset)) : json(nullptr)},
                 {"label", name},
                 {"operation", op == "LEAF" ? "NONE" : op},
                 {"shape", t ? json(shape_dims(t->ne)) : n.value("shape", json(nullptr))},
                 {"dtype", ascii_lower(n.value("type", ""))},
                 {"layer_id", n.value("layer", json(nullptr))},
                 {"category", node_category(n.value("category", ""), name)},
                 {"category_detail", n.value("category", "")},
                 {"pool", n.value("pool", "")}};
    if (n.contains("weight_tensor")) node["weight_tensor"] = n["weight_tensor"];
    nodes.push_back(std::move(node));
  }
  for (const json& e : (*g)["edges"])
    edges.push_back({{"source", e.value("source", "")},
                     {"target", e.value("target", "")},
                     {"label", e.value("label", "")},
                     {"slot", e.value("slot", 0)}});
  std::string date = run.info.date;
  json meta = {{"total_nodes", nodes.size()},     {"total_edges", edges.size()},  {"layers", n_layers},
               {"timestamp_generated", date},     {"phase", phase_name(m.phase)}, {"graph", run.steps[m.step].graph},
               {"format_version", kFormatVersion}};
  return {
      {"token_id", m.step}, {"metadata", std::move(meta)}, {"nodes", std::move(nodes)}, {"edges", std::move(edges)}};
}

json memory_map_json(const RunData& run, int n_layers) {
  const json& cfg = run.model_config();
  auto cfg_int = [&](const char* key) { return cfg.is_object() && cfg.contains(key) ? cfg[key] : json(nullptr); };
  json tensors = json::array();
  for (const MapTensor& t : run.tensors)
    tensors.push_back({{"name", t.name},
                       {"offset_start", t.offset_start},
                       {"offset_end", t.offset_end},
                       {"size_bytes", t.size_bytes},
                       {"shape", t.shape},
                       {"dtype", ascii_lower(t.type)},
                       {"category", weight_category(t)},
                       {"layer_id", layer_json(t.layer)},
                       {"component", weight_component(t.component)}});
  return {{"model_name", run.model_name},
          {"file", run.model_path},
          {"total_size_bytes", run.file_size.value_or(0)},
          {"metadata", {{"n_layers", n_layers}, {"n_vocab", cfg_int("n_vocab")}, {"n_embd", cfg_int("n_embd")}}},
          {"format_version", kFormatVersion},
          {"tensors", std::move(tensors)}};
}

json buffer_steps_json(const RunData& run) {
  json steps = json::array();
  for (const BufferStep& s : run.buffer_steps) steps.push_back(s.to_json());
  return steps;
}

json buffer_timeline_json(const RunData& run) {
  json events = json::array();
  for (const BufferEvent& e : run.buffer_events)
    events.push_back({{"event_id", events.size()},
                      {"timestamp_ns", e.t_ns},
                      {"timestamp_ms", static_cast<double>(e.t_ns) / 1e6},
                      {"token_id", e.step},
                      {"event", e.alloc ? "alloc" : "free"},
                      {"buffer_id", e.buffer_id},
                      {"pool", pool_name(e.pool)},
                      {"offset", e.offset},
                      {"size_bytes", e.bytes},
                      {"name", e.tensor},
                      {"reuse", e.reuse},
                      {"growth", e.growth}});
  return {{"format_version", kFormatVersion},
          {"total_events", events.size()},
          {"peak_bytes", run.peak_bytes},
          {"steps", buffer_steps_json(run)},
          {"events", std::move(events)}};
}

}  // namespace

void export_tokens_json(const RunData& run, const std::string& out_dir, const Progress& progress) {
  write_dir_atomic(out_dir, [&](const fs::path& tmp) {
    fs::create_directories(tmp / "traces");
    fs::create_directories(tmp / "graphs");
    int n_layers = 0;
    const json& cfg = run.model_config();
    if (cfg.is_object() && cfg.contains("n_layer")) n_layers = cfg["n_layer"].get<int>();
    for (const MapTensor& t : run.tensors)
      if (t.layer) n_layers = std::max(n_layers, *t.layer + 1);

    if (!run.memory_map.is_null()) write_json_file(tmp / "memory-map.json", memory_map_json(run, n_layers));
    write_json_file(tmp / "buffer-timeline.json", buffer_timeline_json(run));
    const size_t n = run.trace.steps.size();
    for (size_t i = 0; i < n; ++i) {
      const trace::StepMarker& m = run.trace.steps[i];
      const std::string file = fmt::format("token-{:05}.json", m.step);
      write_json_file(tmp / "traces" / file, trace_json(run, m));
      json g = graph_json(run, m, n_layers);
      if (!g.is_null()) write_json_file(tmp / "graphs" / file, g);
      if (progress) progress(fmt::format("tokens-json: step {}/{}", i + 1, n));
    }
  });
}

void write_dir_atomic(const std::string& out_dir_in, const std::function<void(const std::filesystem::path&)>& fill) {
  std::string out_dir = out_dir_in;
  while (out_dir.size() > 1 && out_dir.back() == '/') out_dir.pop_back();
  const fs::path out(out_dir);
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  const fs::path tmp = out_dir + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  try {
    fs::create_directories(tmp);
    fill(tmp);
    // Replace an earlier export: move it aside, move the new one in, then delete the old one.
    const fs::path old = out_dir + ".old-" + std::to_string(::getpid());
    const bool had_old = fs::exists(out);
    if (had_old) fs::rename(out, old);
    fs::rename(tmp, out, ec);
    if (ec) {
      if (had_old) fs::rename(old, out);
      fail("cannot rename '{}' to '{}': {}", tmp.string(), out_dir, ec.message());
    }
    if (had_old) fs::remove_all(old, ec);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    fail("writing '{}': {}", out_dir, e.what());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace tt::exporter
