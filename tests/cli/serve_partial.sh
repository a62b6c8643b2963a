#!/usr/bin/env bash
# `tensortrace serve` on a run killed midway (RUN_DIR.partial): the run is listed as incomplete, with why, and its
# runtime buffers (known from the trace alone: no buffers.json) have their names.
# Usage: tests/cli/serve_partial.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
source "$(dirname "$0")/lib/serve.sh"

# A long run, killed with SIGKILL (nothing can tidy up) once its trace has records.
"$bin" run -m "$repo/models/stories260K.gguf" -p "Once upon a time" -n 20000 -c 20100 --temp 0 -t 1 \
  -o "$scratch/run" >/dev/null 2>&1 &
runner=$!
servers+=("$runner")
for _ in $(seq 300); do
  [ "$(stat -c %s "$scratch/run.partial/trace.bin" 2>/dev/null || echo 0)" -gt 100000 ] && break
  sleep 0.1
done
kill -KILL "$runner" 2>/dev/null
wait "$runner" 2>/dev/null
[ -d "$scratch/run.partial" ] && [ ! -e "$scratch/run" ] || { echo "FAIL: no killed partial run to serve"; exit 1; }
[ -s "$scratch/run.partial/trace.bin" ] || { echo "FAIL: the killed run has no trace"; exit 1; }

start_serve "$scratch/log" "$scratch/run.partial" --port 0

timeout 60 python3 - "$url" <<'PY'
import json, sys, urllib.request
url = sys.argv[1]
failures = 0
def get(path):
    with urllib.request.urlopen(url + path.lstrip("/"), timeout=10) as r:
        return json.load(r)
def check(what, ok):
    global failures
    if not ok:
        failures += 1
        print(f"FAIL: {what}")
runs = get("/api/runs")["runs"]
check(f"/api/runs lists the killed run as incomplete: {runs}", len(runs) == 1 and runs[0]["complete"] is False)
check(f"the killed run has steps: {runs}", runs and runs[0]["steps"] > 0)
d = get("/api/runs/0/run")["derived"]
check(f"derived.complete is false: {d['complete']}", d["complete"] is False)
check(f"derived.stop_reason says why: {d['stop_reason']!r}", d["stop_reason"] != "")
check(f"buffers are listed: {d['buffers']}", len(d["buffers"]) > 0)
check(f"every buffer has a name: {d['buffers']}", all(b["name"] for b in d["buffers"]))
hm = get("/api/runs/0/heatmap?bins=10")
check("heatmap tracks name their segments", all(s["name"] for t in hm["tracks"] for s in t["segments"]))
sys.exit(1 if failures else 0)
PY
rc=$?
[ "$rc" -eq 0 ] && echo "serve partial run: all checks passed"
exit "$rc"
