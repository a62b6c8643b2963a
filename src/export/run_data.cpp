#include "export/run_data.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "trace/run_trace.h"

namespace tt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot read '{}'", path);
  std::ostringstream s;
  s << f.rdbuf();
  if (f.bad()) fail("error reading '{}'", path);
  return s.str();
}

json parse_json(const std::string& path) {
  const std::string text = read_text(path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail("'{}': invalid JSON: {}", path, e.what());
  }
}

// Runs `f`, turning a JSON type or missing-key error into an Error naming the file.
template <typename F>
void with_context(const std::string& what, F&& f) {
  try {
    f();
  } catch (const json::exception& e) {
    fail("'{}': unexpected content: {}", what, e.what());
  }
}

void expect_format(const json& j, const std::string& path, const char* format) {
  if (!j.is_object()) fail("'{}': expected a JSON object", path);
  auto it = j.find("format");
  if (it != j.end() && (!it->is_string() || *it != format))
    fail("'{}': format is {}, expected \"{}\"", path, it->dump(), format);
}

Pool pool_from_name(const std::string& name, const std::string& where) {
  for (int p = 0; p <= static_cast<int>(Pool::SCRATCH); ++p)
    if (name == pool_name(static_cast<Pool>(p))) return static_cast<Pool>(p);
  fail("'{}': unknown pool '{}'", where, name);
}

Phase phase_from_name(const std::string& name, const std::string& where) {
  if (name == "PROMPT") return Phase::PROMPT;
  if (name == "GENERATE") return Phase::GENERATE;
  fail("'{}': unknown phase '{}'", where, name);
}

void load_steps(RunData& r) {
  const std::string path = r.dir + "/steps.jsonl";
  if (!fs::exists(path)) {
    r.warnings.push_back("no steps.jsonl");
    return;
  }
  const std::string text = read_text(path);
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    const bool last_unterminated = end == std::string::npos;
    if (last_unterminated) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.empty()) continue;
    const std::string where = fmt::format("{}:{}", path, line_no);
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception& e) {
      if (last_unterminated) {  // the run was killed while writing this line
        r.warnings.push_back(fmt::format("{}: incomplete last line ignored", where));
        break;
      }
      fail("'{}': invalid JSON: {}", where, e.what());
    }
    RunStep s;
    with_context(where, [&] {
      s.step = j.at("step").get<uint32_t>();
      s.phase = phase_from_name(j.at("phase").get<std::string>(), where);
      s.pos_begin = j.at("pos_begin").get<int32_t>();
      s.pos_end = j.at("pos_end").get<int32_t>();
      s.input_tokens = j.at("input_tokens").get<std::vector<int32_t>>();
      if (!j.at("token").is_null()) s.token = j.at("token").get<int32_t>();
      if (j.contains("token_text") && j["token_text"].is_string()) s.token_text = j["token_text"].get<std::string>();
      s.start_ns = j.at("start_ns").get<uint64_t>();
      s.end_ns = j.at("end_ns").get<uint64_t>();
      s.n_ops = j.at("n_ops").get<uint32_t>();
      s.graph = j.at("graph").get<int>();
    });
    if (s.step != r.steps.size()) fail("'{}': step {} where step {} was expected", where, s.step, r.steps.size());
    s.json = std::move(j);
    r.steps.push_back(std::move(s));
  }
}

void load_memory_map(RunData& r) {
  const std::string path = r.dir + "/memory-map.json";
  if (!fs::exists(path)) {
    r.warnings.push_back("no memory-map.json");
    return;
  }
  r.memory_map = parse_json(path);
  expect_format(r.memory_map, path, "tensortrace.memory-map");
  with_context(path, [&] {
    for (const json& t : r.memory_map.at("tensors")) {
      MapTensor m;
      m.name = t.at("name").get<std::string>();
      m.type = t.at("type").get<std::string>();
      m.shape = t.at("shape").get<std::vector<int64_t>>();
      m.offset_start = t.at("offset_start").get<uint64_t>();
      m.offset_end = t.at("offset_end").get<uint64_t>();
      m.size_bytes = t.at("size_bytes").get<uint64_t>();
      if (!t.at("layer").is_null()) m.layer = t.at("layer").get<int>();
      m.category = t.at("category").get<std::string>();
      m.component = t.at("component").get<std::string>();
      r.tensors.push_back(std::move(m));
    }
  });
  std::sort(r.tensors.begin(), r.tensors.end(),
            [](const MapTensor& a, const MapTensor& b) { return a.offset_start < b.offset_start; });
}

void load_graphs(RunData& r) {
  const std::string gdir = r.dir + "/graphs";
  if (!fs::is_directory(gdir)) {
    r.warnings.push_back("no graphs/ directory");
    return;
  }
  // graph-NNNN.json files; ids are dense from 0.
  for (int id = 0;; ++id) {
    const std::string path = fmt::format("{}/graph-{:04}.json", gdir, id);
    if (!fs::exists(path)) break;
    json g = parse_json(path);
    expect_format(g, path, "tensortrace.graph");
    if (!g.contains("nodes") || !g["nodes"].is_array() || !g.contains("edges") || !g["edges"].is_array())
      fail("'{}': a graph needs arrays 'nodes' and 'edges'", path);
    r.graphs.push_back(std::move(g));
  }
  const std::string index = gdir + "/index.json";
  if (!fs::exists(index)) {
    r.warnings.push_back("no graphs/index.json (steps.jsonl maps steps to graphs)");
    return;
  }
  json j = parse_json(index);
  with_context(index, [&] {
    for (const json& e : j.at("steps")) {
      const uint32_t step = e.at("step").get<uint32_t>();
      const int graph = e.at("graph").get<int>();
      if (step < r.steps.size() && r.steps[step].graph != graph)
        fail("'{}': step {} maps to graph {} but steps.jsonl says {}", index, step, graph, r.steps[step].graph);
    }
  });
  for (const RunStep& s : r.steps)
    if (s.graph < 0 || static_cast<size_t>(s.graph) >= r.graphs.size())
      fail("step {} refers to graph {}, but graphs/ has {} graph(s)", s.step, s.graph, r.graphs.size());
}

void load_buffers(RunData& r) {
  const std::string path = r.dir + "/buffers.json";
  if (!fs::exists(path)) {
    r.warnings.push_back("no buffers.json");
    return;
  }
  json j = parse_json(path);
  expect_format(j, path, "tensortrace.buffers");
  with_context(path, [&] {
    for (const json& e : j.at("events")) {
      if (!e.is_array() || e.size() != 9) fail("'{}': a buffer event has 9 columns, got {}", path, e.dump());
      BufferEvent b;
      b.t_ns = e[0].get<uint64_t>();
      b.step = e[1].get<uint32_t>();
      const std::string kind = e[2].get<std::string>();
      if (kind != "a" && kind != "f") fail("'{}': unknown event kind '{}'", path, kind);
      b.alloc = kind == "a";
      b.pool = pool_from_name(e[3].get<std::string>(), path);
      b.buffer_id = e[4].get<int32_t>();
      b.offset = e[5].get<uint64_t>();
      b.bytes = e[6].get<uint64_t>();
      b.tensor = e[7].get<std::string>();
      b.reuse = e[8].get<bool>();
      r.buffer_events.push_back(std::move(b));
    }
    r.buffer_steps = j.at("steps");
    r.peak_bytes = j.at("peak_bytes").get<uint64_t>();
  });
}

// A worker's spans are written before the op record of their node: a trace cut there ends with spans of an op
// that has no record. They are dropped, so every span has its op.
void drop_orphan_spans(RunData& r) {
  auto& t = r.trace;
  if (t.complete || t.spans.empty()) return;
  const uint32_t step = t.spans.back().step;
  uint32_t ops_in_step = 0;  // a step's op records are nodes 0, 1, ... in order
  for (auto it = t.ops.rbegin(); it != t.ops.rend() && it->step == step; ++it) ++ops_in_step;
  size_t n = t.spans.size();
  while (n > 0 && t.spans[n - 1].step == step && t.spans[n - 1].node >= ops_in_step) --n;
  if (n == t.spans.size()) return;
  r.warnings.push_back(
      fmt::format("{} span(s) of step {} dropped: their op record is past the truncation", t.spans.size() - n, step));
  t.spans.resize(n);
}

void index_trace(RunData& r) {
  drop_orphan_spans(r);
  const auto& t = r.trace;
  uint32_t n_steps = 0;
  for (const auto& m : t.steps) n_steps = std::max(n_steps, m.step + 1);
  r.step_ops.assign(n_steps, {0, 0});
  r.step_spans.assign(n_steps, {0, 0});
  auto build = [&](auto& records, std::vector<std::pair<size_t, size_t>>& index, const char* what) {
    for (size_t i = 0; i < records.size(); ++i) {
      const uint32_t s = records[i].step;  // below n_steps (read_run_trace)
      if (i > 0 && records[i - 1].step > s) fail("'{}/trace.bin': {} records out of step order", r.dir, what);
      if (index[s].second == 0) index[s].first = i;
      index[s].second = i + 1;
    }
    for (auto& [a, b] : index)
      if (b == 0) a = 0;
  };
  build(t.ops, r.step_ops, "op");
  build(t.spans, r.step_spans, "span");
}

}  // namespace

std::optional<int> layer_from_name(std::string_view name) {
  auto number = [](std::string_view s) -> std::optional<int> {
    int v = 0;
    if (s.empty()) return std::nullopt;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return v;
  };
  if (name.starts_with("blk.")) {
    const size_t dot = name.find('.', 4);
    return number(name.substr(4, dot == std::string_view::npos ? std::string_view::npos : dot - 4));
  }
  if (name.ends_with(" (view)")) name.remove_suffix(7);
  const size_t dash = name.rfind('-');
  if (dash != std::string_view::npos) {
    if (auto n = number(name.substr(dash + 1))) return n;
  }
  const size_t l = name.rfind("_l");
  if (l != std::string_view::npos && name.starts_with("cache_")) return number(name.substr(l + 2));
  return std::nullopt;
}

int RunData::n_threads() const {
  if (run.is_object()) {
    auto o = run.find("options");
    if (o != run.end() && o->contains("threads") && (*o)["threads"].is_number_integer())
      return (*o)["threads"].get<int>();
  }
  int n = 1;
  for (const auto& s : trace.spans) n = std::max(n, s.thread + 1);
  return n;
}

std::span<const trace::OpRecord> RunData::ops_of_step(uint32_t step) const {
  if (step >= step_ops.size()) return {};
  return std::span<const trace::OpRecord>(trace.ops).subspan(step_ops[step].first,
                                                             step_ops[step].second - step_ops[step].first);
}

std::span<const trace::SpanRecord> RunData::spans_of_step(uint32_t step) const {
  if (step >= step_spans.size()) return {};
  return std::span<const trace::SpanRecord>(trace.spans)
      .subspan(step_spans[step].first, step_spans[step].second - step_spans[step].first);
}

const nlohmann::json* RunData::graph_of_step(uint32_t step) const {
  if (step >= steps.size()) return nullptr;
  const int g = steps[step].graph;
  return g >= 0 && static_cast<size_t>(g) < graphs.size() ? &graphs[g] : nullptr;
}

const MapTensor* RunData::tensor_at(uint64_t file_offset) const {
  auto it = std::upper_bound(tensors.begin(), tensors.end(), file_offset,
                             [](uint64_t off, const MapTensor& t) { return off < t.offset_start; });
  if (it == tensors.begin()) return nullptr;
  --it;
  return file_offset < it->offset_end ? &*it : nullptr;
}

const MapTensor* RunData::tensor_named(const std::string& name) const {
  for (const MapTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const nlohmann::json& RunData::model_config() const {
  static const json null_json;
  if (!run.is_object()) return null_json;
  auto m = run.find("model");
  if (m == run.end() || !m->is_object()) return null_json;
  auto c = m->find("config");
  return c == m->end() ? null_json : *c;
}

RunData load_run(const std::string& dir_in, const LoadOptions& options) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (!fs::exists(dir)) {
    if (fs::exists(dir + ".partial"))
      fail("'{}' does not exist, but '{}.partial' does (a run that did not finish: pass that)", dir, dir);
    fail("'{}' does not exist", dir);
  }
  if (!fs::is_directory(dir)) fail("'{}' is not a directory (expected a run directory)", dir);
  const bool has_run = fs::exists(dir + "/run.json"), has_trace = fs::exists(dir + "/trace.bin");
  if (!has_run && !has_trace) fail("'{}' is not a run directory (no run.json, no trace.bin)", dir);

  RunData r;
  r.dir = dir;
  r.finished = has_run;
  if (has_run) {
    const std::string path = dir + "/run.json";
    r.run = parse_json(path);
    expect_format(r.run, path, "tensortrace.run");
  } else {
    r.warnings.push_back("no run.json: the run did not finish");
  }
  load_memory_map(r);
  load_steps(r);
  if (options.graphs) load_graphs(r);
  if (options.buffers) load_buffers(r);
  if (options.trace) {
    if (!has_trace) fail("'{}' has no trace.bin (was the run made with tracing off?)", dir);
    r.trace = trace::read_run_trace(dir, r.memory_map);
    if (!r.trace.complete)
      r.warnings.push_back(fmt::format("trace.bin is truncated at byte {} ({}): {} complete step(s) read",
                                       r.trace.stopped_at, r.trace.stop_reason,
                                       std::count_if(r.trace.steps.begin(), r.trace.steps.end(),
                                                     [](const trace::StepMarker& m) { return m.ended; })));
    index_trace(r);
    if (r.trace.steps.size() != r.steps.size())
      r.warnings.push_back(
          fmt::format("trace.bin has {} step(s), steps.jsonl {}", r.trace.steps.size(), r.steps.size()));
    for (const RunStep& s : r.steps) {
      const size_t n = r.ops_of_step(s.step).size();
      if (s.step < r.trace.steps.size() && r.trace.steps[s.step].ended && n != s.n_ops)
        fail("'{}': step {} has {} op records in trace.bin but steps.jsonl says n_ops {}", dir, s.step, n, s.n_ops);
    }
  }
  return r;
}

}  // namespace tt
