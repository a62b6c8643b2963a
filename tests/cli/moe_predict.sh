#!/usr/bin/env bash
# `run --moe-predict` and analyze's prediction recall, prefetching expert-cache replay and pooled runs, end to end:
# the option is refused for a dense model; with ../shared, a mixture-of-experts run records it, analyze reports both
# predictors and prefetches by the predictions, pools two runs, and refuses pooling without --expert-cache, runs of
# two models and prefetching by predictions a run did not record (one stderr line each, non-zero exit).
# Usage: tests/cli/moe_predict.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
failures=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-moe-predict.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# shellcheck source=lib/expect_error.sh
source "$(dirname "$0")/lib/expect_error.sh"
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# json FILE EXPR: EXPR evaluated in Python on the JSON document j.
json() { python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

expect_error "--moe-predict on a dense model" "needs a mixture-of-experts model; this llama model has no experts" \
  run --no-progress -m "$repo/models/TinyLLama-v0.Q4_0.gguf" -p Hi -n 1 --moe-predict -o "$scratch/dense"
"$bin" run --no-progress -m "$repo/models/stories260K.gguf" -p Hi -n 1 -o "$scratch/dense-run" >/dev/null 2>&1 ||
  fail "run of a dense model"
expect_error "--expert-cache on a dense run" "has no routing records .not a mixture-of-experts run." \
  analyze "$scratch/dense-run" --expert-cache 4

shared=$repo/../shared/models
if [ -f "$shared/synth-mixtral-256.Q4_K_M.gguf" ] && [ -f "$shared/synth-qwen3moe-256.Q4_K_M.gguf" ]; then
  run() { "$bin" run --no-progress -p "$2" -n 4 --temp 0 -t 2 -m "$shared/$1" -o "$scratch/$3" "${@:4}" >/dev/null 2>&1; }
  run synth-mixtral-256.Q4_K_M.gguf "Once upon a time" a --moe-predict || fail "run --moe-predict"
  run synth-mixtral-256.Q4_K_M.gguf "The dog" b || fail "run without --moe-predict"
  run synth-qwen3moe-256.Q4_K_M.gguf "The dog" c || fail "run of another model"
  [ "$(json "$scratch/a/run.json" 'j["options"]["moe_predict"]')" = True ] || fail "run.json lacks moe_predict: true"

  "$bin" analyze "$scratch/a" --expert-cache 2 --policy lru --prefetch predicted --json >"$scratch/a.json" ||
    fail "analyze --prefetch predicted"
  [ "$(json "$scratch/a.json" 'j["moe"]["prediction"]["next_layer_recorded"]')" = True ] || fail "no next-layer recall"
  [ "$(json "$scratch/a.json" 'j["moe"]["expert_cache"]["prefetch"]')" = predicted ] || fail "prefetch not reported"
  [ "$(json "$scratch/a.json" 'j["moe"]["expert_cache"]["results"][0]["prefetches"] > 0')" = True ] ||
    fail "no prefetches"
  "$bin" analyze "$scratch/a" | grep -q "prediction recall@2" || fail "text report lacks the prediction recall"

  "$bin" analyze "$scratch/a" "$scratch/b" --expert-cache 2,50% >"$scratch/pooled.txt" || fail "analyze A B"
  grep -q "== Pooled expert cache (2 runs" "$scratch/pooled.txt" || fail "no pooled table: $(tail -5 "$scratch/pooled.txt")"
  "$bin" analyze "$scratch/a" "$scratch/b" --expert-cache 2 --json >"$scratch/pooled.json" || fail "analyze A B --json"
  [ "$(json "$scratch/pooled.json" 'len(j["pooled"]["runs"])')" = 2 ] || fail "pooled runs not listed"

  expect_error "several runs without --expert-cache" "give --expert-cache SIZES" analyze "$scratch/a" "$scratch/b"
  expect_error "pooling two models" "runs '$scratch/a' and '$scratch/c' cannot be pooled" \
    analyze "$scratch/a" "$scratch/c" --expert-cache 2
  expect_error "--prefetch predicted without predictions" "run '$scratch/b' has no expert predictions" \
    analyze "$scratch/b" --expert-cache 2 --prefetch predicted
  expect_error "an unknown --prefetch" "--prefetch: next not in" analyze "$scratch/a" --expert-cache 2 --prefetch next
else
  echo "skipped the mixture-of-experts runs: ../shared/models is absent"
fi

if [ "$failures" -ne 0 ]; then
  echo "moe_predict.sh: $failures failure(s)" >&2
  exit 1
fi
echo "moe_predict.sh: ok"
