#!/usr/bin/env bash
# The activation matrix of `analyze --json` (moe.per_layer[].picks, prompt_picks, generate_picks, weight: per routed
# layer and expert) equals the counts and weight sums of the SQLite export's `routing` table, on a run of each MoE
# model in ../shared/models (issue 40's "Done when"). Skipped without ../shared.
# Usage: tests/cli/moe_activation.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
models="synth-mixtral-256.Q4_K_M synth-qwen2moe-256.Q8_0 synth-olmoe-256.Q4_K_M synth-qwen3moe-256.Q4_K_M"
if [ ! -d "$repo/../shared/models" ]; then
  echo "skip: no $repo/../shared/models"
  exit 0
fi
failures=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-moe-activation.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

for name in $models; do
  model="$repo/../shared/models/$name.gguf"
  [ -f "$model" ] || { fail "$name: no $model"; continue; }
  run="$scratch/$name"
  "$bin" run -m "$model" -p "Once upon a time" -n 4 --temp 0 -t 2 -c 64 -o "$run" >/dev/null 2>"$scratch/err" ||
    { fail "$name: run: $(cat "$scratch/err")"; continue; }
  "$bin" analyze "$run" --json >"$scratch/$name.json" 2>"$scratch/err" ||
    { fail "$name: analyze --json: $(cat "$scratch/err")"; continue; }
  "$bin" export "$run" -f sqlite -o "$scratch/$name.sqlite" >/dev/null 2>"$scratch/err" ||
    { fail "$name: export sqlite: $(cat "$scratch/err")"; continue; }
  python3 - "$scratch/$name.json" "$scratch/$name.sqlite" <<'EOF' || fail "$name: analyze's activation matrix differs from the SQLite routing table"
import json, math, sqlite3, sys
moe = json.load(open(sys.argv[1]))["moe"]
db = sqlite3.connect(sys.argv[2])
n = moe["n_expert"]
layers = {l["layer"]: l for l in moe["per_layer"]}
db_layers = [r[0] for r in db.execute("SELECT DISTINCT layer FROM routing ORDER BY layer")]
assert sorted(layers) == db_layers, (sorted(layers), db_layers)
for key, where in (("picks", ""), ("prompt_picks", "AND s.phase = 'PROMPT'"),
                   ("generate_picks", "AND s.phase = 'GENERATE'")):
    for layer, l in layers.items():
        expect = [0] * n
        for e, c in db.execute("SELECT r.expert, count(*) FROM routing r JOIN steps s ON s.step = r.step "
                               f"WHERE r.layer = ? {where} GROUP BY r.expert", (layer,)):
            expect[e] = c
        assert l[key] == expect, (key, layer, l[key], expect)
for layer, l in layers.items():
    w = [0.0] * n
    for e, s in db.execute("SELECT expert, sum(weight) FROM routing WHERE layer = ? GROUP BY expert", (layer,)):
        w[e] = s
    # float32 weights summed in another order
    assert all(math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6) for a, b in zip(l["weight"], w)), (layer, l["weight"], w)
    tokens = db.execute("SELECT count(DISTINCT step || ':' || token_pos) FROM routing WHERE layer = ?", (layer,)).fetchone()[0]
    assert l["tokens"] == tokens, (layer, l["tokens"], tokens)
assert sum(sum(l["generate_picks"]) for l in layers.values()) > 0
EOF
done

if [ "$failures" -ne 0 ]; then
  echo "moe_activation.sh: $failures failure(s)" >&2
  exit 1
fi
echo "moe_activation.sh: ok"
