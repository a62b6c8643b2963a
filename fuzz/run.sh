#!/usr/bin/env bash
# Runs the GGUF fuzzer: fuzz/run.sh BUILD_DIR SECONDS
# Works on a scratch copy of the seed corpus (fuzz/corpus/ is never modified), fails on any crash, leak, timeout
# or sanitizer report, keeps the reproducer in BUILD_DIR/fuzz-artifacts/ and prints a one-line summary.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: fuzz/run.sh BUILD_DIR SECONDS" >&2
  exit 2
fi
build_dir=$1
seconds=$2
repo=$(cd "$(dirname "$0")/.." && pwd)
fuzzer=$build_dir/fuzz/fuzz_gguf
if [ ! -x "$fuzzer" ]; then
  echo "fuzz: $fuzzer not found (build it: make fuzz)" >&2
  exit 1
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/corpus" "$scratch/artifacts"
cp "$repo"/fuzz/corpus/* "$scratch/corpus/"
seeds=$(ls "$scratch/corpus" | wc -l)

status=0
"$fuzzer" "$scratch/corpus" \
  -dict="$repo/fuzz/gguf.dict" \
  -max_total_time="$seconds" \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -print_final_stats=1 \
  -artifact_prefix="$scratch/artifacts/" >"$scratch/log" 2>&1 || status=$?

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/log" | tail -1)
corpus=$(ls "$scratch/corpus" | wc -l)
findings=$(ls "$scratch/artifacts" | wc -l)
if [ "$status" -ne 0 ] || [ "$findings" -ne 0 ]; then
  mkdir -p "$build_dir/fuzz-artifacts"
  cp "$scratch"/artifacts/* "$build_dir/fuzz-artifacts/" 2>/dev/null || true
  cp "$scratch/log" "$build_dir/fuzz-artifacts/fuzz.log"
  # The sanitizer or libFuzzer report: from the first error line on.
  grep -n -m1 -E 'ERROR|runtime error|deadly signal|timeout|out-of-memory' "$scratch/log" >/dev/null &&
    sed -n "$(grep -n -m1 -E 'ERROR|runtime error|deadly signal|timeout|out-of-memory' "$scratch/log" | cut -d: -f1),\$p" \
      "$scratch/log" | head -60 >&2
  echo "fuzz: fuzz_gguf FAILED (exit $status) after ${execs:-?} executions; $findings reproducer(s) and the log" \
    "are in $build_dir/fuzz-artifacts/ (replay: $fuzzer FILE)" >&2
  exit 1
fi
echo "fuzz: fuzz_gguf ok: ${execs:-?} executions in ${seconds}s, $seeds seeds grew to $corpus corpus inputs, 0 crashes"
