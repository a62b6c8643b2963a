// The binary trace (trace.bin) of a run directory: documented in docs/trace-format.md.
// A file header, then blocks: each a small header (with the XXH3-64 of its bytes) and a zstd-compressed payload of
// whole records, so a run killed midway leaves every complete block readable and a flipped bit is found, by block.
// Strings (tensor names) are interned: a STRING record defines an id before first use.
#pragma once

#include <cstdint>

namespace tt::trace {

constexpr char kMagic[8] = {'T', 'T', 'T', 'R', 'A', 'C', 'E', '\0'};
// Written: 7. Still read: 1 and 2, whose records follow the header without blocks (1: no IO records); 3 to 6, whose
// records depend on earlier ones, are refused by name.
constexpr uint32_t kVersion = 7;
constexpr uint32_t kHeaderBytes = 16;  // magic, version, reserved

// Block header: u32 kBlockMagic, u32 flags, u32 payload bytes (as stored), u32 raw bytes (the records' bytes),
// u64 checksum: XXH3-64 of the payload seeded with XXH3-64 of the header's first 16 bytes.
constexpr uint32_t kBlockMagic = 0x4B4C4254;  // "TBLK"
constexpr uint32_t kBlockHeaderBytes = 24;
constexpr uint32_t kBlockZstd = 1;  // flags: the payload is one zstd frame (else the records themselves)

// Each record: u32 payload length, u8 kind, payload (little-endian).
enum class RecordKind : uint8_t {
  STRING = 1,      // u32 id, u16 length, bytes
  STEP_BEGIN = 2,  // u32 step, u8 phase, i32 pos_begin, i32 pos_end, u64 t_ns
  OP = 3,          // one executed graph node with its workers' shares (see docs/trace-format.md)
  SPAN = 4,        // versions 1-2: u32 step, u32 node, u16 thread, u64 start_ns, u64 end_ns (one worker's share)
  STEP_END = 5,    // u32 step, u64 t_ns, i32 token (-1: none), f32 probability
  IO = 6,          // with `run --io-trace`: page-cache residency and storage reads of one op (IoRecord)
};

}  // namespace tt::trace
