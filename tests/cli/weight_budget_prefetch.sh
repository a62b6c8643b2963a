#!/usr/bin/env bash
# `run --weight-budget --prefetch next-layer|from:RUN`: the same tokens as an unbudgeted run; WEIGHT_LOAD records
# with prefetch reads that later demand accesses hit (analyze: "prefetch hit"); analyze's replays with and without
# the prefetch stream; run.json and steps.jsonl count the prefetches.
# Usage: tests/cli/weight_budget_prefetch.sh PATH/TO/tensortrace REPO_DIR
set -euo pipefail
bin=$1
repo=$2
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-prefetch.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

model="$repo/models/TinyLLama-v0.Q4_0.gguf"
args=(-m "$model" -p "Once upon a time" -n 8 --temp 0 -t 2 --no-progress)
"$bin" run "${args[@]}" -o "$scratch/plain" >"$scratch/plain.txt" 2>/dev/null
"$bin" run "${args[@]}" -o "$scratch/lru" --weight-budget 60% >"$scratch/lru.txt" 2>/dev/null
"$bin" run "${args[@]}" -o "$scratch/next" --weight-budget 60% --prefetch next-layer >"$scratch/next.txt" 2>/dev/null
"$bin" run "${args[@]}" -o "$scratch/from" --weight-budget 60% --prefetch "from:$scratch/lru" \
  >"$scratch/from.txt" 2>/dev/null
for r in lru next from; do
  cmp -s "$scratch/plain.txt" "$scratch/$r.txt" || fail "the $r run's text differs"
done
for r in next from; do
  "$bin" analyze "$scratch/$r" --json >"$scratch/$r.json" 2>/dev/null
  python3 - "$scratch" "$r" <<'PY'
import json, sys
d, r = sys.argv[1], sys.argv[2]
w = json.load(open(f"{d}/{r}/run.json"))["weight_cache"]
a = json.load(open(f"{d}/{r}.json"))["weight_cache"]
assert w["prefetches"] > 0 and w["prefetch_hits"] > 0, w
assert 0 < w["peak_resident_bytes"] <= w["budget_bytes"], w
assert w["resident_bytes_at_end"] <= w["budget_bytes"], w
m = a["measured"]
assert m["prefetches"] > 0 and m["prefetch_hits"] > 0, m
assert a["accesses"] == w["accesses"] and m["hits"] == w["hits"], (a, w)
lines = [json.loads(l) for l in open(f"{d}/{r}/steps.jsonl")]
assert sum(l["weight_hits"] for l in lines) == w["hits"], "steps' hits"
assert sum(l["weight_misses"] for l in lines) == w["misses"], "steps' misses"
assert sum(l["weight_prefetch_hits"] for l in lines) == w["prefetch_hits"], "steps' prefetch hits"
# Reads after the last step's records (the prefetcher ahead of a step that never came) are in run.json only.
assert sum(l["weight_bytes_read"] for l in lines) <= w["bytes_read"], "steps' bytes"
assert a["replay_prefetch"]["prefetches"] > 0 and a["replay_no_prefetch"]["prefetches"] == 0, a
PY
done
"$bin" analyze "$scratch/next" >"$scratch/next.txt" 2>/dev/null
grep -q "prefetch hits" "$scratch/next.txt" || fail "analyze's text names no prefetch hits: $(cat "$scratch/next.txt")"
grep -q "replay, no prefetch" "$scratch/next.txt" || fail "analyze's text has no replay without prefetch"
echo "weight_budget_prefetch.sh: ok"
