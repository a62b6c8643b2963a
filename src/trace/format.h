// The binary trace (trace.bin) of a run directory: documented in docs/trace-format.md.
// A file header, then blocks (version 8), one per flush: a block header with the XXH3-64 of its payload, then whole
// length-prefixed records, so a flipped bit is found (by block) and a run killed midway leaves every complete record
// readable. Strings (tensor names) are interned: a STRING record defines an id before first use.
#pragma once

#include <cstdint>

namespace tt::trace {

constexpr char kMagic[8] = {'T', 'T', 'T', 'R', 'A', 'C', 'E', '\0'};
// Written: 9. Still read: 1 (no IO), 2 (no OP_REPEAT), 3 (no OP_REPEATS), 4 (no OP_DELTA, OP_ADVANCES), 5 (no
// OP_ADVANCES_PACKED), 6 (no ROUTING), 7 (records right after the file header, no blocks), 8 (no WEIGHT_LOAD).
constexpr uint32_t kVersion = 9;
constexpr uint32_t kMinVersion = 1;
// OP records of versions up to this carry u16 n_fused + u8 op kinds before n_inputs (no tensortrace wrote any kinds).
constexpr uint32_t kLastFusedVersion = 7;
constexpr uint32_t kHeaderBytes = 16;  // magic, version, reserved

// Version 8 on: after the file header, blocks of u32 kBlockMagic, u32 payload length, u64 XXH3-64 (seed 0) of the
// payload, then the payload: whole records (a record never straddles two blocks).
constexpr uint32_t kFirstBlockVersion = 8;
constexpr uint32_t kBlockMagic = 0x4B425454;  // "TTBK"
constexpr uint32_t kBlockHeaderBytes = 16;

// Each record: u32 payload length, u8 kind, payload (little-endian).
enum class RecordKind : uint8_t {
  STRING = 1,      // u32 id, u16 length, bytes
  STEP_BEGIN = 2,  // u32 step, u8 phase, i32 pos_begin, i32 pos_end, u64 t_ns
  OP = 3,          // one executed graph node (see OpRecord)
  SPAN = 4,        // u32 step, u32 node, u16 thread, u64 start_ns, u64 end_ns: one worker's share of a node
  STEP_END = 5,    // u32 step, u64 t_ns, i32 token (-1: none), f32 probability
  IO = 6,          // version 2, with `run --io-trace`: page-cache residency and storage reads of one op (IoRecord)
  // version 3: u32 step, u32 node, u8 phase, i32 pos_begin, i32 pos_end, u16 thread, u16 n_threads, u64 start_ns,
  // u64 end_ns: the node's previous OP record again with these fields replaced (see docs/trace-format.md).
  OP_REPEAT = 7,
  // version 4: u32 step, u8 phase, i32 pos_begin, i32 pos_end, u32 first_node, u32 count, u16 n_threads,
  // u64 base_ns, then per node and worker u32 start, u32 end (ns after base_ns; both 0xFFFFFFFF: no share):
  // OP_REPEAT of `count` consecutive nodes with every worker's span (SPAN records for non-view nodes).
  OP_REPEATS = 8,
  // version 5: u32 step, u32 node, u8 phase, i32 pos_begin, i32 pos_end, u16 thread, u16 n_threads, u64 start_ns,
  // u64 end_ns, u32 n_changes, then per change u32 field, u64 delta: the node's previous record with these fields
  // replaced and delta added (mod 2^64) to each listed field of its placement (op_fields); the deltas become the
  // node's stride (unlisted fields: 0).
  OP_DELTA = 9,
  // version 5: OP_REPEATS' layout; each node's previous record with its stride added to its placement fields
  // (a node's stride is 0 after an OP record): a KV-cache op advancing one position per step needs no more.
  OP_ADVANCES = 10,
  // version 6: OP_ADVANCES with the times packed, what the tracer writes instead (a quarter of the bytes): the same
  // header, then per node and worker an unsigned LEB128 varint g, 0 when the worker had no share; else
  // g = zigzag(start - cursor) + 1 followed by a varint end - start. Each worker's cursor starts at base_ns and
  // moves to the end of each of its shares.
  OP_ADVANCES_PACKED = 11,
  // version 7, mixture-of-experts runs: u32 step, u16 layer, i32 token_pos, u8 k, then k times (u32 expert,
  // f32 weight), f32 margin, then with `run --moe-predict` optionally u8 p, p times u32 expert: one token's routing in
  // one layer, and the experts the previous layer predicted for it (RoutingRecord).
  ROUTING = 12,
  // version 9, `run --weight-budget`: u32 step, u32 node, u32 tensor (string id), i32 expert (-1: whole tensor),
  // u64 offset, u64 bytes, u64 start_ns, u64 end_ns, u64 wait_ns, u8 flags (1: hit, 2: prefetch): one access of a
  // node to a weight unit of the run's cache (WeightLoadRecord).
  WEIGHT_LOAD = 13,
};
constexpr uint32_t kWeightLoadBytes = 57;  // a WEIGHT_LOAD record's payload
// Experts a token may be routed to in a ROUTING record (llama.cpp's models use up to 8 of up to 256).
constexpr uint8_t kMaxRoutedExperts = 64;
constexpr uint32_t kNoShare = 0xFFFFFFFF;  // OP_REPEATS, OP_ADVANCES: a worker without a share of the node
// OP_ADVANCES_PACKED's signed gaps as unsigned numbers: small differences of either sign stay small.
constexpr uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
constexpr int64_t unzigzag(uint64_t u) { return static_cast<int64_t>((u >> 1) ^ (0 - (u & 1))); }
// Nodes a graph may have: the reader keeps each node's latest record by index, so an index past this is corruption,
// not an allocation (the largest llama-family graphs have a few thousand nodes; the tracer refuses bigger ones).
constexpr uint32_t kMaxNodes = 1u << 16;

}  // namespace tt::trace
