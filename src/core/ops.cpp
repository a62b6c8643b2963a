#include "core/ops.h"

namespace tt {

const char* op_name(OpKind op) {
  switch (op) {
    case OpKind::GET_ROWS:
      return "GET_ROWS";
    case OpKind::RMS_NORM:
      return "RMS_NORM";
    case OpKind::MUL:
      return "MUL";
    case OpKind::ADD:
      return "ADD";
    case OpKind::MUL_MAT:
      return "MUL_MAT";
    case OpKind::ROPE:
      return "ROPE";
    case OpKind::SET_ROWS:
      return "SET_ROWS";
    case OpKind::FLASH_ATTN_EXT:
      return "FLASH_ATTN_EXT";
    case OpKind::SWIGLU:
      return "SWIGLU";
    case OpKind::RESHAPE:
      return "RESHAPE";
    case OpKind::VIEW:
      return "VIEW";
    case OpKind::PERMUTE:
      return "PERMUTE";
    case OpKind::SOFT_MAX:
      return "SOFT_MAX";
    case OpKind::SIGMOID:
      return "SIGMOID";
    case OpKind::TOP_K:
      return "TOP_K";
    case OpKind::SUM_ROWS:
      return "SUM_ROWS";
    case OpKind::CLAMP:
      return "CLAMP";
    case OpKind::DIV:
      return "DIV";
    case OpKind::SCALE:
      return "SCALE";
    case OpKind::MUL_MAT_ID:
      return "MUL_MAT_ID";
    case OpKind::kCount:
      break;
  }
  return "?";
}

bool op_is_view(OpKind op) { return op == OpKind::RESHAPE || op == OpKind::VIEW || op == OpKind::PERMUTE; }

const char* pool_name(Pool pool) {
  switch (pool) {
    case Pool::MODEL_FILE:
      return "MODEL_FILE";
    case Pool::KV_CACHE:
      return "KV_CACHE";
    case Pool::ACTIVATION:
      return "ACTIVATION";
    case Pool::INPUT:
      return "INPUT";
    case Pool::SCRATCH:
      return "SCRATCH";
  }
  return "?";
}

const char* phase_name(Phase p) { return p == Phase::PROMPT ? "PROMPT" : "GENERATE"; }

}  // namespace tt
