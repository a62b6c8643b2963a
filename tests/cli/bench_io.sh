#!/usr/bin/env bash
# `bench --io -m FILE`: the file's sequential and 4 KiB-random read rates, printed and as JSON (which analyze
# --io-rates reads); a missing model named.
# Usage: tests/cli/bench_io.sh PATH/TO/tensortrace REPO_DIR
set -euo pipefail
bin=$1
repo=$2
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-benchio.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

model="$repo/models/stories260K.gguf"
"$bin" bench --io -m "$model" >"$scratch/out" 2>&1 || fail "bench --io failed: $(cat "$scratch/out")"
grep -Eq "sequential [0-9.]+ MB/s" "$scratch/out" || fail "no sequential rate: $(cat "$scratch/out")"
grep -Eq "4 KiB random [0-9.]+ MB/s" "$scratch/out" || fail "no random rate: $(cat "$scratch/out")"
"$bin" bench --io --json -m "$model" >"$scratch/io.json" 2>/dev/null
python3 - "$scratch/io.json" <<'PY'
import json, sys
io = json.load(open(sys.argv[1]))["io"]
assert io["sequential_bytes_per_s"] > 0 and io["random_4k_bytes_per_s"] > 0, io
assert io["method"] in ("O_DIRECT", "fadvise(DONTNEED)"), io
assert io["random_4k_reads"] > 0 and io["sequential_bytes"] > 0, io
PY
# analyze shows a budgeted run's read rate beside them.
"$bin" run -m "$model" -p "Once" -n 2 --temp 0 -t 1 --no-progress -o "$scratch/run" --weight-budget 50% \
  >/dev/null 2>&1
"$bin" analyze "$scratch/run" --io-rates "$scratch/io.json" >"$scratch/a.txt" 2>/dev/null
grep -Eq "storage \(.*\): sequential [0-9.]+ MB/s, 4 KiB random [0-9.]+ MB/s; this run read at" "$scratch/a.txt" ||
  fail "analyze shows no storage rates: $(cat "$scratch/a.txt")"
if "$bin" bench --io -m "$scratch/missing.gguf" >/dev/null 2>"$scratch/err"; then fail "a missing file was accepted"; fi
grep -q "missing.gguf: cannot open" "$scratch/err" || fail "missing file: $(cat "$scratch/err")"
echo "bench_io.sh: ok"
