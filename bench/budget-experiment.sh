#!/usr/bin/env bash
# The weight-budget experiment of docs/analysis.md (issue 41): each model under budgets of 25/50/75/100% of its
# weight bytes, each policy (lru, lfu, least-stale; opt-from the lru run), with and without `--prefetch next-layer`
# (opt-from without: its future is the demand stream). Per run: tokens/s of the generation steps, bytes read a
# step, hit rate measured and replayed (analyze), stall share (the ops' waits for weights over the steps' time).
# Writes the table (Markdown) and a plot of tokens/s and stall share against the budget (SVG) to OUT_DIR, and the
# storage read rates of each model's file (bench --io) into the table's heading.
# Usage: bench/budget-experiment.sh [-b TENSORTRACE (build/tensortrace)] [-o OUT_DIR (docs/figures)] [-d]
#   -d: --direct-io (reads past the page cache: storage's rate, slower); default: reads the page cache may answer.
# Models: ../shared/models/synth-qwen3moe-256.Q4_K_M.gguf (-n 32) and ../bench-models/synth-llama-1b.Q4_K_M.gguf
# (-n 16; bench/make-models.sh makes it). Run from the repository's root.
set -euo pipefail
bin=build/tensortrace
out=docs/figures
direct=()
while getopts "b:o:d" o; do
  case $o in
    b) bin=$OPTARG ;;
    o) out=$OPTARG ;;
    d) direct=(--direct-io) ;;
    *)
      echo "usage: bench/budget-experiment.sh [-b TENSORTRACE] [-o OUT_DIR] [-d]" >&2
      exit 2
      ;;
  esac
done
models=("../shared/models/synth-qwen3moe-256.Q4_K_M.gguf:32" "../bench-models/synth-llama-1b.Q4_K_M.gguf:16")
for need in "$bin" "${models[@]%%:*}"; do
  [ -e "$need" ] || {
    echo "budget-experiment.sh: missing $need" >&2
    exit 1
  }
done
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/tt-budget-exp.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$work/load"
for entry in "${models[@]}"; do
  model=${entry%%:*}
  n=${entry##*:}
  name=$(basename "$model" .gguf)
  "$bin" bench --io --json -m "$model" >"$work/$name.io.json"
  for budget in 25 50 75 100; do
    for policy in lru lfu least-stale opt; do
      for prefetch in none next-layer; do
        [ "$policy" = opt ] && [ "$prefetch" != none ] && continue
        dir="$work/$name/$budget-$policy-$prefetch"
        mkdir -p "$(dirname "$dir")"
        cp=(--cache-policy "$policy")
        [ "$policy" = opt ] && cp=(--cache-policy "opt-from:$work/$name/$budget-lru-none")
        "$bin" run -m "$model" -p "Once upon a time" -n "$n" --temp 0 -t 2 --no-progress -o "$dir" \
          --weight-budget "$budget%" "${cp[@]}" --prefetch "$prefetch" "${direct[@]}" >/dev/null 2>"$dir.log" ||
          { cat "$dir.log" >&2; exit 1; }
        "$bin" analyze "$dir" --json --io-rates "$work/$name.io.json" >"$dir.analysis.json"
        echo "$name $budget% $policy $prefetch: done ($(($(date +%s) - start)) s)"
      done
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$work/load"
python3 "$(dirname "$0")/budget_experiment.py" "$work" "$out" "${direct[*]:-page cache}"
echo "budget-experiment.sh: $(($(date +%s) - start)) s; wrote $out/budget-experiment.md and .svg"
