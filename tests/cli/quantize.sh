#!/usr/bin/env bash
# `tensortrace quantize`: bad input gives one error line and no output file; a good run prints one progress line
# per tensor on stderr and writes the file through a temporary name.
# Usage: tests/cli/quantize.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
failures=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-quantize.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# shellcheck source=lib/expect_error.sh
source "$(dirname "$0")/lib/expect_error.sh"

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

f32="$repo/models/stories260K.gguf"  # F32 tensors, rows of 64 and (ffn_down) 172
expect_error "no arguments" "input is required" quantize
expect_error "no type" "type is required" quantize "$f32" "$scratch/out.gguf"
expect_error "a missing file" "cannot open '$scratch/missing.gguf': No such file or directory" \
  quantize "$scratch/missing.gguf" "$scratch/out.gguf" Q8_0
expect_error "an unknown type" "unknown type 'Q9_9' \(choose one of F16, BF16, Q8_0, .*IQ4_XS\)" \
  quantize "$f32" "$scratch/out.gguf" Q9_9
expect_error "a quantized source" \
  "tensor '[a-z_.0-9]+' is Q4_0: requantizing a quantized source is not supported \(sources: F32, F16, BF16\)" \
  quantize "$repo/models/TinyLLama-v0.Q4_0.gguf" "$scratch/out.gguf" Q8_0
# ffn_down's rows of 172 are not whole Q8_0 blocks, and Q8_0 has no fallback (llama-quantize refuses it too).
expect_error "rows without a fallback type" \
  "tensor 'blk.0.ffn_down.weight': rows of 172 elements are not whole Q8_0 blocks and Q8_0 has no fallback type" \
  quantize "$f32" "$scratch/out.gguf" Q8_0
expect_error "zero threads" "threads" quantize -t 0 "$f32" "$scratch/out.gguf" Q8_0
[ -e "$scratch/out.gguf" ] && fail "a failed run left out.gguf"
ls "$scratch"/out.gguf.tmp-* >/dev/null 2>&1 && fail "a failed run left a temporary file"

# A good run: progress per tensor on stderr, one summary line on stdout.
if "$bin" quantize -t 2 "$f32" "$scratch/out.gguf" f16 >"$scratch/stdout" 2>"$scratch/stderr"; then
  lines=$(grep -c '^\[ *[0-9]\+/[0-9]\+\] ' "$scratch/stderr")
  last=$(tail -n 1 "$scratch/stderr")
  [[ "$last" =~ ^\[([0-9]+)/([0-9]+)\]\ ([a-z_.0-9]+)\ +F32\ +-\>\ +[A-Z0-9_]+\ +[0-9]+\ +-\>\ +[0-9]+\ bytes$ ]] ||
    fail "progress line: '$last'"
  [ "${BASH_REMATCH[1]:-x}" = "${BASH_REMATCH[2]:-y}" ] || fail "the last progress line is not n/n: '$last'"
  [ "$lines" = "${BASH_REMATCH[2]:-0}" ] || fail "$lines progress lines for ${BASH_REMATCH[2]:-?} tensors"
  grep -q '^F16: [0-9]\+ -> [0-9]\+ bytes of tensor data' "$scratch/stdout" || fail "summary: $(cat "$scratch/stdout")"
  grep -q 'blk.0.attn_q.weight *F32 *-> F16' "$scratch/stderr" || fail "attn_q not converted to F16"
  grep -q 'blk.0.attn_norm.weight *F32 *-> F32' "$scratch/stderr" || fail "a norm was converted"
  "$bin" inspect --kv "$scratch/out.gguf" >"$scratch/inspect"
  grep -q 'general.file_type.* 1$' "$scratch/inspect" || fail "general.file_type is not 1"
  ls "$scratch"/out.gguf.tmp-* >/dev/null 2>&1 && fail "the temporary file is left"
  echo "ok: quantize to F16 ($lines tensors)"
else
  fail "quantize to F16 failed: $(cat "$scratch/stderr")"
fi

expect_error "an existing output" "out.gguf' already exists \(use --overwrite to replace it\)" \
  quantize "$f32" "$scratch/out.gguf" Q4_0
if "$bin" quantize -q --overwrite "$f32" "$scratch/out.gguf" Q4_K_M >/dev/null 2>"$scratch/stderr"; then
  [ -s "$scratch/stderr" ] && fail "--quiet printed: $(head -c 200 "$scratch/stderr")"
  # Rows of 64 are not whole super-blocks: llama-quantize's fallbacks (Q4_K -> Q5_0, Q6_K -> Q8_0).
  "$bin" inspect "$scratch/out.gguf" >"$scratch/inspect"
  grep -q 'blk.0.attn_q.weight  *Q5_0 ' "$scratch/inspect" || fail "no Q5_0 fallback in the Q4_K_M file"
  echo "ok: --overwrite, --quiet"
else
  fail "quantize --overwrite failed: $(cat "$scratch/stderr")"
fi

if [ "$failures" -ne 0 ]; then
  echo "quantize.sh: $failures failure(s)" >&2
  exit 1
fi
echo "quantize.sh: ok"
