// Writing and reading trace.bin (docs/trace-format.md).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trace/format.h"
#include "trace/records.h"

struct ZSTD_CCtx_s;

namespace tt::trace {

using ZstdContext = std::unique_ptr<ZSTD_CCtx_s, size_t (*)(ZSTD_CCtx_s*)>;

// Append-only bytes of the records not yet written: a field is one predictable capacity check and a memcpy
// (std::vector::resize per field zero-fills and costs several times that, on every field of every op).
class RecordBuffer {
 public:
  template <typename T>
  void put(T v) {
    if (bytes_.size() - used_ < sizeof(T)) [[unlikely]]
      grow(sizeof(T));
    std::memcpy(bytes_.data() + used_, &v, sizeof(T));
    used_ += sizeof(T);
  }
  void put_bytes(const void* p, size_t n) {
    if (n == 0) return;  // p may be null then (an empty span), which memcpy must not get
    if (bytes_.size() - used_ < n) grow(n);
    std::memcpy(bytes_.data() + used_, p, n);
    used_ += n;
  }
  uint8_t* data() { return bytes_.data(); }
  size_t size() const { return used_; }
  bool empty() const { return used_ == 0; }
  void clear() { used_ = 0; }
  // Room for n bytes without growing (pages touched now, not inside a step).
  void reserve(size_t n) {
    if (bytes_.size() < n) bytes_.resize(n);
  }

 private:
  void grow(size_t n) { bytes_.resize(std::max<size_t>(2 * bytes_.size(), used_ + n + 4096)); }
  std::vector<uint8_t> bytes_;
  size_t used_ = 0;
};

// Appends to `out` a block (docs/trace-format.md) holding the records `raw`: zstd-compressed with the previous
// block's records as prefix (steps repeat most of the step before's bytes), with its header and checksum. The writer
// seals each flush this way; the fuzzer seals its inputs to get past the checksum.
void seal_block(std::span<const uint8_t> raw, std::vector<uint8_t>& out, std::span<const uint8_t> previous = {});

class TraceWriter {
 public:
  explicit TraceWriter(const std::string& path);  // throws tt::Error
  ~TraceWriter();                                 // seals what is buffered (errors are lost: call flush() first)
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  void step_begin(const StepMarker& m);
  // An op with its workers' shares and its strings already interned: ids[0] the output, ids[1 + k] input k (the
  // record's name fields, its thread, n_threads and times are not read: the shares give them).
  void op(const OpRecord& r, const uint32_t* ids, std::span<const Share> shares = {});
  // Id of a string in the trace's string table; its STRING record is emitted before any record that uses it.
  uint32_t intern(const std::string& s);
  const std::string& string_of(uint32_t id) const { return *names_[id]; }
  void step_end(const StepMarker& m);
  void io(const IoRecord& r);
  // Seals the buffered records into a block and writes it (the tracer calls it after whole steps: past kFlushBytes,
  // at least every 500 ms, and at the end).
  void flush();
  uint64_t bytes_written() const { return bytes_written_; }  // of the file, sealed blocks only
  uint64_t bytes_buffered() const { return buffer_.size(); }
  static constexpr size_t kFlushBytes = 256 << 10;
  uint64_t op_count() const { return op_count_; }
  uint64_t span_count() const { return span_count_; }

 private:
  void begin_record(RecordKind kind);
  void end_record();

  std::string path_;
  std::FILE* file_ = nullptr;
  RecordBuffer buffer_;
  std::vector<uint8_t> block_;     // flush()'s, reused
  std::vector<uint8_t> previous_;  // the last block's records
  ZstdContext cctx_;
  size_t record_start_ = 0;
  bool in_record_ = false;
  std::unordered_map<std::string, uint32_t> strings_;
  std::vector<const std::string*> names_;  // id -> key in strings_ (node-based map: keys never move)
  uint64_t bytes_written_ = 0, op_count_ = 0, span_count_ = 0;
};

struct TraceContents {
  uint32_t version = 0;
  std::vector<StepMarker> steps;
  std::vector<OpRecord> ops;
  std::vector<SpanRecord> spans;
  std::vector<IoRecord> io;  // with --io-trace
  bool complete = true;      // false when the file ends inside a block (or, versions 1-2, a record)
  uint64_t stopped_at = 0;   // byte offset where reading stopped
  std::string stop_reason;   // why it stopped early (truncated block, ...)
};

// Reads a whole trace. A truncated tail (a run killed midway) is not an error: every complete block is returned and
// complete/stopped_at/stop_reason say where and why reading stopped. A corrupt file (a block whose checksum does not
// match, named by its byte offset; a bad record) is an Error.
TraceContents read_trace(const std::string& path);
// The same from the file's bytes; `path` names it in messages (fuzzed: fuzz/fuzz_trace.cpp).
TraceContents parse_trace(std::span<const uint8_t> data, const std::string& path);
// The records of the whole block at the start of `block` (checked and decompressed against the previous block's
// records); `what` names it in messages.
std::vector<uint8_t> unseal_block(std::span<const uint8_t> block, const std::string& what,
                                  std::span<const uint8_t> previous = {});

}  // namespace tt::trace
