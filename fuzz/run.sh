#!/usr/bin/env bash
# Runs one fuzzer: fuzz/run.sh BUILD_DIR SECONDS [gguf|trace|rundir]  (default gguf)
#   gguf:   fuzz_gguf on the seeds in fuzz/corpus/ with fuzz/gguf.dict
#   trace:  fuzz_trace on the trace.bin seeds in fuzz/corpus-trace/
#   rundir: fuzz_rundir on the packed run directories in fuzz/corpus-rundir/ (fuzz/pack_rundir.py)
# Works on a scratch copy of the seed corpus (never modified), fails on any crash, leak, timeout or sanitizer
# report, keeps the reproducer in BUILD_DIR/fuzz-artifacts/ and prints a one-line summary.
set -euo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: fuzz/run.sh BUILD_DIR SECONDS [gguf|trace|rundir]" >&2
  exit 2
fi
build_dir=$1
seconds=$2
what=${3:-gguf}
repo=$(cd "$(dirname "$0")/.." && pwd)
case $what in
  gguf) seeds_dir=$repo/fuzz/corpus dict=(-dict="$repo/fuzz/gguf.dict") ;;
  trace) seeds_dir=$repo/fuzz/corpus-trace dict=() ;;
  rundir) seeds_dir=$repo/fuzz/corpus-rundir dict=() ;;
  *)
    echo "fuzz/run.sh: unknown target '$what' (gguf, trace or rundir)" >&2
    exit 2
    ;;
esac
name=fuzz_$what
fuzzer=$build_dir/fuzz/$name
if [ ! -x "$fuzzer" ]; then
  echo "fuzz: $fuzzer not found (build it: make fuzz)" >&2
  exit 1
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/corpus" "$scratch/artifacts"
cp "$seeds_dir"/* "$scratch/corpus/"
seeds=$(ls "$scratch/corpus" | wc -l)

status=0
"$fuzzer" "$scratch/corpus" \
  "${dict[@]}" \
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
  cp "$scratch/log" "$build_dir/fuzz-artifacts/$name.log"
  # The sanitizer or libFuzzer report: from the first error line on.
  grep -n -m1 -E 'ERROR|runtime error|deadly signal|timeout|out-of-memory' "$scratch/log" >/dev/null &&
    sed -n "$(grep -n -m1 -E 'ERROR|runtime error|deadly signal|timeout|out-of-memory' "$scratch/log" | cut -d: -f1),\$p" \
      "$scratch/log" | head -60 >&2
  echo "fuzz: $name FAILED (exit $status) after ${execs:-?} executions; $findings reproducer(s) and the log" \
    "are in $build_dir/fuzz-artifacts/ (replay: $fuzzer FILE)" >&2
  exit 1
fi
echo "fuzz: $name ok: ${execs:-?} executions in ${seconds}s, $seeds seeds grew to $corpus corpus inputs, 0 crashes"
