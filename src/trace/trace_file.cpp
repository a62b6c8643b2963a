#include "trace/trace_file.h"

#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_decompressBound
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

#include "core/error.h"
#include "gguf/ggml_type.h"

namespace tt::trace {
namespace {

// zstd's fast end: a block is compressed once per flush, on the tracer's writer thread.
constexpr int kZstdLevel = 1;

template <typename T>
void put(RecordBuffer& b, T v) {
  b.put(v);
}

void put_range(RecordBuffer& b, const RangeRecord& r) {
  put<uint8_t>(b, static_cast<uint8_t>(r.pool));
  put<int32_t>(b, r.buffer_id);
  put<uint64_t>(b, r.offset);
  put<uint64_t>(b, r.length);
  put<int32_t>(b, r.pos_begin);
  put<int32_t>(b, r.pos_end);
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

uint64_t block_checksum(const uint8_t* header, const uint8_t* payload, size_t n) {
  return XXH3_64bits_withSeed(payload, n, XXH3_64bits(header, 16));
}

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  template <typename T>
  T get() {
    if (pos_ + sizeof(T) > n_) fail("record payload shorter than its fields");
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  size_t remaining() const { return n_ - pos_; }
  std::string bytes(size_t len) {
    if (pos_ + len > n_) fail("string past the end of its record");
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_, pos_ = 0;
};

// Enumerations read from a record: a value outside the enumeration is corruption (consumers index tables by them).
template <typename E>
E get_enum(Reader& r, E last, const char* what) {
  const uint8_t v = r.get<uint8_t>();
  if (v > static_cast<uint8_t>(last)) fail("unknown {} {}", what, v);
  return static_cast<E>(v);
}
Pool get_pool(Reader& r) { return get_enum(r, Pool::SCRATCH, "buffer pool"); }
Phase get_phase(Reader& r) { return get_enum(r, Phase::GENERATE, "phase"); }
OpKind get_op(Reader& r) {
  return get_enum(r, static_cast<OpKind>(static_cast<uint8_t>(OpKind::kCount) - 1), "op kind");
}
GgmlType get_type(Reader& r) {
  const uint8_t v = r.get<uint8_t>();
  if (find_type_traits(v) == nullptr) fail("unknown tensor type {}", v);
  return static_cast<GgmlType>(v);
}

RangeRecord get_range(Reader& r) {
  RangeRecord x;
  x.pool = get_pool(r);
  x.buffer_id = r.get<int32_t>();
  x.offset = r.get<uint64_t>();
  x.length = r.get<uint64_t>();
  x.pos_begin = r.get<int32_t>();
  x.pos_end = r.get<int32_t>();
  return x;
}

// Records of one trace, fed a run of bytes at a time (a block's, or versions 1-2's whole tail).
class RecordParser {
 public:
  RecordParser(TraceContents& out, const std::string& path) : out_(out), path_(path) {}
  // Parses the records of [p, p + n); `where(pos)` names a record's place in messages. Returns the bytes of whole
  // records: less than n only when the last record is cut short.
  template <typename Where>
  size_t parse(const uint8_t* p, size_t n, Where where);

 private:
  void record(RecordKind kind, Reader& r, uint32_t len);
  const std::string& str(uint32_t id) const {
    if (id >= strings_.size()) fail("record refers to undefined string {}", id);
    return strings_[id];
  }
  TraceContents& out_;
  const std::string& path_;
  std::vector<std::string> strings_;
};

template <typename Where>
size_t RecordParser::parse(const uint8_t* p, size_t n, Where where) {
  size_t pos = 0;
  while (pos < n) {
    if (n - pos < 5) return pos;
    const uint32_t len = load<uint32_t>(p + pos);
    if (n - pos - 5 < len) return pos;
    Reader r(p + pos + 5, len);
    try {
      record(static_cast<RecordKind>(p[pos + 4]), r, len);
    } catch (const Error& e) {
      fail("'{}': corrupt record at {}: {}", path_, where(pos), e.what());
    }
    pos += 5 + len;
  }
  return pos;
}

void RecordParser::record(RecordKind kind, Reader& r, uint32_t len) {
  const bool v7 = out_.version >= 7;
  switch (kind) {
    case RecordKind::STRING: {
      const uint32_t id = r.get<uint32_t>();
      const uint16_t n = r.get<uint16_t>();
      if (id != strings_.size()) fail("string id {} out of order", id);
      strings_.push_back(r.bytes(n));
      break;
    }
    case RecordKind::STEP_BEGIN: {
      StepMarker m;
      m.step = r.get<uint32_t>();
      // Steps are numbered 0, 1, ... in order: consumers index tables by step number.
      if (m.step != out_.steps.size())
        fail("STEP_BEGIN of step {} where step {} was expected", m.step, out_.steps.size());
      m.phase = get_phase(r);
      m.pos_begin = r.get<int32_t>();
      m.pos_end = r.get<int32_t>();
      m.start_ns = r.get<uint64_t>();
      out_.steps.push_back(m);
      break;
    }
    case RecordKind::STEP_END: {
      const uint32_t step = r.get<uint32_t>();
      if (out_.steps.empty() || out_.steps.back().step != step) fail("STEP_END for step {} without its begin", step);
      StepMarker& m = out_.steps.back();
      m.end_ns = r.get<uint64_t>();
      m.token = r.get<int32_t>();
      m.probability = r.get<float>();
      m.ended = true;
      break;
    }
    case RecordKind::SPAN: {
      if (v7) fail("SPAN record in a version {} trace (its OP records hold the shares)", out_.version);
      SpanRecord s;
      s.step = r.get<uint32_t>();
      s.node = r.get<uint32_t>();
      s.thread = r.get<uint16_t>();
      s.start_ns = r.get<uint64_t>();
      s.end_ns = r.get<uint64_t>();
      out_.spans.push_back(s);
      break;
    }
    case RecordKind::OP: {
      OpRecord o;
      auto get_tensor = [&](TensorRecord& t) {
        t.name = str(r.get<uint32_t>());
        t.type = get_type(r);
        t.pool = get_pool(r);
        for (int d = 0; d < 4; ++d) t.ne[d] = r.get<int64_t>();
        t.buffer_id = r.get<int32_t>();
        t.offset = r.get<uint64_t>();
        t.bytes = r.get<uint64_t>();
      };
      o.step = r.get<uint32_t>();
      o.node = r.get<uint32_t>();
      o.phase = get_phase(r);
      o.op = get_op(r);
      o.layer = r.get<int16_t>();
      o.pos_begin = r.get<int32_t>();
      o.pos_end = r.get<int32_t>();
      if (v7) {
        // The op lasts from its first share's start to its last share's end; a view's one share is no span.
        const uint16_t n_shares = r.get<uint16_t>();
        if (n_shares * 18ull > r.remaining()) fail("{} shares exceed the record", n_shares);
        uint64_t start = UINT64_MAX, end = 0;
        for (uint16_t k = 0; k < n_shares; ++k) {
          const uint16_t thread = r.get<uint16_t>();
          const uint64_t s = r.get<uint64_t>(), e = r.get<uint64_t>();
          if (e < s) fail("node {}: worker {}'s share ends before it starts", o.node, thread);
          if (k == 0) o.thread = thread;
          start = std::min(start, s), end = std::max(end, e);
          if (op_is_view(o.op)) continue;
          ++o.n_threads;
          out_.spans.push_back({o.step, o.node, thread, s, e});
        }
        o.start_ns = n_shares ? start : 0;
        o.end_ns = n_shares ? end : 0;
      } else {
        o.thread = r.get<uint16_t>();
        o.n_threads = r.get<uint16_t>();
        o.start_ns = r.get<uint64_t>();
        o.end_ns = r.get<uint64_t>();
        o.name = str(r.get<uint32_t>());
      }
      get_tensor(o.out);
      if (v7) o.name = o.out.name;  // an op is named after what it computes
      o.write = get_range(r);
      if (!v7) {  // fused op kinds, never written
        const uint16_t n_fused = r.get<uint16_t>();
        for (uint16_t i = 0; i < n_fused; ++i) get_op(r);
      }
      const uint16_t n_inputs = r.get<uint16_t>();
      o.inputs.resize(n_inputs);
      for (TensorRecord& t : o.inputs) {
        get_tensor(t);
        const uint32_t n_ranges = r.get<uint32_t>();
        if (n_ranges > len) fail("range count {} exceeds the record", n_ranges);
        t.ranges.resize(n_ranges);
        for (RangeRecord& rr : t.ranges) rr = get_range(r);
      }
      o.has_stats = r.get<uint8_t>() != 0;
      if (o.has_stats) {
        o.stats.min = r.get<float>();
        o.stats.max = r.get<float>();
        o.stats.mean = r.get<double>();
        o.stats.nan_count = r.get<uint64_t>();
        o.stats.inf_count = r.get<uint64_t>();
        o.stats.hash = r.get<uint64_t>();
      }
      out_.ops.push_back(std::move(o));
      break;
    }
    case RecordKind::IO: {
      if (out_.version < 2) fail("IO record in a version {} trace", out_.version);
      IoRecord io;
      io.step = r.get<uint32_t>();
      io.node = r.get<uint32_t>();
      io.page_bytes = r.get<uint32_t>();
      const uint16_t n_ranges = r.get<uint16_t>();
      io.ranges.resize(n_ranges);
      for (IoRange& x : io.ranges) {
        x.offset = r.get<uint64_t>();
        x.length = r.get<uint64_t>();
        x.pages = r.get<uint32_t>();
        x.nonresident_pages = r.get<uint32_t>();
        io.pages += x.pages;
        io.nonresident_pages += x.nonresident_pages;
      }
      const uint16_t n_workers = r.get<uint16_t>();
      io.workers.resize(n_workers);
      for (IoWorker& w : io.workers) {
        w.thread = r.get<uint16_t>();
        w.major_faults = r.get<uint64_t>();
        w.minor_faults = r.get<uint64_t>();
        w.read_bytes = r.get<uint64_t>();
      }
      out_.io.push_back(std::move(io));
      break;
    }
    default:
      fail("unknown record kind {}", static_cast<int>(kind));
  }
}

}  // namespace

namespace {

ZstdContext new_context() {
  ZstdContext c(ZSTD_createCCtx(), ZSTD_freeCCtx);
  if (!c) fail("cannot compress a trace block: out of memory");
  return c;
}

// seal_block with a context kept between blocks (a new one's memory is faulted in anew each time).
void seal_block(ZSTD_CCtx* cctx, std::span<const uint8_t> raw, std::vector<uint8_t>& out,
                std::span<const uint8_t> previous) {
  const size_t at = out.size();
  const size_t bound = ZSTD_compressBound(raw.size());
  out.resize(at + kBlockHeaderBytes + bound);
  uint8_t* header = out.data() + at;
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, kZstdLevel);
  ZSTD_CCtx_refPrefix(cctx, previous.data(), previous.size());
  const size_t n = ZSTD_compress2(cctx, header + kBlockHeaderBytes, bound, raw.data(), raw.size());
  if (ZSTD_isError(n)) fail("cannot compress a trace block: {}", ZSTD_getErrorName(n));
  const uint32_t fields[4] = {kBlockMagic, kBlockZstd, static_cast<uint32_t>(n), static_cast<uint32_t>(raw.size())};
  std::memcpy(header, fields, sizeof(fields));
  const uint64_t checksum = block_checksum(header, header + kBlockHeaderBytes, n);
  std::memcpy(header + 16, &checksum, 8);
  out.resize(at + kBlockHeaderBytes + n);
}

}  // namespace

void seal_block(std::span<const uint8_t> raw, std::vector<uint8_t>& out, std::span<const uint8_t> previous) {
  seal_block(new_context().get(), raw, out, previous);
}

std::vector<uint8_t> unseal_block(std::span<const uint8_t> block, const std::string& what,
                                  std::span<const uint8_t> previous) {
  if (block.size() < kBlockHeaderBytes) fail("{}: {} bytes, shorter than a block header", what, block.size());
  const uint8_t* h = block.data();
  const uint32_t magic = load<uint32_t>(h), flags = load<uint32_t>(h + 4);
  const uint32_t stored = load<uint32_t>(h + 8), raw = load<uint32_t>(h + 12);
  if (magic != kBlockMagic) fail("{}: not a block (magic {:08x})", what, magic);
  if (block.size() - kBlockHeaderBytes < stored)
    fail("{}: the block's {} bytes run past the end ({} left)", what, stored, block.size() - kBlockHeaderBytes);
  const uint8_t* payload = h + kBlockHeaderBytes;
  if (block_checksum(h, payload, stored) != load<uint64_t>(h + 16)) fail("{}: checksum mismatch", what);
  if (flags == 0) {
    if (raw != stored) fail("{}: an uncompressed block of {} bytes says {}", what, stored, raw);
    return {payload, payload + stored};
  }
  if (flags != kBlockZstd) fail("{}: unknown block flags {}", what, flags);
  // The declared size must be the frame's, and what its blocks can hold, before it is allocated.
  const unsigned long long content = ZSTD_getFrameContentSize(payload, stored);
  const unsigned long long bound = ZSTD_decompressBound(payload, stored);
  if (content != raw || bound == ZSTD_CONTENTSIZE_ERROR || raw > bound)
    fail("{}: the block's compressed frame does not hold the {} bytes it declares", what, raw);
  std::vector<uint8_t> out(raw);
  const std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!dctx) fail("{}: out of memory", what);
  ZSTD_DCtx_refPrefix(dctx.get(), previous.data(), previous.size());
  const size_t n = ZSTD_decompressDCtx(dctx.get(), out.data(), out.size(), payload, stored);
  if (ZSTD_isError(n) || n != raw) fail("{}: the block does not decompress", what);
  return out;
}

TraceWriter::TraceWriter(const std::string& path) : path_(path), cctx_(new_context()) {
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) fail("cannot create '{}': {}", path, std::strerror(errno));
  buffer_.reserve(2 * kFlushBytes);  // a flush at kFlushBytes plus one step's records
  uint8_t header[kHeaderBytes] = {};
  std::memcpy(header, kMagic, 8);
  std::memcpy(header + 8, &kVersion, 4);
  if (std::fwrite(header, 1, sizeof(header), file_) != sizeof(header))
    fail("error writing '{}': {}", path_, std::strerror(errno));
  bytes_written_ = sizeof(header);
}

TraceWriter::~TraceWriter() {
  if (!file_) return;
  try {
    flush();
  } catch (const Error&) {
    // a destructor cannot report it: finish() flushes first
  }
  std::fclose(file_);
}

void TraceWriter::flush() {
  if (buffer_.empty()) return;
  block_.clear();
  seal_block(cctx_.get(), {buffer_.data(), buffer_.size()}, block_, previous_);
  if (std::fwrite(block_.data(), 1, block_.size(), file_) != block_.size() || std::fflush(file_) != 0)
    fail("error writing '{}': {}", path_, std::strerror(errno));
  bytes_written_ += block_.size();
  previous_.assign(buffer_.data(), buffer_.data() + buffer_.size());
  buffer_.clear();
}

void TraceWriter::begin_record(RecordKind kind) {
  TT_CHECK(!in_record_, "trace record begun inside another");
  in_record_ = true;
  record_start_ = buffer_.size();
  put<uint32_t>(buffer_, 0);
  put<uint8_t>(buffer_, static_cast<uint8_t>(kind));
}

void TraceWriter::end_record() {
  const uint32_t len = static_cast<uint32_t>(buffer_.size() - record_start_ - 5);
  std::memcpy(buffer_.data() + record_start_, &len, 4);
  in_record_ = false;
}

uint32_t TraceWriter::intern(const std::string& s) {
  auto it = strings_.find(s);
  if (it != strings_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(strings_.size());
  names_.push_back(&strings_.emplace(s, id).first->first);
  // Strings are interned before the record that uses them is begun, so their STRING records precede it.
  const uint16_t len = static_cast<uint16_t>(std::min<size_t>(s.size(), 65535));
  begin_record(RecordKind::STRING);
  put<uint32_t>(buffer_, id);
  put<uint16_t>(buffer_, len);
  buffer_.put_bytes(s.data(), len);
  end_record();
  return id;
}

void TraceWriter::step_begin(const StepMarker& m) {
  begin_record(RecordKind::STEP_BEGIN);
  put<uint32_t>(buffer_, m.step);
  put<uint8_t>(buffer_, static_cast<uint8_t>(m.phase));
  put<int32_t>(buffer_, m.pos_begin);
  put<int32_t>(buffer_, m.pos_end);
  put<uint64_t>(buffer_, m.start_ns);
  end_record();
}

void TraceWriter::step_end(const StepMarker& m) {
  begin_record(RecordKind::STEP_END);
  put<uint32_t>(buffer_, m.step);
  put<uint64_t>(buffer_, m.end_ns);
  put<int32_t>(buffer_, m.token);
  put<float>(buffer_, m.probability);
  end_record();
}

void TraceWriter::io(const IoRecord& r) {
  begin_record(RecordKind::IO);
  put<uint32_t>(buffer_, r.step);
  put<uint32_t>(buffer_, r.node);
  put<uint32_t>(buffer_, r.page_bytes);
  put<uint16_t>(buffer_, static_cast<uint16_t>(r.ranges.size()));
  for (const IoRange& x : r.ranges) {
    put<uint64_t>(buffer_, x.offset);
    put<uint64_t>(buffer_, x.length);
    put<uint32_t>(buffer_, x.pages);
    put<uint32_t>(buffer_, x.nonresident_pages);
  }
  put<uint16_t>(buffer_, static_cast<uint16_t>(r.workers.size()));
  for (const IoWorker& w : r.workers) {
    put<uint16_t>(buffer_, w.thread);
    put<uint64_t>(buffer_, w.major_faults);
    put<uint64_t>(buffer_, w.minor_faults);
    put<uint64_t>(buffer_, w.read_bytes);
  }
  end_record();
}

void TraceWriter::op(const OpRecord& r, const uint32_t* ids, std::span<const Share> shares) {
  auto put_tensor = [&](const TensorRecord& t, uint32_t id) {
    put<uint32_t>(buffer_, id);
    put<uint8_t>(buffer_, static_cast<uint8_t>(t.type));
    put<uint8_t>(buffer_, static_cast<uint8_t>(t.pool));
    for (int d = 0; d < 4; ++d) put<int64_t>(buffer_, t.ne[d]);
    put<int32_t>(buffer_, t.buffer_id);
    put<uint64_t>(buffer_, t.offset);
    put<uint64_t>(buffer_, t.bytes);
  };
  begin_record(RecordKind::OP);
  put<uint32_t>(buffer_, r.step);
  put<uint32_t>(buffer_, r.node);
  put<uint8_t>(buffer_, static_cast<uint8_t>(r.phase));
  put<uint8_t>(buffer_, static_cast<uint8_t>(r.op));
  put<int16_t>(buffer_, r.layer);
  put<int32_t>(buffer_, r.pos_begin);
  put<int32_t>(buffer_, r.pos_end);
  put<uint16_t>(buffer_, static_cast<uint16_t>(shares.size()));
  for (const Share& s : shares) {
    put<uint16_t>(buffer_, s.thread);
    put<uint64_t>(buffer_, s.start_ns);
    put<uint64_t>(buffer_, s.end_ns);
  }
  put_tensor(r.out, ids[0]);
  put_range(buffer_, r.write);
  put<uint16_t>(buffer_, static_cast<uint16_t>(r.inputs.size()));
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    put_tensor(r.inputs[i], ids[1 + i]);
    put<uint32_t>(buffer_, static_cast<uint32_t>(r.inputs[i].ranges.size()));
    for (const RangeRecord& rr : r.inputs[i].ranges) put_range(buffer_, rr);
  }
  put<uint8_t>(buffer_, r.has_stats ? 1 : 0);
  if (r.has_stats) {
    put<float>(buffer_, r.stats.min);
    put<float>(buffer_, r.stats.max);
    put<double>(buffer_, r.stats.mean);
    put<uint64_t>(buffer_, r.stats.nan_count);
    put<uint64_t>(buffer_, r.stats.inf_count);
    put<uint64_t>(buffer_, r.stats.hash);
  }
  end_record();
  ++op_count_;
  if (!op_is_view(r.op)) span_count_ += shares.size();
}

TraceContents read_trace(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot read trace '{}'", path);
  const std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return parse_trace(data, path);
}

TraceContents parse_trace(std::span<const uint8_t> data, const std::string& path) {
  TraceContents out;
  if (data.empty()) fail("'{}' is empty (0 bytes)", path);
  if (data.size() < kHeaderBytes || std::memcmp(data.data(), kMagic, 8) != 0)
    fail("'{}' is not a tensortrace trace (bad magic)", path);
  out.version = load<uint32_t>(data.data() + 8);
  if (out.version >= 3 && out.version <= 6)
    fail("'{}': trace.bin version {} is no longer read; re-run with this version", path, out.version);
  if (out.version < 1 || out.version > kVersion)
    fail("'{}': trace format version {} is not supported (expected 1, 2 or {})", path, out.version, kVersion);
  RecordParser records(out, path);
  size_t pos = kHeaderBytes;
  std::vector<uint8_t> previous;  // the last block's records: the next one is compressed against them
  if (out.version < 7) {          // records straight after the header
    const size_t n = data.size() - pos;
    const size_t whole =
        records.parse(data.data() + pos, n, [&](size_t at) { return fmt::format("byte {}", pos + at); });
    if (whole < n) {
      out.complete = false;
      out.stop_reason = n - whole < 5 ? "file ends inside a record header"
                                      : fmt::format("file ends inside a record of {} bytes",
                                                    load<uint32_t>(data.data() + pos + whole));
    }
    pos += whole;
  }
  while (out.version >= 7 && pos < data.size()) {
    const size_t left = data.size() - pos;
    if (left < kBlockHeaderBytes || left - kBlockHeaderBytes < load<uint32_t>(data.data() + pos + 8)) {
      // A block cut short by a kill (a flipped length in a block's header reads the same way).
      if (left >= 4 && load<uint32_t>(data.data() + pos) != kBlockMagic)
        fail("'{}': no block at byte {} (magic {:08x})", path, pos, load<uint32_t>(data.data() + pos));
      out.complete = false;
      out.stop_reason = fmt::format("file ends inside the block at byte {} ({} bytes of it present)", pos, left);
      break;
    }
    const uint32_t stored = load<uint32_t>(data.data() + pos + 8);
    std::vector<uint8_t> raw = unseal_block(data.subspan(pos, kBlockHeaderBytes + stored),
                                            fmt::format("'{}': block at byte {}", path, pos), previous);
    const size_t whole = records.parse(
        raw.data(), raw.size(), [&](size_t at) { return fmt::format("byte {} of the block at byte {}", at, pos); });
    if (whole < raw.size()) fail("'{}': the block at byte {} ends inside a record", path, pos);
    previous.swap(raw);
    pos += kBlockHeaderBytes + stored;
  }
  out.stopped_at = pos;
  if (out.complete && !out.steps.empty() && !out.steps.back().ended) {
    out.complete = false;
    out.stop_reason = fmt::format("step {} has no end record (the run stopped during it)", out.steps.back().step);
  }
  return out;
}

}  // namespace tt::trace
