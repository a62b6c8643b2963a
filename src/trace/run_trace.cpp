#include "trace/run_trace.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tt::trace {

TraceContents read_run_trace(const std::string& dir, const nlohmann::json& memory_map) {
  const std::string path = dir + "/trace.bin";
  TraceContents t = read_trace(path);
  check_run_trace(t, memory_map, path);
  return t;
}

void check_run_trace(const TraceContents& t, const nlohmann::json& memory_map, const std::string& path) {
  const size_t n_steps = t.steps.size();
  auto check_step = [&](const char* what, uint32_t step) {
    if (step >= n_steps) fail("'{}': {} of step {} outside the trace ({} steps)", path, what, step, n_steps);
  };
  const nlohmann::json* size =
      memory_map.is_object() && memory_map.contains("file_size") ? &memory_map["file_size"] : nullptr;
  if (size && !size->is_number_unsigned()) fail("'{}': memory-map.json's file_size is {}", path, size->dump());
  // [offset, offset + length) of the model file, named by `what` in step `step`.
  auto check_file_bytes = [&](const std::string& what, uint32_t step, uint64_t offset, uint64_t length) {
    if (!size)
      fail("'{}': {} of step {} reads model-file bytes, but no memory-map.json gives the file's size", path, what,
           step);
    const uint64_t file = size->get<uint64_t>();
    if (offset > file || length > file - offset)
      fail("'{}': {} of step {} reads {} MODEL_FILE bytes at offset {}, past the end of the {}-byte model file", path,
           what, step, length, offset, file);
  };
  for (const OpRecord& o : t.ops) {
    check_step("op", o.step);
    auto tensor = [&](const TensorRecord& x) {
      if (x.pool == Pool::MODEL_FILE) check_file_bytes(fmt::format("tensor '{}'", x.name), o.step, x.offset, x.bytes);
      for (const RangeRecord& r : x.ranges)
        if (r.pool == Pool::MODEL_FILE) check_file_bytes(fmt::format("op '{}'", o.name), o.step, r.offset, r.length);
    };
    tensor(o.out);
    for (const TensorRecord& in : o.inputs) tensor(in);
    if (o.write.pool == Pool::MODEL_FILE)
      check_file_bytes(fmt::format("op '{}'", o.name), o.step, o.write.offset, o.write.length);
  }
  for (const SpanRecord& s : t.spans) check_step("span", s.step);
  for (const IoRecord& io : t.io) {
    check_step("IO record", io.step);
    for (const IoRange& r : io.ranges) check_file_bytes("IO record", io.step, r.offset, r.length);
  }
}

}  // namespace tt::trace
