// Chrome trace-event JSON (the "JSON Object Format": {"traceEvents": [...]}) for ui.perfetto.dev and
// chrome://tracing. Layout in docs/export.md.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "core/shape.h"
#include "export/export.h"
#include "trace/run_dir.h"

namespace tt::exporter {

namespace {

constexpr int kPid = 1;
constexpr int kStepsTid = 0;
int worker_tid(int worker) { return worker + 1; }

// A float as JSON (null when not finite).
std::string json_float(float v) { return nlohmann::json(v).dump(); }

// MUL_MAT_ID's `routing` arg: the layer's routing rows of the step (each routed token's position, experts in
// llama.cpp's order, their weights, the router margin).
std::string routing_arg(std::span<const trace::RoutingRecord> rows) {
  std::string pos, experts, weights, margins;
  for (const trace::RoutingRecord& x : rows) {
    const char* sep = pos.empty() ? "" : ",";
    pos += fmt::format("{}{}", sep, x.token_pos);
    margins += fmt::format("{}{}", sep, json_float(x.margin));
    std::string e, w;
    for (size_t k = 0; k < x.experts.size(); ++k) {
      e += fmt::format("{}{}", k ? "," : "", x.experts[k]);
      w += fmt::format("{}{}", k ? "," : "", json_float(x.weights[k]));
    }
    experts += fmt::format("{}[{}]", sep, e);
    weights += fmt::format("{}[{}]", sep, w);
  }
  return fmt::format(R"(,"routing":{{"token_pos":[{}],"experts":[{}],"weights":[{}],"margin":[{}]}})", pos, experts,
                     weights, margins);
}

// The args object of an op's slices (the same on every worker's slice); `routing`: the rows of its layer in its step
// (MUL_MAT_ID only).
std::string op_args(const trace::OpRecord& o, std::span<const trace::RoutingRecord> routing) {
  uint64_t by_pool[5] = {0, 0, 0, 0, 0};
  std::string file_ranges, kv;
  int32_t kv_begin = -1, kv_end = -1;
  std::string inputs;
  for (const trace::TensorRecord& in : o.inputs) {
    inputs += fmt::format("{}{}", inputs.empty() ? "" : ",", json_string(in.name));
    for (const trace::RangeRecord& r : in.ranges) {
      by_pool[static_cast<int>(r.pool)] += r.length;
      if (r.pool == Pool::MODEL_FILE)
        file_ranges += fmt::format("{}[{},{}]", file_ranges.empty() ? "" : ",", r.offset, r.length);
      if (r.pool == Pool::KV_CACHE && r.pos_begin >= 0) {
        kv_begin = kv_begin < 0 ? r.pos_begin : std::min(kv_begin, r.pos_begin);
        kv_end = std::max(kv_end, r.pos_end);
      }
    }
  }
  std::string bytes;
  for (Pool p : {Pool::MODEL_FILE, Pool::KV_CACHE, Pool::ACTIVATION, Pool::INPUT})
    bytes += fmt::format("{}\"{}\":{}", bytes.empty() ? "" : ",", pool_name(p), by_pool[static_cast<int>(p)]);
  std::string s = fmt::format(
      "{{\"step\":{},\"phase\":\"{}\",\"layer\":{},\"node\":{},\"op\":\"{}\",\"n_threads\":{},\"bytes_read\":{{{}}}",
      o.step, phase_name(o.phase), o.layer >= 0 ? std::to_string(o.layer) : "null", o.node, op_name(o.op), o.n_threads,
      bytes);
  if (!file_ranges.empty()) s += ",\"file_ranges\":[" + file_ranges + "]";
  if (kv_begin >= 0) s += fmt::format(",\"kv_positions\":[{},{}]", kv_begin, kv_end);
  s += ",\"inputs\":[" + inputs + "]";
  s += fmt::format(",\"output\":{{\"name\":{},\"shape\":{},\"type\":\"{}\",\"pool\":\"{}\",\"bytes\":{}}}",
                   json_string(o.out.name), shape_text(o.out.ne, ","), type_name(o.out.type), pool_name(o.out.pool),
                   o.out.bytes);
  if (!routing.empty()) s += routing_arg(routing);
  if (o.has_stats)
    s += fmt::format(",\"stats\":{{\"min\":{},\"max\":{},\"mean\":{},\"nan\":{},\"inf\":{},\"hash\":\"{:016x}\"}}",
                     json_float(o.stats.min), json_float(o.stats.max), nlohmann::json(o.stats.mean).dump(),
                     o.stats.nan_count, o.stats.inf_count, o.stats.hash);
  return s + "}";
}

}  // namespace

std::string json_string(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string micros(uint64_t ns) { return fmt::format("{}.{:03}", ns / 1000, ns % 1000); }

std::string perfetto_json(const RunData& run, const Progress& progress) {
  std::string out;
  out.reserve(256 + run.trace.spans.size() * 400 + run.trace.ops.size() * 100);
  out += "{\"traceEvents\":[\n";
  bool first = true;
  auto event = [&](const std::string& e) {
    if (!first) out += ",\n";
    first = false;
    out += e;
  };

  // Process and track names; tracks sorted: steps, then workers.
  std::string process = "tensortrace";
  if (!run.info.model_file.empty()) process += " " + run.info.model_file;
  event(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"ts":0,"args":{{"name":{}}}}})", kPid,
                    json_string(process)));
  event(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"ts":0,"args":{{"name":"steps"}}}})", kPid,
                    kStepsTid));
  event(fmt::format(R"({{"ph":"M","name":"thread_sort_index","pid":{},"tid":{},"ts":0,"args":{{"sort_index":0}}}})",
                    kPid, kStepsTid));
  const int n_threads = run.n_threads();
  for (int w = 0; w < n_threads; ++w) {
    event(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"ts":0,"args":{{"name":"worker {}"}}}})",
                      kPid, worker_tid(w), w));
    event(fmt::format(R"({{"ph":"M","name":"thread_sort_index","pid":{},"tid":{},"ts":0,"args":{{"sort_index":{}}}}})",
                      kPid, worker_tid(w), w + 1));
  }

  // Steps: enclosing slices on the steps track (a step without its end record ends at its last op).
  const size_t n_steps = run.trace.steps.size();
  for (size_t i = 0; i < n_steps; ++i) {
    const trace::StepMarker& m = run.trace.steps[i];
    uint64_t end = m.end_ns;
    if (!m.ended)
      for (const trace::OpRecord& o : run.ops_of_step(m.step)) end = std::max(end, o.end_ns);
    end = std::max(end, m.start_ns);
    std::string token = "null", text = "null";
    if (m.step < run.steps.size() && run.steps[m.step].token) {
      token = std::to_string(*run.steps[m.step].token);
      text = json_string(run.steps[m.step].token_text);
    }
    event(fmt::format(
        R"({{"ph":"X","name":"step {} {}","cat":"step","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"step":{},"phase":"{}","pos_begin":{},"pos_end":{},"n_ops":{},"token":{},"token_text":{},"complete":{}}}}})",
        m.step, phase_name(m.phase), kPid, kStepsTid, micros(m.start_ns), micros(end - m.start_ns), m.step,
        phase_name(m.phase), m.pos_begin, m.pos_end, run.ops_of_step(m.step).size(), token, text,
        m.ended ? "true" : "false"));
  }

  // Ops: one slice per worker span; views (no spans) as zero-length slices on worker 0.
  for (size_t i = 0; i < n_steps; ++i) {
    const uint32_t step = run.trace.steps[i].step;
    auto ops = run.ops_of_step(step);
    std::vector<std::string> args(ops.size());
    auto op_at = [&](uint32_t node) -> const trace::OpRecord* {
      if (node < ops.size() && ops[node].node == node) return &ops[node];
      for (const trace::OpRecord& o : ops)
        if (o.node == node) return &o;
      return nullptr;
    };
    for (size_t k = 0; k < ops.size(); ++k) {
      args[k] = op_args(ops[k], ops[k].op == OpKind::MUL_MAT_ID ? run.routing_of_layer(step, ops[k].layer)
                                                                : std::span<const trace::RoutingRecord>());
      if (ops[k].n_threads == 0)
        event(fmt::format(R"({{"ph":"X","name":{},"cat":"view","pid":{},"tid":{},"ts":{},"dur":0,"args":{}}})",
                          json_string(fmt::format("{} {}", op_name(ops[k].op), ops[k].name)), kPid, worker_tid(0),
                          micros(ops[k].start_ns), args[k]));
    }
    for (const trace::SpanRecord& s : run.spans_of_step(step)) {
      const trace::OpRecord* o = op_at(s.node);
      if (!o) fail("trace.bin: span of step {} node {} has no op record", step, s.node);
      const size_t k = o - ops.data();
      event(fmt::format(R"({{"ph":"X","name":{},"cat":"op","pid":{},"tid":{},"ts":{},"dur":{},"args":{}}})",
                        json_string(fmt::format("{} {}", op_name(o->op), o->name)), kPid, worker_tid(s.thread),
                        micros(s.start_ns), micros(s.end_ns >= s.start_ns ? s.end_ns - s.start_ns : 0), args[k]));
    }
    if (progress) progress(fmt::format("perfetto: step {}/{}", i + 1, n_steps));
  }

  // Buffer occupancy: per pool, live bytes of tensors; arena/scratch growth as a separate "reserved" counter.
  std::map<std::string, int64_t> live;
  for (const BufferEvent& e : run.buffer_events) {
    const std::string counter = fmt::format("{} {} bytes", pool_name(e.pool), e.growth ? "reserved" : "live");
    int64_t& v = live[counter];
    if (e.growth)
      v = static_cast<int64_t>(e.bytes);
    else
      v += e.alloc ? static_cast<int64_t>(e.bytes) : -static_cast<int64_t>(e.bytes);
    event(fmt::format(R"({{"ph":"C","name":"{}","pid":{},"tid":0,"ts":{},"args":{{"bytes":{}}}}})", counter, kPid,
                      micros(e.t_ns), v));
  }

  out += "\n],\n\"displayTimeUnit\":\"ns\",\n";
  out += fmt::format(
      "\"otherData\":{{\"generator\":\"tensortrace export\",\"run_dir\":{},\"trace_complete\":{},\"trace_note\":{},"
      "\"steps\":{},\"ops\":{},\"spans\":{}}}\n}}\n",
      json_string(run.dir), run.trace.complete ? "true" : "false",
      json_string(run.trace.complete
                      ? ""
                      : fmt::format("trace.bin truncated at byte {}: {}", run.trace.stopped_at, run.trace.stop_reason)),
      n_steps, run.trace.ops.size(), run.trace.spans.size());
  return out;
}

void export_perfetto(const RunData& run, const std::string& out_path, const Progress& progress) {
  write_file_atomic(out_path, perfetto_json(run, progress));
}

}  // namespace tt::exporter
