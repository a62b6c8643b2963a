#include "trace/run_data.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/work_split.h"
#include "gguf/ggml_type.h"
#include "gguf/memory_map.h"

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

// A value as the message shows it (a long one cut).
std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// The JSON value v as a T, or an Error naming `where` (file) and `field`. Numbers must be integers in T's range
// (nlohmann's get<T> would truncate 2^40 to a uint32_t and wrap -1 to 2^64 - 1).
template <typename T>
T as(const json& v, const std::string& where, const std::string& field) {
  auto wrong = [&](const char* expected) -> T {
    fail("'{}': field '{}' is {}, expected {}", where, field, shown(v), expected);
  };
  if constexpr (std::is_same_v<T, bool>) {
    return v.is_boolean() ? v.get<bool>() : wrong("true or false");
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v.is_string() ? v.get<std::string>() : wrong("a string");
  } else if constexpr (std::is_integral_v<T>) {
    constexpr auto lo = std::numeric_limits<T>::min();
    constexpr auto hi = std::numeric_limits<T>::max();
    if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(hi))
      return static_cast<T>(v.get<uint64_t>());
    if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() >= static_cast<int64_t>(lo) &&
        (v.get<int64_t>() < 0 || static_cast<uint64_t>(v.get<int64_t>()) <= static_cast<uint64_t>(hi)))
      return static_cast<T>(v.get<int64_t>());
    fail("'{}': field '{}' is {}, expected an integer in [{}, {}]", where, field, shown(v), lo, hi);
  } else {
    static_assert(sizeof(T) == 0, "no conversion");
  }
}

// Field `key` of object o: required, or std::nullopt when absent (optional fields).
const json& at(const json& o, const char* key, const std::string& where, const std::string& prefix = "") {
  if (!o.is_object()) fail("'{}': {} is {}, expected an object", where, prefix.empty() ? "the file" : prefix, shown(o));
  auto it = o.find(key);
  if (it == o.end()) fail("'{}': no field '{}{}'", where, prefix.empty() ? "" : prefix + ".", key);
  return *it;
}
template <typename T>
T field(const json& o, const char* key, const std::string& where, const std::string& prefix = "") {
  return as<T>(at(o, key, where, prefix), where, prefix.empty() ? key : prefix + "." + key);
}
const json& array_field(const json& o, const char* key, const std::string& where, const std::string& prefix = "") {
  const json& a = at(o, key, where, prefix);
  if (!a.is_array())
    fail("'{}': field '{}' is {}, expected an array", where, prefix.empty() ? key : prefix + "." + key, shown(a));
  return a;
}
template <typename T>
std::vector<T> vector_field(const json& o, const char* key, const std::string& where, const std::string& prefix = "") {
  const json& a = array_field(o, key, where, prefix);
  std::vector<T> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) out.push_back(as<T>(a[i], where, fmt::format("{}[{}]", key, i)));
  return out;
}

void expect_format(const json& j, const std::string& path, const char* format) {
  if (!j.is_object()) fail("'{}': expected a JSON object", path);
  auto it = j.find("format");
  if (it != j.end() && (!it->is_string() || *it != format))
    fail("'{}': format is {}, expected \"{}\"", path, shown(*it), format);
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

// The buffer with id `id` as docs/run-directory.md fixes the ids: the one place their meaning is known.
RunBuffer buffer_of_id(int32_t id, Pool pool) {
  RunBuffer b;
  b.id = id;
  b.pool = pool;
  if (id == 0) {
    b.kind = BufferKind::INPUTS, b.name = "inputs";
  } else if (id == 1) {
    b.kind = BufferKind::ACTIVATION_ARENA, b.name = "activation arena";
  } else if (id == 2) {
    b.kind = BufferKind::SCRATCH, b.name = "scratch";
  } else {
    b.kind = (id - 3) % 2 == 0 ? BufferKind::K_CACHE : BufferKind::V_CACHE;
    b.layer = (id - 3) / 2;
    b.name = fmt::format("{} cache L{}", b.kind == BufferKind::K_CACHE ? "K" : "V", b.layer);
  }
  return b;
}

void load_run_json(RunData& r) {
  const std::string path = r.dir + "/run.json";
  r.run = parse_json(path);
  expect_format(r.run, path, "tensortrace.run");
  RunInfo& i = r.info;
  if (r.run.contains("model")) {
    i.has_model = true;
    const json& m = r.run["model"];
    if (m.contains("file")) i.model_file = field<std::string>(m, "file", path, "model");
    if (m.contains("size_bytes")) i.model_size_bytes = field<uint64_t>(m, "size_bytes", path, "model");
  }
  if (r.run.contains("options")) {
    const json& o = r.run["options"];
    i.has_options = true;
    if (o.contains("threads")) {
      i.threads = field<int>(o, "threads", path, "options");
      if (*i.threads < 1 || *i.threads > kMaxThreads)
        fail("'{}': options.threads is {}, outside the engine's 1 to {}", path, *i.threads, kMaxThreads);
    }
    if (o.contains("sampling")) {
      const json& s = o["sampling"];
      i.sampling = RunInfo::Sampling{};
      if (s.contains("temperature")) {
        const json& t = s["temperature"];
        if (!t.is_number()) fail("'{}': field 'options.sampling.temperature' is {}, expected a number", path, shown(t));
        i.sampling->temperature = t.get<double>();
      }
      if (s.contains("seed")) i.sampling->seed = field<uint64_t>(s, "seed", path, "options.sampling");
    }
    if (o.contains("prompt")) i.prompt = field<std::string>(o, "prompt", path, "options");
  }
  if (r.run.contains("generated_text")) i.generated_text = field<std::string>(r.run, "generated_text", path);
  if (r.run.contains("timings") && r.run["timings"].contains("load_ns"))
    i.load_ns = field<uint64_t>(r.run["timings"], "load_ns", path, "timings");
  if (r.run.contains("date")) i.date = field<std::string>(r.run, "date", path);
  if (r.run.contains("weight_cache") && !r.run["weight_cache"].is_null()) {
    const json& w = r.run["weight_cache"];
    const std::string at_w = "weight_cache";
    RunInfo::WeightCache c;
    c.policy = field<std::string>(w, "policy", path, at_w);
    c.budget_bytes = field<uint64_t>(w, "budget_bytes", path, at_w);
    c.n_phases = field<uint32_t>(w, "n_phases", path, at_w);
    if (c.n_phases < 2 || c.n_phases > (1u << 16) + 2)
      fail("'{}': weight_cache.n_phases is {}, outside 2 to {} (the embedding, one a layer, the rest)", path,
           c.n_phases, (1u << 16) + 2);
    if (w.contains("page_bytes")) c.page_bytes = field<uint64_t>(w, "page_bytes", path, at_w);
    if (c.page_bytes == 0 || c.page_bytes > (uint64_t{1} << 30))
      fail("'{}': weight_cache.page_bytes is {}, outside 1 to 2^30", path, c.page_bytes);
    if (w.contains("budget")) c.budget = field<std::string>(w, "budget", path, at_w);
    if (w.contains("prefetch")) c.prefetch = field<std::string>(w, "prefetch", path, at_w);
    if (w.contains("direct_io")) c.direct_io = field<bool>(w, "direct_io", path, at_w);
    auto rate = [&](const json& o, const char* key, const std::string& prefix) {
      const json& v = at(o, key, path, prefix);
      if (!v.is_number() || v.get<double>() < 0)
        fail("'{}': field '{}.{}' is {}, expected a rate in bytes/s", path, prefix, key, shown(v));
      return v.get<double>();
    };
    if (w.contains("read_bytes_per_s")) c.read_bytes_per_s = rate(w, "read_bytes_per_s", at_w);
    if (w.contains("storage")) {
      const json& io = w["storage"];
      const std::string at_io = at_w + ".storage";
      c.storage = RunInfo::WeightCache::Storage{rate(io, "sequential_bytes_per_s", at_io),
                                                rate(io, "random_4k_bytes_per_s", at_io),
                                                field<std::string>(io, "method", path, at_io)};
    }
    i.weight_cache = std::move(c);
  }
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
    s.step = field<uint32_t>(j, "step", where);
    s.phase = phase_from_name(field<std::string>(j, "phase", where), where);
    s.pos_begin = field<int32_t>(j, "pos_begin", where);
    s.pos_end = field<int32_t>(j, "pos_end", where);
    s.input_tokens = vector_field<int32_t>(j, "input_tokens", where);
    if (!at(j, "token", where).is_null()) s.token = field<int32_t>(j, "token", where);
    if (j.contains("token_text") && j["token_text"].is_string()) s.token_text = j["token_text"].get<std::string>();
    s.start_ns = field<uint64_t>(j, "start_ns", where);
    s.end_ns = field<uint64_t>(j, "end_ns", where);
    s.n_ops = field<uint32_t>(j, "n_ops", where);
    s.graph = field<int>(j, "graph", where);
    if (s.step != r.steps.size()) fail("'{}': step {} where step {} was expected", where, s.step, r.steps.size());
    s.json = std::move(j);
    r.steps.push_back(std::move(s));
  }
}

// A memory-map tensor describes itself consistently: a known type, one to four dimensions, and the bytes its shape
// and type need (GGUF's rule) equal to its size and its span in the file. Readers size tables from shapes (experts
// per layer, rows), so a shape is only believed when the bytes it claims agree.
void check_tensor_shape(const MapTensor& m, const std::string& path) {
  const std::optional<GgmlType> type = type_from_name(m.type);
  if (!type) fail("'{}': tensor '{}' has unknown type '{}'", path, m.name, m.type);
  if (m.shape.empty() || m.shape.size() > 4)
    fail("'{}': tensor '{}' has {} dimensions (must be 1 to 4)", path, m.name, m.shape.size());
  const GgmlTypeTraits& traits = type_traits(*type);
  uint64_t elements = 1;
  for (int64_t ne : m.shape) {
    if (ne < 0 || (ne != 0 && elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne))
      fail("'{}': tensor '{}' has shape {}: a negative dimension or more than 2^63 elements", path, m.name,
           fmt::join(m.shape, "x"));
    elements *= static_cast<uint64_t>(ne);
  }
  if (m.shape[0] % traits.block_size != 0)
    fail("'{}': tensor '{}': row length {} is not a whole number of {} blocks of {} elements", path, m.name, m.shape[0],
         traits.name, traits.block_size);
  const uint64_t blocks = elements / traits.block_size;
  if (blocks > std::numeric_limits<uint64_t>::max() / traits.bytes_per_block ||
      blocks * traits.bytes_per_block != m.size_bytes || m.offset_end - m.offset_start != m.size_bytes)
    fail("'{}': tensor '{}' ({} {}) says it is {} bytes at {} to {}, but its shape needs {} bytes", path, m.name,
         m.type, fmt::join(m.shape, "x"), m.size_bytes, m.offset_start, m.offset_end,
         blocks > std::numeric_limits<uint64_t>::max() / traits.bytes_per_block
             ? std::string("more than 2^64")
             : std::to_string(blocks * traits.bytes_per_block));
}

void load_memory_map(RunData& r) {
  const std::string path = r.dir + "/memory-map.json";
  if (!fs::exists(path)) {
    r.warnings.push_back("no memory-map.json");
    return;
  }
  r.memory_map = parse_json(path);
  expect_format(r.memory_map, path, "tensortrace.memory-map");
  if (r.memory_map.contains("file_size")) r.file_size = field<uint64_t>(r.memory_map, "file_size", path);
  if (r.memory_map.contains("model_name")) r.model_name = field<std::string>(r.memory_map, "model_name", path);
  if (r.memory_map.contains("file")) r.model_path = field<std::string>(r.memory_map, "file", path);
  const json& tensors = array_field(r.memory_map, "tensors", path);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const json& t = tensors[i];
    const std::string at_i = fmt::format("tensors[{}]", i);
    MapTensor m;
    m.name = field<std::string>(t, "name", path, at_i);
    m.type = field<std::string>(t, "type", path, at_i);
    m.shape = vector_field<int64_t>(t, "shape", path, at_i);
    m.offset_start = field<uint64_t>(t, "offset_start", path, at_i);
    m.offset_end = field<uint64_t>(t, "offset_end", path, at_i);
    m.size_bytes = field<uint64_t>(t, "size_bytes", path, at_i);
    if (!at(t, "layer", path, at_i).is_null()) m.layer = field<int>(t, "layer", path, at_i);
    m.category = field<std::string>(t, "category", path, at_i);
    m.component = field<std::string>(t, "component", path, at_i);
    m.index = i;
    check_tensor_shape(m, path);
    if (m.offset_end < m.offset_start || (r.file_size && m.offset_end > *r.file_size))
      fail("'{}': tensor '{}' spans bytes {} to {}, outside the {}-byte model file", path, m.name, m.offset_start,
           m.offset_end, r.file_size.value_or(0));
    r.tensors.push_back(std::move(m));
  }
  std::sort(r.tensors.begin(), r.tensors.end(),
            [](const MapTensor& a, const MapTensor& b) { return a.offset_start < b.offset_start; });
  if (r.memory_map.contains("sections")) {
    const json& s = r.memory_map["sections"];
    if (!s.is_object()) fail("'{}': field 'sections' is {}, expected an object", path, shown(s));
    for (const auto& [name, range] : s.items()) {
      const std::string f = "sections." + name;
      if (!range.is_array() || range.size() != 2)
        fail("'{}': field '{}' is {}, expected [begin, end]", path, f, shown(range));
      MapSection sec{name, as<uint64_t>(range[0], path, f + "[0]"), as<uint64_t>(range[1], path, f + "[1]")};
      if (sec.end < sec.begin)
        fail("'{}': section '{}' ends at {} before it begins at {}", path, name, sec.end, sec.begin);
      r.sections.push_back(std::move(sec));
    }
  }
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
    array_field(g, "nodes", path);
    array_field(g, "edges", path);
    r.graphs.push_back(std::move(g));
  }
  const std::string index = gdir + "/index.json";
  if (!fs::exists(index)) {
    r.warnings.push_back("no graphs/index.json (steps.jsonl maps steps to graphs)");
    return;
  }
  const json j = parse_json(index);
  const json& steps = array_field(j, "steps", index);
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string at_i = fmt::format("steps[{}]", i);
    const uint32_t step = field<uint32_t>(steps[i], "step", index, at_i);
    const int graph = field<int>(steps[i], "graph", index, at_i);
    if (step < r.steps.size() && r.steps[step].graph != graph)
      fail("'{}': step {} maps to graph {} but steps.jsonl says {}", index, step, graph, r.steps[step].graph);
  }
  for (const RunStep& s : r.steps)
    if (s.graph < 0 || static_cast<size_t>(s.graph) >= r.graphs.size())
      fail("step {} refers to graph {}, but graphs/ has {} graph(s)", s.step, s.graph, r.graphs.size());
}

// The buffer with this id in r.buffers (sorted by id), added when new.
RunBuffer& buffer(RunData& r, int32_t id, Pool pool) {
  auto it =
      std::lower_bound(r.buffers.begin(), r.buffers.end(), id, [](const RunBuffer& b, int32_t v) { return b.id < v; });
  if (it == r.buffers.end() || it->id != id) it = r.buffers.insert(it, buffer_of_id(id, pool));
  return *it;
}

void load_buffers(RunData& r) {
  const std::string path = r.dir + "/buffers.json";
  if (!fs::exists(path)) {
    r.warnings.push_back("no buffers.json");
    return;
  }
  const json j = parse_json(path);
  expect_format(j, path, "tensortrace.buffers");
  const json& events = array_field(j, "events", path);
  constexpr std::string_view kGrow = " (grow)";
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    const std::string row = fmt::format("events[{}]", i);
    if (!e.is_array() || e.size() != 9) fail("'{}': a buffer event has 9 columns, got {} ({})", path, shown(e), row);
    auto col = [&](size_t c) { return fmt::format("{}[{}]", row, c); };
    BufferEvent b;
    b.t_ns = as<uint64_t>(e[0], path, col(0));
    b.step = as<uint32_t>(e[1], path, col(1));
    const std::string kind = as<std::string>(e[2], path, col(2));
    if (kind != "a" && kind != "f") fail("'{}': {}: unknown event kind '{}'", path, row, kind);
    b.alloc = kind == "a";
    b.pool = pool_from_name(as<std::string>(e[3], path, col(3)), path);
    b.buffer_id = as<int32_t>(e[4], path, col(4));
    b.offset = as<uint64_t>(e[5], path, col(5));
    b.bytes = as<uint64_t>(e[6], path, col(6));
    b.tensor = as<std::string>(e[7], path, col(7));
    b.reuse = as<bool>(e[8], path, col(8));
    if (b.tensor.size() > kGrow.size() && b.tensor.ends_with(kGrow)) {
      b.growth = true;
      b.grown = b.tensor.substr(0, b.tensor.size() - kGrow.size());
    }
    if (b.buffer_id < 0 || b.pool == Pool::MODEL_FILE)
      fail("'{}': {}: buffer {} of pool {} is not a runtime buffer", path, row, b.buffer_id, pool_name(b.pool));
    if (b.bytes > UINT64_MAX - b.offset)
      fail("'{}': {}: {} bytes at offset {} pass 2^64", path, row, b.bytes, b.offset);
    RunBuffer& buf = buffer(r, b.buffer_id, b.pool);
    buf.size = std::max(buf.size, b.offset + b.bytes);
    r.buffer_events.push_back(std::move(b));
  }
  const json& steps = array_field(j, "steps", path);
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string at_i = fmt::format("steps[{}]", i);
    const json& x = steps[i];
    r.buffer_steps.push_back(
        {field<uint32_t>(x, "step", path, at_i), field<uint64_t>(x, "activation_peak_bytes", path, at_i),
         field<std::string>(x, "activation_peak_node", path, at_i), field<uint64_t>(x, "arena_bytes", path, at_i),
         field<uint64_t>(x, "scratch_bytes", path, at_i), field<uint64_t>(x, "static_bytes", path, at_i),
         field<uint64_t>(x, "total_peak_bytes", path, at_i)});
  }
  r.peak_bytes = field<uint64_t>(j, "peak_bytes", path);
  r.has_buffers = true;
}

// The trace checked against the run before any consumer sizes anything from it: every op, span and IO record
// belongs to one of the trace's steps; every MODEL_FILE byte lies inside the model file (r.file_size; a trace naming
// model bytes without one is an error); every byte of a runtime buffer buffers.json lists lies inside it.
void check_trace(RunData& r) {
  const trace::TraceContents& t = r.trace;
  const std::string path = r.dir + "/trace.bin";
  const size_t n_steps = t.steps.size();
  auto check_step = [&](const char* what, uint32_t step) {
    if (step >= n_steps) fail("'{}': {} of step {} outside the trace ({} steps)", path, what, step, n_steps);
  };
  // [offset, offset + length) of the model file, named by `what` in step `step`.
  auto check_file_bytes = [&](const std::string& what, uint32_t step, uint64_t offset, uint64_t length) {
    if (!r.file_size)
      fail("'{}': {} of step {} reads model-file bytes, but no memory-map.json gives the file's size", path, what,
           step);
    const uint64_t file = *r.file_size;
    if (offset > file || length > file - offset)
      fail("'{}': {} of step {} reads {} MODEL_FILE bytes at offset {}, past the end of the {}-byte model file", path,
           what, step, length, offset, file);
  };
  // Buffers buffers.json lists are bounded by it; the others (the inputs: the tracer records no events for them) are
  // sized by the trace's ranges, which then only must not pass 2^64.
  std::vector<int32_t> listed;
  for (const RunBuffer& b : r.buffers) listed.push_back(b.id);
  auto check_buffer_bytes = [&](const std::string& what, uint32_t step, Pool pool, int32_t id, uint64_t offset,
                                uint64_t length) {
    if (length == 0) return;
    if (id < 0)
      fail("'{}': {} of step {} touches {} bytes of pool {} without a buffer", path, what, step, length,
           pool_name(pool));
    if (length > UINT64_MAX - offset)
      fail("'{}': {} of step {} touches {} bytes of buffer {} at offset {}, past 2^64", path, what, step, length, id,
           offset);
    RunBuffer& b = buffer(r, id, pool);
    if (!std::binary_search(listed.begin(), listed.end(), id)) {
      b.size = std::max(b.size, offset + length);
    } else if (offset > b.size || length > b.size - offset) {
      fail("'{}': {} of step {} touches {} bytes of buffer {} ({}) at offset {}, past its {} bytes in buffers.json",
           path, what, step, length, id, b.name, offset, b.size);
    }
  };
  auto check_range = [&](const std::string& what, uint32_t step, const trace::RangeRecord& x) {
    if (x.pool == Pool::MODEL_FILE)
      check_file_bytes(what, step, x.offset, x.length);
    else
      check_buffer_bytes(what, step, x.pool, x.buffer_id, x.offset, x.length);
  };
  // Threads: below the run's thread count (run.json), and below the engine's limit when run.json is absent.
  const int threads = r.info.threads.value_or(kMaxThreads);
  auto check_thread = [&](const char* what, uint32_t step, int thread) {
    if (thread >= threads)
      fail("'{}': {} of step {} ran on thread {}, but the run had {} threads{}", path, what, step, thread, threads,
           r.info.threads ? "" : " at most");
  };
  for (const trace::OpRecord& o : t.ops) {
    check_step("op", o.step);
    check_thread("op", o.step, o.thread);
    if (o.n_threads > threads)
      fail("'{}': op '{}' of step {} ran on {} threads, but the run had {}", path, o.name, o.step, o.n_threads,
           threads);
    auto tensor = [&](const trace::TensorRecord& x) {
      if (x.pool == Pool::MODEL_FILE) check_file_bytes(fmt::format("tensor '{}'", x.name), o.step, x.offset, x.bytes);
      for (const trace::RangeRecord& rr : x.ranges) check_range(fmt::format("op '{}'", o.name), o.step, rr);
    };
    tensor(o.out);
    for (const trace::TensorRecord& in : o.inputs) tensor(in);
    check_range(fmt::format("op '{}'", o.name), o.step, o.write);
  }
  for (const trace::SpanRecord& s : t.spans) {
    check_step("span", s.step);
    check_thread("span", s.step, s.thread);
  }
  // Routing: each layer's expert count is its router's output count ([n_embd, n_expert]).
  std::map<uint16_t, int64_t> experts_of_layer;
  for (const trace::RoutingRecord& x : t.routing) {
    check_step("routing record", x.step);
    auto [it, first] = experts_of_layer.try_emplace(x.layer, 0);
    if (first) {
      if (r.memory_map.is_null())
        fail("'{}': routing record of step {} layer {}, but no memory-map.json gives the model's routers", path, x.step,
             x.layer);
      const MapTensor* router = r.tensor_named(fmt::format("blk.{}.ffn_gate_inp.weight", x.layer));
      if (!router || router->shape.size() < 2)
        fail("'{}': routing record of step {} layer {}, which has no router (blk.{}.ffn_gate_inp.weight) in the model",
             path, x.step, x.layer, x.layer);
      it->second = router->shape[1];
      if (it->second > kMaxExperts)
        fail("'{}': the router of layer {} has {} experts, above the {} a layer may have", path, x.layer, it->second,
             kMaxExperts);
    }
    if (static_cast<int64_t>(x.experts.size()) > it->second)
      fail("'{}': routing record of step {} layer {} chooses {} of {} experts", path, x.step, x.layer, x.experts.size(),
           it->second);
    for (uint32_t e : x.experts)
      if (e >= it->second)
        fail("'{}': routing record of step {} layer {} names expert {}, past the layer's {} experts", path, x.step,
             x.layer, e, it->second);
    for (uint32_t e : x.predicted)
      if (e >= it->second)
        fail("'{}': routing record of step {} layer {} predicts expert {}, past the layer's {} experts", path, x.step,
             x.layer, e, it->second);
  }
  for (const trace::WeightLoadRecord& w : t.weight_loads) {
    check_step("weight load", w.step);
    check_file_bytes(fmt::format("weight load of '{}'", w.tensor), w.step, w.offset, w.bytes);
    // The unit lies within the tensor it names (when the memory map is there to say where that is).
    if (const MapTensor* m = r.memory_map.is_null() ? nullptr : r.tensor_named(w.tensor);
        !r.memory_map.is_null() && (!m || w.offset < m->offset_start || w.offset + w.bytes > m->offset_end))
      fail("'{}': weight load of step {} names '{}'{} at bytes [{}, {}), which the model's memory map does not hold",
           path, w.step, w.tensor, w.expert >= 0 ? fmt::format(" expert {}", w.expert) : "", w.offset,
           w.offset + w.bytes);
  }
  for (const trace::IoRecord& io : t.io) {
    check_step("IO record", io.step);
    for (const trace::IoRange& x : io.ranges) check_file_bytes("IO record", io.step, x.offset, x.length);
  }
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
  const size_t n_steps = t.steps.size();  // markers are steps 0, 1, ... (parse_trace)
  r.step_ops.assign(n_steps, {0, 0});
  r.step_spans.assign(n_steps, {0, 0});
  r.step_routing.assign(n_steps, {0, 0});
  auto build = [&](auto& records, std::vector<std::pair<size_t, size_t>>& index, const char* what) {
    for (size_t i = 0; i < records.size(); ++i) {
      const uint32_t s = records[i].step;  // below n_steps (check_trace)
      if (i > 0 && records[i - 1].step > s) fail("'{}/trace.bin': {} records out of step order", r.dir, what);
      if (index[s].second == 0) index[s].first = i;
      index[s].second = i + 1;
    }
    for (auto& [a, b] : index)
      if (b == 0) a = 0;
  };
  build(t.ops, r.step_ops, "op");
  build(t.spans, r.step_spans, "span");
  build(t.routing, r.step_routing, "routing");
  // A step's routing rows by layer, then position, each once (routing_of_layer looks a layer's rows up).
  for (size_t i = 1; i < t.routing.size(); ++i) {
    const trace::RoutingRecord &a = t.routing[i - 1], &b = t.routing[i];
    if (a.step == b.step && std::pair(a.layer, a.token_pos) >= std::pair(b.layer, b.token_pos))
      fail("'{}/trace.bin': routing record of step {} layer {} position {} after layer {} position {}", r.dir, b.step,
           b.layer, b.token_pos, a.layer, a.token_pos);
  }
}

}  // namespace

nlohmann::json BufferStep::to_json() const {
  return {{"step", step},
          {"activation_peak_bytes", activation_peak_bytes},
          {"activation_peak_node", activation_peak_node},
          {"arena_bytes", arena_bytes},
          {"scratch_bytes", scratch_bytes},
          {"static_bytes", static_bytes},
          {"total_peak_bytes", total_peak_bytes}};
}

nlohmann::json BufferEvent::to_json() const {
  return nlohmann::json::array(
      {t_ns, step, alloc ? "a" : "f", pool_name(pool), buffer_id, offset, bytes, tensor, reuse});
}

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
  if (info.threads) return *info.threads;
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

std::span<const trace::RoutingRecord> RunData::routing_of_step(uint32_t step) const {
  if (step >= step_routing.size()) return {};
  return std::span<const trace::RoutingRecord>(trace.routing)
      .subspan(step_routing[step].first, step_routing[step].second - step_routing[step].first);
}

std::span<const trace::RoutingRecord> RunData::routing_of_layer(uint32_t step, int layer) const {
  const auto rows = routing_of_step(step);
  auto first = std::partition_point(rows.begin(), rows.end(), [&](const auto& x) { return x.layer < layer; });
  auto last = std::partition_point(first, rows.end(), [&](const auto& x) { return x.layer == layer; });
  return {first, last};
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
  if (has_run)
    load_run_json(r);
  else
    r.warnings.push_back("no run.json: the run did not finish");
  load_memory_map(r);
  load_steps(r);
  if (options.graphs) load_graphs(r);
  if (options.buffers || options.trace) load_buffers(r);
  if (options.trace) {
    if (!has_trace) fail("'{}' has no trace.bin (was the run made with tracing off?)", dir);
    r.trace = trace::read_trace(dir + "/trace.bin");
    check_trace(r);
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
