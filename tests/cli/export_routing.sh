#!/usr/bin/env bash
# `export --format routing-npy|routing-csv` on a synth-qwen3moe-256 run: the .npy files read by NumPy (a reader
# independent of ours) and the CSV hold exactly the SQLite export's `routing` table; -1 where a layer did not route
# a token; a dense run is an error; `diff` of two MoE runs has its Routing section. Skipped without ../shared.
# Usage: tests/cli/export_routing.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
model="$repo/../shared/models/synth-qwen3moe-256.Q4_K_M.gguf"
if [ ! -f "$model" ]; then
  echo "skip: no $model"
  exit 0
fi
failures=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-export-routing.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# shellcheck source=lib/expect_error.sh
. "$repo/tests/cli/lib/expect_error.sh"

# NumPy is a declared dependency (scripts/install-deps.sh: python3-numpy); the first python3 that has it.
py=
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import numpy' 2>/dev/null; then
    py=$p
    break
  fi
done
[ -n "$py" ] || { echo "FAIL: no python3 with numpy (scripts/install-deps.sh installs python3-numpy)" >&2; exit 1; }

run="$scratch/run"
for args in "-t 2 -o $run" "-t 1 -o $scratch/run1"; do
  # shellcheck disable=SC2086
  "$bin" run -m "$model" -p "Once upon a time" -n 3 --temp 0 -c 64 $args >/dev/null 2>"$scratch/run.err" ||
    { cat "$scratch/run.err" >&2; echo "export_routing.sh: could not make a run" >&2; exit 1; }
done

for format in routing-npy routing-csv sqlite; do
  "$bin" export "$run" --format "$format" >"$scratch/$format.out" 2>"$scratch/err" ||
    fail "export --format $format: $(cat "$scratch/err")"
done
grep -q "^routing-npy: [0-9]* tokens x 4 routed layers x top 8; [0-9]* (token, layer) entries without routing are expert -1" \
  "$scratch/routing-npy.out" || fail "routing-npy does not say what it wrote: $(cat "$scratch/routing-npy.out")"
[ -f "$run/export/routing-npy/expert_ids.npy" ] || fail "no $run/export/routing-npy/expert_ids.npy"
[ -f "$run/export/routing.csv" ] || fail "no $run/export/routing.csv"

"$py" - "$run/export" <<'EOF' || fail "the routing exports disagree with the SQLite routing table"
import csv, sqlite3, sys
import numpy as np
d = sys.argv[1]
ids = np.load(f"{d}/routing-npy/expert_ids.npy")
w = np.load(f"{d}/routing-npy/expert_weights.npy")
tok = np.load(f"{d}/routing-npy/tokens.npy")
layers = np.load(f"{d}/routing-npy/layers.npy")
assert ids.dtype == np.int16 and w.dtype == np.float32 and tok.dtype == np.int32, (ids.dtype, w.dtype, tok.dtype)
assert ids.ndim == 3 and ids.shape == w.shape and ids.shape[1:] == (4, 8), ids.shape
assert tok.shape == (ids.shape[0], 2) and list(layers) == [0, 1, 2, 3]
assert [tuple(t) for t in tok] == sorted(tuple(t) for t in tok), "tokens not in execution order"
row = {(int(s), int(p)): i for i, (s, p) in enumerate(tok)}
db = sqlite3.connect(f"{d}/trace.sqlite")
expect = np.full(ids.shape, -1, dtype=np.int16)
expect_w = np.zeros(w.shape, dtype=np.float32)
n = 0
for step, layer, pos, slot, expert, weight in db.execute(
        "SELECT step, layer, token_pos, slot, expert, weight FROM routing"):
    expect[row[(step, pos)], layer, slot] = expert
    expect_w[row[(step, pos)], layer, slot] = weight
    n += 1
assert n > 0
assert (ids == expect).all(), "expert ids differ"
assert (w == expect_w).all(), "weights differ"
# Only the prompt's last layer leaves tokens out, all its tokens but the last.
prompt = [t for t in row if t[0] == 0]
assert (ids[:, :3] >= 0).all() and int((ids[:, 3, 0] < 0).sum()) == len(prompt) - 1
rows = list(csv.DictReader(open(f"{d}/routing.csv")))
assert len(rows) == n, (len(rows), n)
for r in rows:
    t = row[(int(r["step"]), int(r["position"]))]
    assert int(r["token"]) == t
    assert ids[t, int(r["layer"]), int(r["slot"])] == int(r["expert"])
    assert np.float32(float(r["weight"])) == w[t, int(r["layer"]), int(r["slot"])]
print(f"ok: routing-npy {ids.shape} and routing-csv ({n} rows) equal the SQLite routing table")
EOF

# diff of two MoE runs: one and two threads route the same experts.
"$bin" diff "$run" "$scratch/run1" --json >"$scratch/diff.json" 2>"$scratch/err" || fail "diff --json: $(cat "$scratch/err")"
"$py" -c 'import json,sys; r=json.load(open(sys.argv[1]))["routing"]; assert r["available"] and r["flips"]==0 and r["compared"]>0, r' \
  "$scratch/diff.json" || fail "diff --json routing: $(head -c 300 "$scratch/diff.json")"
"$bin" diff "$run" "$scratch/run1" >"$scratch/diff.txt" 2>&1 || fail "diff"
grep -q "every token chose the same experts in every layer" "$scratch/diff.txt" || fail "diff text: no Routing section"

# A dense run has no routing to export.
dense="$scratch/dense"
"$bin" run -m "$repo/models/stories260K.gguf" -p "Hi" -n 1 -o "$dense" >/dev/null 2>&1 || fail "dense run"
expect_error "routing-npy of a dense run" "has no routing records \(not a mixture-of-experts run\)" \
  export "$dense" --format routing-npy
expect_error "routing-csv of a dense run" "has no routing records" export "$dense" --format routing-csv
[ -e "$dense/export/routing-npy" ] && fail "a failed export left $dense/export/routing-npy"
expect_error "unknown format" "unknown format 'npy' \(choose .*routing-npy or routing-csv\)" export "$run" --format npy

[ "$failures" -eq 0 ] || { echo "$failures failure(s)" >&2; exit 1; }
echo "all export routing checks passed"
