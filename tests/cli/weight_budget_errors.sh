#!/usr/bin/env bash
# Bad `run --weight-budget` / `--cache-policy` values: exactly one line on stderr starting with "tensortrace" and
# naming the problem, nothing on stdout, a non-zero exit.
# Usage: tests/cli/weight_budget_errors.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
failures=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-budget.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# shellcheck source=lib/expect_error.sh
source "$(dirname "$0")/lib/expect_error.sh"

model="$repo/models/stories260K.gguf"
run=(run -m "$model" -p "Once upon a time" -n 2 --no-trace --no-progress)
expect_error "a budget that is not a size" "'abc' is not a size" "${run[@]}" --weight-budget abc
expect_error "an unknown unit" "unknown size unit" "${run[@]}" --weight-budget 12Q
expect_error "a zero budget" "is 0 bytes" "${run[@]}" --weight-budget 0
expect_error "a percent above 100" "percent must be a number in \(0, 100\]" "${run[@]}" --weight-budget 150%
expect_error "a zero percent" "percent must be a number in \(0, 100\]" "${run[@]}" --weight-budget 0%
expect_error "a bare percent sign" "percent must be a number" "${run[@]}" --weight-budget %
# (a model whose loading warns of nothing: the error must be the one line)
expect_error "a budget below one node's weights" \
  "--weight-budget 4K \(4096 bytes\) is below the 1155072 bytes 'output.weight' needs resident at once; give at least 1155072" \
  run -m "$repo/models/TinyLLama-v0.Q4_0.gguf" -p "Once" -n 2 --no-trace --no-progress --weight-budget 4K
expect_error "an unknown policy" "--cache-policy must be lru, lfu, fifo, lru-2, least-stale or opt-from:RUN_DIR, got 'mru'" \
  "${run[@]}" --weight-budget 50% --cache-policy mru
expect_error "opt without a run" "--cache-policy must be" "${run[@]}" --weight-budget 50% --cache-policy opt
expect_error "a policy without a budget" "need --weight-budget" "${run[@]}" --cache-policy lfu
expect_error "--direct-io without a budget" "need --weight-budget" "${run[@]}" --direct-io
expect_error "opt-from a missing run" "missing" "${run[@]}" --weight-budget 50% --cache-policy "opt-from:$scratch/missing"
expect_error "an unknown prefetch with a budget" \
  "--prefetch with --weight-budget must be none, next-layer, predicted or from:RUN_DIR, got 'soon'" \
  "${run[@]}" --weight-budget 50% --prefetch soon
expect_error "predicted prefetch on a dense model" "--prefetch predicted needs a mixture-of-experts model" \
  run -m "$repo/models/TinyLLama-v0.Q4_0.gguf" -p "Once" -n 2 --no-trace --no-progress --weight-budget 50% \
  --prefetch predicted
expect_error "prefetch from a missing run" "missing" "${run[@]}" --weight-budget 50% --prefetch "from:$scratch/missing"
expect_error "prefetch with opt-from" "opt-from runs without --prefetch" \
  "${run[@]}" --weight-budget 50% --prefetch next-layer --cache-policy "opt-from:$scratch/missing"

if [ "$failures" -ne 0 ]; then
  echo "weight_budget_errors.sh: $failures failure(s)" >&2
  exit 1
fi
echo "weight_budget_errors.sh: ok"
