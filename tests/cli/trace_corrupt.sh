#!/usr/bin/env bash
# A damaged trace.bin is refused, not read silently: one flipped byte inside a block's records or in its header makes
# `dump`, `analyze` and `export` exit non-zero with one line naming the file, the block's byte offset and the
# problem. A trace cut short (a killed run) still reads up to its last whole record.
# Usage: tests/cli/trace_corrupt.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
failures=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-trace-corrupt.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# shellcheck source=lib/expect_error.sh
source "$(dirname "$0")/lib/expect_error.sh"

"$bin" run -m "$repo/models/stories260K.gguf" -p "Once upon a time" -n 2 --temp 0 -t 1 --no-progress \
  -o "$scratch/run" >/dev/null 2>&1 || { echo "FAIL: demo run" >&2; exit 1; }

# flipped NAME OFFSET: a copy of the run with the byte of trace.bin at OFFSET inverted.
flipped() {
  cp -r "$scratch/run" "$scratch/$1"
  python3 - "$scratch/$1/trace.bin" "$2" <<'PY'
import sys
path, at = sys.argv[1], int(sys.argv[2])
b = bytearray(open(path, "rb").read())
b[at] ^= 0xFF
open(path, "wb").write(b)
PY
}
# The first block starts after the 16-byte file header; its records after the block's 16-byte header.
flipped payload 40
flipped magic 16

for cmd in dump analyze "export --format perfetto -o $scratch/out.json"; do
  # shellcheck disable=SC2086
  set -- $cmd
  sub=$1
  shift
  expect_error "$sub: a flipped byte in a block's records" \
    "payload/trace.bin': checksum mismatch in the block at byte 16" "$sub" "$scratch/payload" "$@"
  expect_error "$sub: a flipped byte in a block's magic" "magic/trace.bin': no block at byte 16" \
    "$sub" "$scratch/magic" "$@"
done

# Cut inside a block: every whole record before the cut is read, and dump says where it stopped.
cp -r "$scratch/run" "$scratch/cut"
size=$(stat -c %s "$scratch/cut/trace.bin")
truncate -s $((size - 7)) "$scratch/cut/trace.bin"
if ! "$bin" dump "$scratch/cut" >"$scratch/out" 2>"$scratch/err"; then
  echo "FAIL: dump of a cut trace: $(cat "$scratch/err")" >&2
  failures=$((failures + 1))
elif ! grep -q "trace ends early at byte [0-9]*: file ends inside the block at byte" "$scratch/out"; then
  echo "FAIL: dump of a cut trace does not say where it stopped: $(tail -1 "$scratch/out")" >&2
  failures=$((failures + 1))
else
  echo "ok: a cut trace: $(tail -1 "$scratch/out")"
fi

[ "$failures" -eq 0 ] && echo "trace corruption: all checks passed"
exit $((failures > 0))
