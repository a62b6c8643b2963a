// The binary trace (trace.bin) of a run directory: documented in docs/trace-format.md.
// A file header, then blocks, one per flush: a block header with the XXH3-64 of its payload, then whole
// length-prefixed records, so a flipped bit is found (by block) and a run killed midway leaves every complete record
// readable. Strings (tensor names) are interned: a STRING record defines an id before first use.
#pragma once

#include <cstdint>

namespace tt::trace {

constexpr char kMagic[8] = {'T', 'T', 'T', 'R', 'A', 'C', 'E', '\0'};
// The one version written and read; older files are refused by name (their encoding had other op records).
constexpr uint32_t kVersion = 10;
constexpr uint32_t kHeaderBytes = 16;  // magic, version, reserved

// After the file header, blocks of u32 kBlockMagic, u32 payload length, u64 XXH3-64 (seed 0) of the payload, then
// the payload: whole records (a record never straddles two blocks).
constexpr uint32_t kBlockMagic = 0x4B425454;  // "TTBK"
constexpr uint32_t kBlockHeaderBytes = 16;

// Each record: u32 payload length, u8 kind, payload (little-endian). Layouts in docs/trace-format.md.
enum class RecordKind : uint8_t {
  STRING = 1,       // u32 id, u16 length, bytes
  STEP_BEGIN = 2,   // u32 step, u8 phase, i32 pos_begin, i32 pos_end, u64 t_ns
  OP = 3,           // one executed graph node, whole, with its workers' shares (OpRecord, SpanRecord)
  OPS = 4,          // consecutive nodes, each its previous record moved by its stride or by listed changes, and shares
  STEP_END = 5,     // u32 step, u64 t_ns, i32 token (-1: none), f32 probability
  IO = 6,           // `run --io-trace`: page-cache residency and storage reads of one op (IoRecord)
  ROUTING = 7,      // mixture-of-experts runs: one token's routing in one layer (RoutingRecord)
  WEIGHT_LOAD = 8,  // `run --weight-budget`: one access of a node to a weight unit (WeightLoadRecord)
};
constexpr uint32_t kWeightLoadBytes = 57;  // a WEIGHT_LOAD record's payload
// Experts a token may be routed to in a ROUTING record (llama.cpp's models use up to 8 of up to 256).
constexpr uint8_t kMaxRoutedExperts = 64;
// Shares' signed gaps as unsigned numbers: small differences of either sign stay small.
constexpr uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
constexpr int64_t unzigzag(uint64_t u) { return static_cast<int64_t>((u >> 1) ^ (0 - (u & 1))); }
// Nodes a graph may have: the reader keeps each node's latest record by index, so an index past this is corruption,
// not an allocation (the largest llama-family graphs have a few thousand nodes; the tracer refuses bigger ones).
constexpr uint32_t kMaxNodes = 1u << 16;
// Workers a record's shares may name (the reader sizes its cursors by the count).
constexpr uint16_t kMaxWorkers = 1024;

}  // namespace tt::trace
