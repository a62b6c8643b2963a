#include "trace/trace_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "gguf/ggml_type.h"
#include "trace/hash.h"

namespace tt::trace {
namespace {

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
  uint64_t get_varint() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const uint8_t b = get<uint8_t>();
      // The tenth byte holds bit 63 only.
      if (shift == 63 && b > 1) fail("varint longer than 64 bits");
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
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

// The shares of `count` nodes: n_workers (start, end) pairs each from `times`, cursors[w] worker w's previous end,
// written at out as varints (docs/trace-format.md); past the last byte written, or nullptr for a share ending before
// it starts.
uint8_t* encode_shares(const uint64_t* __restrict times, uint32_t count, uint16_t n_workers,
                       uint64_t* __restrict cursors, uint8_t* __restrict out) {
  bool backwards = false;
  for (uint32_t node = 0; node < count; ++node)
    for (uint16_t w = 0; w < n_workers; ++w, times += 2) {
      const uint64_t start = times[0], end = times[1];
      if (start == TraceWriter::kNoShareNs) {
        *out++ = 0;
        continue;
      }
      backwards |= end < start;
      // zigzag(start - cursor) + 1: a start behind the cursor (a counter read on another core) is a small number too
      // (zigzag 2^64 - 1 would wrap to 0: a gap of -2^63 ns, which nothing measures).
      out = put_varint(out, zigzag(static_cast<int64_t>(start - cursors[w])) + 1);
      out = put_varint(out, end - start);
      cursors[w] = end;
    }
  return backwards ? nullptr : out;
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Writes the header of the block at `block`, whose `length` bytes of records follow its header.
void put_block_header(uint8_t* block, size_t length) {
  if (length > UINT32_MAX) fail("a trace block of {} bytes of records (4 GiB at most)", length);
  const uint32_t fields[2] = {kBlockMagic, static_cast<uint32_t>(length)};
  const uint64_t checksum = xxh3_64(block + kBlockHeaderBytes, length);
  std::memcpy(block, fields, sizeof(fields));
  std::memcpy(block + sizeof(fields), &checksum, sizeof(checksum));
}

// The block header at `pos`: what is there and how the bytes after it hold its records.
struct BlockAt {
  enum { WHOLE, CUT, NOT_A_BLOCK } state;
  uint32_t magic = 0, length = 0;  // magic: when at least 4 bytes are left; length: when the header is whole
  uint64_t checksum = 0;
};
BlockAt block_at(std::span<const uint8_t> data, size_t pos) {
  const size_t left = data.size() - pos;
  BlockAt b{BlockAt::CUT};
  if (left >= 4) {
    b.magic = load<uint32_t>(data.data() + pos);
    if (b.magic != kBlockMagic) return {BlockAt::NOT_A_BLOCK, b.magic};
  }
  if (left < kBlockHeaderBytes) return b;
  b.length = load<uint32_t>(data.data() + pos + 4);
  b.checksum = load<uint64_t>(data.data() + pos + 8);
  if (left - kBlockHeaderBytes >= b.length) b.state = BlockAt::WHOLE;
  return b;
}

}  // namespace

void seal_block(std::span<const uint8_t> records, std::vector<uint8_t>& out) {
  const size_t at = out.size();
  out.resize(at + kBlockHeaderBytes);
  out.insert(out.end(), records.begin(), records.end());
  put_block_header(out.data() + at, records.size());
}

void reseal_blocks(std::span<uint8_t> file) {
  if (file.size() < kHeaderBytes || std::memcmp(file.data(), kMagic, 8) != 0) return;
  for (size_t pos = kHeaderBytes; pos < file.size();) {
    const BlockAt b = block_at(file, pos);
    if (b.state != BlockAt::WHOLE) return;
    put_block_header(file.data() + pos, b.length);
    pos += kBlockHeaderBytes + b.length;
  }
}

TraceWriter::TraceWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) fail("cannot create '{}': {}", path, std::strerror(errno));
  buffer_.reserve(2 * kFlushBytes);  // a flush at kFlushBytes plus one step's records
  buffer_.put_bytes(kMagic, 8);
  put<uint32_t>(buffer_, kVersion);
  put<uint32_t>(buffer_, 0);
  block_start_ = buffer_.size();
  buffer_.tail(kBlockHeaderBytes);  // the first block's header, written when it is sealed
  buffer_.append(buffer_.data() + block_start_ + kBlockHeaderBytes);
}

TraceWriter::~TraceWriter() {
  if (file_) {
    // A destructor cannot report: a run that did not reach flush() failed already (and says why).
    try {
      if (const size_t n = seal(); n > 0) std::fwrite(buffer_.data(), 1, n, file_);
    } catch (const Error&) {
    }
    std::fclose(file_);
  }
}

size_t TraceWriter::seal() {
  const size_t records = bytes_buffered();
  if (records == 0) return block_start_;  // no block: the file header, if not written yet
  put_block_header(buffer_.data() + block_start_, records);
  return buffer_.size();
}

void TraceWriter::flush() {
  const size_t n = seal();
  if (n == 0) return;
  if (std::fwrite(buffer_.data(), 1, n, file_) != n || std::fflush(file_) != 0)
    fail("error writing '{}': {}", path_, std::strerror(errno));
  bytes_written_ += n;
  buffer_.clear();
  block_start_ = 0;
  buffer_.append(buffer_.tail(kBlockHeaderBytes) + kBlockHeaderBytes);  // the next block's header
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

void TraceWriter::routing(uint32_t step, uint16_t layer, int32_t token_pos, std::span<const int32_t> experts,
                          std::span<const float> weights, float margin, std::span<const int32_t> predicted) {
  TT_CHECK(experts.size() == weights.size() && experts.size() <= kMaxRoutedExperts,
           "ROUTING record of {} experts and {} weights", experts.size(), weights.size());
  TT_CHECK(predicted.size() <= kMaxRoutedExperts, "ROUTING record of {} predicted experts", predicted.size());
  begin_record(RecordKind::ROUTING);
  put<uint32_t>(buffer_, step);
  put<uint16_t>(buffer_, layer);
  put<int32_t>(buffer_, token_pos);
  put<uint8_t>(buffer_, static_cast<uint8_t>(experts.size()));
  for (size_t i = 0; i < experts.size(); ++i) {
    put<uint32_t>(buffer_, static_cast<uint32_t>(experts[i]));
    put<float>(buffer_, weights[i]);
  }
  put<float>(buffer_, margin);
  if (!predicted.empty()) {
    put<uint8_t>(buffer_, static_cast<uint8_t>(predicted.size()));
    for (int32_t e : predicted) put<uint32_t>(buffer_, static_cast<uint32_t>(e));
  }
  end_record();
}

void TraceWriter::weight_load(const WeightLoadRecord& r, uint32_t tensor_id) {
  begin_record(RecordKind::WEIGHT_LOAD);
  put<uint32_t>(buffer_, r.step);
  put<uint32_t>(buffer_, r.node);
  put<uint32_t>(buffer_, tensor_id);
  put<int32_t>(buffer_, r.expert);
  put<uint64_t>(buffer_, r.offset);
  put<uint64_t>(buffer_, r.bytes);
  put<uint64_t>(buffer_, r.start_ns);
  put<uint64_t>(buffer_, r.end_ns);
  put<uint64_t>(buffer_, r.wait_ns);
  put<uint8_t>(buffer_, static_cast<uint8_t>((r.hit ? 1 : 0) | (r.prefetch ? 2 : 0)));
  end_record();
}

void TraceWriter::put_shares(std::span<const uint64_t> times, uint32_t count, uint16_t n_workers) {
  TT_CHECK(times.size() == static_cast<size_t>(count) * n_workers * 2, "{} nodes of {} workers with {} times", count,
           n_workers, times.size());
  uint64_t base = kNoShareNs;
  for (size_t k = 0; k < times.size(); k += 2) base = std::min(base, times[k]);
  if (base == kNoShareNs) base = 0;
  put<uint16_t>(buffer_, n_workers);
  put<uint64_t>(buffer_, base);
  cursors_.assign(n_workers, base);
  uint8_t* end = buffer_.tail(times.size() * kMaxVarintBytes);
  end = encode_shares(times.data(), count, n_workers, cursors_.data(), end);
  TT_CHECK(end != nullptr, "a share ends before it starts");
  buffer_.append(end);
}

void TraceWriter::op(const OpRecord& r, const uint32_t* ids, std::span<const uint64_t> times) {
  const uint32_t name_id = ids[0], out_id = ids[1];
  auto put_tensor = [&](const TensorRecord& t, uint32_t id) {
    put<uint32_t>(buffer_, id);
    put<uint8_t>(buffer_, static_cast<uint8_t>(t.type));
    put<uint8_t>(buffer_, static_cast<uint8_t>(t.pool));
    for (int d = 0; d < 4; ++d) put<int64_t>(buffer_, t.ne[d]);
    put<int32_t>(buffer_, t.buffer_id);
    put<uint64_t>(buffer_, t.offset);
    put<uint64_t>(buffer_, t.bytes);
  };
  const auto n_workers = static_cast<uint16_t>(times.size() / 2);
  begin_record(RecordKind::OP);
  put<uint32_t>(buffer_, r.step);
  put<uint32_t>(buffer_, r.node);
  put<uint8_t>(buffer_, static_cast<uint8_t>(r.op));
  put<int16_t>(buffer_, r.layer);
  put_shares(times, 1, n_workers);
  put<uint32_t>(buffer_, name_id);
  put_tensor(r.out, out_id);
  put_range(buffer_, r.write);
  put<uint16_t>(buffer_, static_cast<uint16_t>(r.inputs.size()));
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    put_tensor(r.inputs[i], ids[2 + i]);
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
  if (!op_is_view(r.op))
    for (size_t k = 0; k < times.size(); k += 2) span_count_ += times[k] != kNoShareNs;
}

void TraceWriter::ops(const OpsRun& run, std::span<const uint64_t> times, std::span<const Moved> moved,
                      uint64_t n_spans) {
  begin_record(RecordKind::OPS);
  put<uint32_t>(buffer_, run.step);
  put<uint32_t>(buffer_, run.first_node);
  put<uint32_t>(buffer_, run.count);
  size_t bound = kMaxVarintBytes;
  for (const Moved& m : moved) bound += (2 + 2 * m.changes.size()) * kMaxVarintBytes;
  uint8_t* p = put_varint(buffer_.tail(bound), moved.size());
  for (const Moved& m : moved) {
    TT_CHECK(m.node >= run.first_node && m.node - run.first_node < run.count, "moved node {} outside the run", m.node);
    p = put_varint(p, m.node - run.first_node);
    p = put_varint(p, m.changes.size());
    for (const auto& [field, delta] : m.changes) {
      p = put_varint(p, field);
      p = put_varint(p, zigzag(static_cast<int64_t>(delta)));
    }
  }
  buffer_.append(p);
  put_shares(times, run.count, run.n_workers);
  end_record();
  op_count_ += run.count;
  span_count_ += n_spans;
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
  std::memcpy(&out.version, data.data() + 8, 4);
  if (out.version < kVersion)
    fail(
        "'{}': trace format version {} was written by an older tensortrace; this one reads version {} (run the "
        "experiment again, or read it with the tensortrace that wrote it)",
        path, out.version, kVersion);
  if (out.version > kVersion)
    fail("'{}': trace format version {} is newer than this tensortrace reads (version {})", path, out.version,
         kVersion);
  std::vector<std::string> strings;
  // By node index: the node's most recent record (OPS restores from it) and its stride (the changes of its last move;
  // empty: none).
  std::vector<OpRecord> last_op;
  std::vector<std::vector<uint64_t>> stride;
  std::vector<uint64_t> fields;   // scratch
  std::vector<uint64_t> cursors;  // each worker's previous share's end
  // An OPS record's moved nodes: offset in the run, and their changes in `changes` from change_begin.
  std::vector<uint32_t> moved_offset, change_begin;
  std::vector<std::pair<uint32_t, uint64_t>> changes;
  auto remember = [&](const OpRecord& o) {
    if (o.node >= kMaxNodes) fail("node index {} beyond any graph ({} nodes at most)", o.node, kMaxNodes);
    if (o.node >= last_op.size()) last_op.resize(o.node + 1), stride.resize(o.node + 1);
    last_op[o.node] = o;
  };
  auto previous = [&](uint32_t node, uint32_t step) -> const OpRecord& {
    if (node >= last_op.size() || last_op[node].op == OpKind::kCount)
      fail("OPS of node {} (step {}) before any OP record of that node", node, step);
    return last_op[node];
  };
  auto str = [&](uint32_t id) -> const std::string& {
    if (id >= strings.size()) fail("'{}': record refers to undefined string {}", path, id);
    return strings[id];
  };
  // An op record's step: the one begun last and not ended, whose phase and positions its ops take.
  auto open_step = [&](uint32_t step) -> const StepMarker& {
    if (out.steps.empty() || out.steps.back().step != step || out.steps.back().ended)
      fail("op record of step {} outside that step's STEP_BEGIN and STEP_END", step);
    return out.steps.back();
  };
  auto truncated = [&](std::string reason) {
    out.complete = false;
    out.stop_reason = std::move(reason);
  };
  // Blocks, each verified when reading reaches it; the records of the block being read (at byte `block`) end at
  // `end`, and `whole` says whether they are all in the file.
  size_t pos = kHeaderBytes, end = pos, block = 0;
  bool whole = false;
  // A record not whole before `end`: corruption inside a whole block, else where the file is cut.
  auto cut_record = [&](size_t at) {
    if (whole) fail("'{}': the block at byte {} ends inside a record", path, block);
    // A cut block's records running into a block header: its length was corrupt, not the file cut.
    if (data.size() - at >= 4 && load<uint32_t>(data.data() + at) == kBlockMagic)
      fail("'{}': the block at byte {} runs past the end of the file into a block at byte {}", path, block, at);
  };
  while (pos < data.size()) {
    if (pos == end) {  // the next block
      const BlockAt b = block_at(data, pos);
      if (b.state == BlockAt::NOT_A_BLOCK) fail("'{}': no block at byte {} (magic {:08x})", path, pos, b.magic);
      block = pos;
      if (data.size() - pos < kBlockHeaderBytes) {
        truncated(fmt::format("file ends inside the block at byte {} (in its header)", block));
        break;
      }
      pos += kBlockHeaderBytes;
      whole = b.state == BlockAt::WHOLE;
      // The last block, cut short (a killed run): its whole records are read, unverified.
      if (!whole)
        truncated(fmt::format("file ends inside the block at byte {} ({} of its {} bytes of records present)", block,
                              data.size() - pos, b.length));
      else if (xxh3_64(data.data() + pos, b.length) != b.checksum)
        fail("'{}': checksum mismatch in the block at byte {} ({} bytes of records)", path, block, b.length);
      end = whole ? pos + b.length : data.size();
      continue;
    }
    if (end - pos < 5) {
      cut_record(pos);
      break;
    }
    uint32_t len;
    std::memcpy(&len, data.data() + pos, 4);
    const auto kind = static_cast<RecordKind>(data[pos + 4]);
    if (end - pos - 5 < len) {
      cut_record(pos);
      break;
    }
    Reader r(data.data() + pos + 5, len);
    // The shares' header of `count` nodes: the workers (returned) and the cursors' base.
    auto shares_header = [&](uint32_t count) {
      const uint16_t n_workers = r.get<uint16_t>();
      const uint64_t base = r.get<uint64_t>();
      // Every share costs at least a byte: a record cannot stand for more shares than its bytes hold.
      if (n_workers == 0 || n_workers > kMaxWorkers) fail("shares of {} workers (1 to {})", n_workers, kMaxWorkers);
      if (static_cast<uint64_t>(count) * n_workers > r.remaining()) fail("{} nodes exceed the record", count);
      cursors.assign(n_workers, base);
      return n_workers;
    };
    // The shares of the `count` records at `ops`: each one's thread, worker count and times, and a SpanRecord per share
    // of a non-view node.
    auto read_shares = [&](OpRecord* ops, uint32_t count, uint16_t n_workers) {
      for (OpRecord* o = ops; o != ops + count; ++o) {
        uint64_t start = UINT64_MAX, last_end = 0;
        int first_worker = -1;
        o->n_threads = 0;
        for (uint16_t w = 0; w < n_workers; ++w) {
          const uint64_t g = r.get_varint();
          if (g == 0) continue;  // no share
          const uint64_t s = cursors[w] + static_cast<uint64_t>(unzigzag(g - 1)), e = s + r.get_varint();
          if (e < s) fail("node {}: worker {}'s share ends past 2^64 ns", o->node, w);
          cursors[w] = e;
          if (first_worker < 0) first_worker = w;
          start = std::min(start, s);
          last_end = std::max(last_end, e);
          if (op_is_view(o->op)) continue;
          ++o->n_threads;
          out.spans.push_back({o->step, o->node, w, s, e});
        }
        o->thread = static_cast<uint16_t>(std::max(first_worker, 0));
        o->start_ns = start == UINT64_MAX ? 0 : start;
        o->end_ns = last_end == 0 ? o->start_ns : last_end;
      }
    };
    try {
      switch (kind) {
        case RecordKind::STRING: {
          uint32_t id = r.get<uint32_t>();
          uint16_t n = r.get<uint16_t>();
          if (id != strings.size()) fail("string id {} out of order", id);
          strings.push_back(r.bytes(n));
          break;
        }
        case RecordKind::STEP_BEGIN: {
          StepMarker m;
          m.step = r.get<uint32_t>();
          // Steps are numbered 0, 1, ... in order: consumers index tables by step number.
          if (m.step != out.steps.size())
            fail("STEP_BEGIN of step {} where step {} was expected", m.step, out.steps.size());
          if (!out.steps.empty() && !out.steps.back().ended)
            fail("STEP_BEGIN of step {} before the end of step {}", m.step, out.steps.back().step);
          m.phase = get_phase(r);
          m.pos_begin = r.get<int32_t>();
          m.pos_end = r.get<int32_t>();
          m.start_ns = r.get<uint64_t>();
          out.steps.push_back(m);
          break;
        }
        case RecordKind::STEP_END: {
          uint32_t step = r.get<uint32_t>();
          if (out.steps.empty() || out.steps.back().step != step) fail("STEP_END for step {} without its begin", step);
          StepMarker& m = out.steps.back();
          if (m.ended) fail("second STEP_END for step {}", step);
          m.end_ns = r.get<uint64_t>();
          m.token = r.get<int32_t>();
          m.probability = r.get<float>();
          m.ended = true;
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
          const StepMarker& m = open_step(o.step);
          o.phase = m.phase, o.pos_begin = m.pos_begin, o.pos_end = m.pos_end;
          o.node = r.get<uint32_t>();
          if (o.node >= kMaxNodes) fail("node index {} beyond any graph ({} nodes at most)", o.node, kMaxNodes);
          o.op = get_op(r);
          o.layer = r.get<int16_t>();
          read_shares(&o, 1, shares_header(1));
          o.name = str(r.get<uint32_t>());
          get_tensor(o.out);
          o.write = get_range(r);
          uint16_t n_inputs = r.get<uint16_t>();
          o.inputs.resize(n_inputs);
          for (TensorRecord& t : o.inputs) {
            get_tensor(t);
            uint32_t n_ranges = r.get<uint32_t>();
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
          // Fields fix the length: more bytes are a layout this reader does not know.
          if (r.remaining() != 0) fail("OP record of node {} has {} bytes past its fields", o.node, r.remaining());
          remember(o);
          stride[o.node].clear();
          out.ops.push_back(std::move(o));
          break;
        }
        case RecordKind::OPS: {
          const uint32_t step = r.get<uint32_t>();
          const StepMarker& m = open_step(step);
          const uint32_t first = r.get<uint32_t>(), count = r.get<uint32_t>();
          if (first >= kMaxNodes || count > kMaxNodes - first)
            fail("OPS record of nodes {} to {} ({} nodes at most)", first, uint64_t{first} + count, kMaxNodes);
          // Each moved node and change costs at least two bytes: counts past the record are corruption.
          const uint64_t n_moved = r.get_varint();
          if (n_moved > count || n_moved > r.remaining()) fail("{} moved nodes in a run of {}", n_moved, count);
          moved_offset.clear(), change_begin.clear(), changes.clear();
          for (uint64_t k = 0; k < n_moved; ++k) {
            const uint64_t offset = r.get_varint();
            if (offset >= count || (k > 0 && offset <= moved_offset.back()))
              fail("moved node {} of a run of {} out of order", offset, count);
            const uint64_t n_changes = r.get_varint();
            if (n_changes > r.remaining()) fail("{} changes exceed the record", n_changes);
            moved_offset.push_back(static_cast<uint32_t>(offset));
            change_begin.push_back(static_cast<uint32_t>(changes.size()));
            for (uint64_t c = 0; c < n_changes; ++c) {
              const uint64_t field = r.get_varint();
              if (field > UINT32_MAX || (c > 0 && field <= changes.back().first))
                fail("changed field {} of node {} out of order", field, first + offset);
              changes.emplace_back(static_cast<uint32_t>(field), static_cast<uint64_t>(unzigzag(r.get_varint())));
            }
          }
          change_begin.push_back(static_cast<uint32_t>(changes.size()));
          const uint16_t n_workers = shares_header(count);
          const size_t at = out.ops.size();
          size_t next_moved = 0;
          for (uint32_t node = first; node - first < count; ++node) {
            OpRecord o = previous(node, step);
            std::vector<uint64_t>& d = stride[node];
            const bool moves = next_moved < moved_offset.size() && moved_offset[next_moved] == node - first;
            if (moves || !d.empty()) placement_fields(o, fields);
            if (moves) {  // the listed changes, which become the stride (none: the node stopped moving)
              d.assign(change_begin[next_moved] == change_begin[next_moved + 1] ? 0 : fields.size(), 0);
              for (uint32_t c = change_begin[next_moved]; c < change_begin[next_moved + 1]; ++c) {
                const auto [field, delta] = changes[c];
                if (field >= fields.size())
                  fail("change to field {} of node {}, which has {}", field, node, fields.size());
                d[field] = delta;
              }
              ++next_moved;
            }
            if (!d.empty()) {
              for (size_t k = 0; k < d.size(); ++k) fields[k] += d[k];
              set_placement_fields(o, fields);
            }
            o.step = step, o.phase = m.phase, o.pos_begin = m.pos_begin, o.pos_end = m.pos_end;
            out.ops.push_back(std::move(o));
          }
          read_shares(out.ops.data() + at, count, n_workers);
          for (size_t k = at; k < out.ops.size(); ++k) last_op[out.ops[k].node] = out.ops[k];
          if (r.remaining() != 0) fail("OPS record has {} bytes past its fields", r.remaining());
          break;
        }
        case RecordKind::IO: {
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
          out.io.push_back(std::move(io));
          break;
        }
        case RecordKind::ROUTING: {
          RoutingRecord x;
          x.step = r.get<uint32_t>();
          x.layer = r.get<uint16_t>();
          x.token_pos = r.get<int32_t>();
          const uint8_t k = r.get<uint8_t>();
          if (k == 0 || k > kMaxRoutedExperts) fail("ROUTING record of {} experts (1 to {})", k, kMaxRoutedExperts);
          // The record holds exactly k (expert, weight) pairs and the margin, then optionally p predicted experts.
          auto bad_length = [&] {
            fail("ROUTING record of {} experts is {} bytes, expected {}, or {} + 4p with p (1 to {}) predicted experts",
                 k, len, 15 + k * 8u, 16 + k * 8u, kMaxRoutedExperts);
          };
          if (r.remaining() < k * 8u + 4) bad_length();
          x.experts.resize(k);
          x.weights.resize(k);
          for (uint8_t i = 0; i < k; ++i) {
            x.experts[i] = r.get<uint32_t>();
            x.weights[i] = r.get<float>();
          }
          x.margin = r.get<float>();
          if (r.remaining() > 0) {
            const uint8_t p = r.get<uint8_t>();
            if (p == 0 || p > kMaxRoutedExperts || r.remaining() != p * 4u) bad_length();
            x.predicted.resize(p);
            for (uint32_t& e : x.predicted) e = r.get<uint32_t>();
          }
          out.routing.push_back(std::move(x));
          break;
        }
        case RecordKind::WEIGHT_LOAD: {
          if (len != kWeightLoadBytes) fail("WEIGHT_LOAD record of {} bytes, expected {}", len, kWeightLoadBytes);
          WeightLoadRecord w;
          w.step = r.get<uint32_t>();
          w.node = r.get<uint32_t>();
          w.tensor = str(r.get<uint32_t>());
          w.expert = r.get<int32_t>();
          w.offset = r.get<uint64_t>();
          w.bytes = r.get<uint64_t>();
          w.start_ns = r.get<uint64_t>();
          w.end_ns = r.get<uint64_t>();
          w.wait_ns = r.get<uint64_t>();
          const uint8_t flags = r.get<uint8_t>();
          if (flags > 3) fail("WEIGHT_LOAD record with flags {} (1: hit, 2: prefetch)", flags);
          if (w.expert < -1) fail("WEIGHT_LOAD record of expert {}", w.expert);
          if (w.end_ns < w.start_ns)
            fail("WEIGHT_LOAD record ending at {} ns before its start at {} ns", w.end_ns, w.start_ns);
          w.hit = flags & 1, w.prefetch = flags & 2;
          out.weight_loads.push_back(std::move(w));
          break;
        }
        default:
          fail("unknown record kind {}", static_cast<int>(kind));
      }
    } catch (const Error& e) {
      fail("'{}': corrupt record at byte {}: {}", path, pos, e.what());
    }
    pos += 5 + len;
  }
  out.stopped_at = pos;
  if (out.complete && !out.steps.empty() && !out.steps.back().ended) {
    out.complete = false;
    out.stop_reason = fmt::format("step {} has no end record (the run stopped during it)", out.steps.back().step);
  }
  return out;
}

}  // namespace tt::trace
