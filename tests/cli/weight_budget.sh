#!/usr/bin/env bash
# `run --weight-budget`: the same tokens as an unbudgeted run; run.json's weight_cache and each steps.jsonl line's
# weight_* fields; `--cache-policy opt-from:RUN` on that run's accesses never misses more than LRU did.
# Usage: tests/cli/weight_budget.sh PATH/TO/tensortrace REPO_DIR
set -euo pipefail
bin=$1
repo=$2
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-budget.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

model="$repo/models/stories260K.gguf"
args=(-m "$model" -p "Once upon a time" -n 12 --temp 0 -t 2 --no-progress)
"$bin" run "${args[@]}" -o "$scratch/plain" >"$scratch/plain.txt" 2>/dev/null
"$bin" run "${args[@]}" -o "$scratch/lru" --weight-budget 50% >"$scratch/lru.txt" 2>/dev/null
cmp -s "$scratch/plain.txt" "$scratch/lru.txt" || fail "the budgeted run's text differs"
python3 - "$scratch" <<'PY'
import json, sys
d = sys.argv[1]
plain = json.load(open(f"{d}/plain/run.json"))
run = json.load(open(f"{d}/lru/run.json"))
assert plain["generated_tokens"] == run["generated_tokens"], "tokens differ"
assert plain["weight_cache"] is None, plain["weight_cache"]
w = run["weight_cache"]
assert w["policy"] == "lru" and w["budget"] == "50%", w
assert w["hits"] + w["misses"] == w["accesses"] > 0, w
assert w["misses"] > w["units"], w  # half the weights: units came and went
assert 0 < w["peak_resident_bytes"] <= w["budget_bytes"], w
assert w["resident_bytes_at_end"] <= w["budget_bytes"], w
assert w["read_bytes_per_s"] > 0, w
lines = [json.loads(l) for l in open(f"{d}/lru/steps.jsonl")]
assert sum(l["weight_hits"] for l in lines) == w["hits"], "steps' hits"
assert sum(l["weight_misses"] for l in lines) == w["misses"], "steps' misses"
assert sum(l["weight_bytes_read"] for l in lines) == w["bytes_read"], "steps' bytes"
assert all(l["weight_stall_ns"] >= 0 for l in lines)
PY
"$bin" run "${args[@]}" -o "$scratch/opt" --weight-budget 50% --cache-policy "opt-from:$scratch/lru" \
  >"$scratch/opt.txt" 2>/dev/null
cmp -s "$scratch/plain.txt" "$scratch/opt.txt" || fail "the opt run's text differs"
python3 - "$scratch" <<'PY'
import json, sys
d = sys.argv[1]
lru = json.load(open(f"{d}/lru/run.json"))["weight_cache"]
opt = json.load(open(f"{d}/opt/run.json"))["weight_cache"]
assert opt["policy"] == "opt" and opt["accesses"] == lru["accesses"], (opt, lru)
assert opt["misses"] <= lru["misses"], (opt, lru)
PY
# analyze replays each run's own loads through the same policy and capacity: the hits agree exactly.
for r in lru opt; do
  "$bin" analyze "$scratch/$r" --json >"$scratch/$r.json" 2>/dev/null
  python3 - "$scratch/$r.json" "$scratch/$r/run.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["weight_cache"]
w = json.load(open(sys.argv[2]))["weight_cache"]
assert a["agree"] and a["measured"]["hits"] == a["simulated"]["hits"] == w["hits"], (a, w)
assert a["accesses"] == w["accesses"] and a["measured"]["bytes_read"] == a["simulated"]["bytes_read"] == w["bytes_read"], a
PY
done
"$bin" analyze "$scratch/lru" 2>/dev/null | grep -q "== Weight cache (lru" || fail "analyze's text has no Weight cache section"
# Another prompt makes another access stream: refused.
if "$bin" run -m "$model" -p "A different prompt entirely" -n 3 --no-trace --no-progress --weight-budget 50% \
  --cache-policy "opt-from:$scratch/lru" >/dev/null 2>"$scratch/err"; then
  fail "opt-from a run of another stream was accepted"
fi
grep -q "access streams differ" "$scratch/err" || fail "opt-from another stream: $(cat "$scratch/err")"
echo "weight_budget.sh: ok"
