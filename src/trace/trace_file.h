// Writing and reading trace.bin (docs/trace-format.md).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trace/format.h"
#include "trace/records.h"

namespace tt::trace {

// Unsigned LEB128 (7 bits a byte, low first, the high bit set on every byte but the last) of v at p, which has room
// for kMaxVarintBytes: past the last byte written. A plain loop: most values are one or two bytes, where it beats a
// branch-free form (tt_bench BM_TraceWriterOps).
constexpr size_t kMaxVarintBytes = 10;
inline uint8_t* put_varint(uint8_t* p, uint64_t v) {
  for (; v >= 0x80; v >>= 7) *p++ = static_cast<uint8_t>(v | 0x80);
  *p++ = static_cast<uint8_t>(v);
  return p;
}

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
  // Room for n more bytes: where they go. append(end) then keeps those up to end (at most n).
  uint8_t* tail(size_t n) {
    if (bytes_.size() - used_ < n) grow(n);
    return bytes_.data() + used_;
  }
  void append(const uint8_t* end) { used_ = static_cast<size_t>(end - bytes_.data()); }
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

class TraceWriter {
 public:
  explicit TraceWriter(const std::string& path);  // throws tt::Error
  ~TraceWriter();
  void step_begin(const StepMarker& m);
  // A node's workers' shares: `times` holds a (start, end) pair per worker in ns since the run started
  // ({kNoShareNs, kNoShareNs}: no share).
  static constexpr uint64_t kNoShareNs = UINT64_MAX;
  // An OP record: node r.node of step r.step whole, with its shares (r's thread, n_threads and times are not read: the
  // reader derives them from the shares). Its strings already interned: ids[0] the op name, ids[1] the output,
  // ids[2 + k] input k (the record's own name fields are not read); the tracer interns them once per graph.
  void op(const OpRecord& r, const uint32_t* ids, std::span<const uint64_t> times);
  // An OPS record: nodes [first_node, first_node + count) of a step, each its previous record advanced by its stride,
  // except the nodes in `moved`, whose listed placement fields change by the listed deltas (field index in
  // for_each_placement_field's order, delta added mod 2^64), which become their stride. `times`: count * n_workers
  // pairs; n_spans: how many of them are spans (shares of non-view nodes).
  struct OpsRun {
    uint32_t step = 0, first_node = 0, count = 0;
    uint16_t n_workers = 0;
  };
  struct Moved {
    uint32_t node = 0;
    std::span<const std::pair<uint32_t, uint64_t>> changes;  // fields in increasing order
  };
  void ops(const OpsRun& run, std::span<const uint64_t> times, std::span<const Moved> moved, uint64_t n_spans);
  // Id of a string in the trace's string table; its STRING record is emitted before any record that uses it.
  uint32_t intern(const std::string& s);
  const std::string& string_of(uint32_t id) const { return *names_[id]; }
  void step_end(const StepMarker& m);
  void io(const IoRecord& r);
  // One token's routing in one layer (ROUTING): experts and weights of the same length, at most kMaxRoutedExperts;
  // `predicted` (`run --moe-predict`; empty: none) the experts the previous layer predicted, at most as many.
  void routing(uint32_t step, uint16_t layer, int32_t token_pos, std::span<const int32_t> experts,
               std::span<const float> weights, float margin, std::span<const int32_t> predicted = {});
  // Pushes buffered records to the file (the tracer calls it after whole steps: past kFlushBytes, at least every
  // 500 ms, and at the end).
  // A WEIGHT_LOAD record; tensor_id: r.tensor interned.
  void weight_load(const WeightLoadRecord& r, uint32_t tensor_id);
  void flush();
  // Bytes of the file once flushed (the pending block's header included).
  uint64_t bytes_written() const { return bytes_written_ + (bytes_buffered() > 0 ? buffer_.size() : block_start_); }
  // Bytes of records not yet written.
  uint64_t bytes_buffered() const { return buffer_.size() - block_start_ - kBlockHeaderBytes; }
  // Buffered bytes past which the tracer flushes whatever the interval: the buffer stays this size and in cache.
  static constexpr size_t kFlushBytes = 256 << 10;
  uint64_t op_count() const { return op_count_; }
  uint64_t span_count() const { return span_count_; }

 private:
  void begin_record(RecordKind kind);
  void end_record();
  // Completes the pending block's header (its records' length and checksum): the bytes of buffer_ to write, 0 when
  // there are none (no records, file header written).
  size_t seal();

  std::string path_;
  std::FILE* file_ = nullptr;
  // The file header until the first flush, then the pending block: its header (filled in by seal) and records.
  RecordBuffer buffer_;
  size_t block_start_ = 0;  // where the pending block's header is in buffer_
  size_t record_start_ = 0;
  bool in_record_ = false;
  void put_shares(std::span<const uint64_t> times, uint32_t count, uint16_t n_workers);
  std::vector<uint64_t> cursors_;  // put_shares' scratch: each worker's previous share's end
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
  bool complete = true;      // false when the file ends inside a record or a block
  uint64_t stopped_at = 0;   // byte offset where reading stopped
  std::string stop_reason;   // why it stopped early (truncated record, ...)
  // Mixture-of-experts runs: per step, layer and token, in record order (a step's after its ops).
  std::vector<RoutingRecord> routing;
  // `run --weight-budget`: every access to a weight unit, in access order.
  std::vector<WeightLoadRecord> weight_loads;
};

// A block of `records` (whole records): its header (magic, length, XXH3-64 of the records) and the records,
// appended to out. The writer seals each flush so; tests build files with it.
void seal_block(std::span<const uint8_t> records, std::vector<uint8_t>& out);
// Recomputes in place the checksum of every whole block of a trace file, up to the first that is cut short or has
// no block magic (the fuzzers: a mutated payload then reaches the record parser, not only the checksum).
void reseal_blocks(std::span<uint8_t> file);

// Reads a whole trace. A truncated tail (a run killed midway: the file ends inside the last block) is not an error:
// every complete record is returned (those of a cut block unverified) and complete/stopped_at/stop_reason say where
// and why reading stopped. A corrupt file is an Error; blocks are verified, and a checksum mismatch, a
// missing block magic or a block whose length runs into the next block names the block's byte offset.
TraceContents read_trace(const std::string& path);
// The same from the file's bytes; `path` names it in messages (fuzzed: fuzz/fuzz_trace.cpp).
TraceContents parse_trace(std::span<const uint8_t> data, const std::string& path);

}  // namespace tt::trace
