#!/usr/bin/env bash
# `tensortrace serve`: the JSON API answers on a demo run, and bad requests (path traversal, unknown routes, bad
# parameters) get a 4xx JSON error, never a crash; only the web app's files are served; SIGINT stops it cleanly.
# Usage: tests/cli/serve_api.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-serve.XXXXXX")
server=
cleanup() {
  [ -n "$server" ] && kill -KILL "$server" 2>/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT

"$bin" run -m "$repo/models/stories260K.gguf" -p "Once upon a time" -n 6 --temp 0 -t 2 -o "$scratch/run" >/dev/null 2>&1 ||
  { echo "FAIL: demo run"; exit 1; }
mkdir -p "$scratch/web/assets"
echo '<html>test app</html>' >"$scratch/web/index.html"
echo 'console.log(1)' >"$scratch/web/assets/app.js"
echo 'secret' >"$scratch/secret.txt"

# The web app must exist.
if "$bin" serve "$scratch/run" --port 0 --web-dir "$scratch/nope" >"$scratch/out" 2>&1; then
  echo "FAIL: serve without a built web app succeeded"; exit 1
fi
grep -q "not built" "$scratch/out" || { echo "FAIL: unclear error without web app: $(cat "$scratch/out")"; exit 1; }

"$bin" serve "$scratch/run" --port 0 --web-dir "$scratch/web" >"$scratch/log" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q "serving http" "$scratch/log" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^serving \(http[^ ]*\)$/\1/p' "$scratch/log")
[ -n "$url" ] || { echo "FAIL: no URL printed: $(cat "$scratch/log")"; exit 1; }

python3 - "$url" <<'PY'
import http.client, json, sys, urllib.parse
url = urllib.parse.urlparse(sys.argv[1])
failures = 0
def get(path):
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    c.request("GET", path)  # sent as-is: no client-side normalisation
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, r.getheader("Content-Type", ""), body
def expect(path, status, check=None):
    global failures
    s, ct, body = get(path)
    ok = s == status
    data = None
    if ok and "json" in ct:
        data = json.loads(body)
        if status >= 400 and not (isinstance(data, dict) and isinstance(data.get("error"), str)):
            ok = False
    if ok and check:
        try:
            ok = bool(check(data if data is not None else body))
        except Exception as e:
            ok = False
    if not ok:
        failures += 1
        print(f"FAIL: GET {path}: {s} {body[:200]!r}")
    return data

runs = expect("/api/runs", 200, lambda d: len(d["runs"]) == 1 and d["runs"][0]["steps"] == 6)
info = expect("/api/runs/0/run", 200, lambda d: d["derived"]["steps"] == 6 and d["derived"]["ops"] > 100)
n_ops = info["derived"]["ops"] if info else 0
expect("/api/runs/0/memory-map", 200, lambda d: len(d["tensors"]) > 10)
expect("/api/runs/0/steps?from=1&to=2", 200, lambda d: [s["step"] for s in d["steps"]] == [1, 2])
expect("/api/runs/0/ops?limit=5", 200, lambda d: d["total"] == n_ops and len(d["rows"]) == 5)
expect("/api/runs/0/ops?step=1&op=MUL_MAT&limit=1000", 200, lambda d: d["total"] > 0 and all(r["op"] == "MUL_MAT" and r["step"] == 1 for r in d["rows"]))
expect("/api/runs/0/ops?layer=2&name=ffn&limit=1000", 200, lambda d: d["total"] > 0 and all(r["layer"] == 2 and "ffn" in r["name"] for r in d["rows"]))
expect("/api/runs/0/ops?i=7", 200, lambda d: d["rows"][0]["i"] == 7)
expect("/api/runs/0/spans", 200, lambda d: d["count"] > 0)
expect("/api/runs/0/spans?limit=0&px=50", 200, lambda d: d["mode"] == "buckets" and len(d["buckets"]) > 0)
expect("/api/runs/0/graph?step=1", 200, lambda d: len(d["graph"]["nodes"]) > 50 and len(d["timing"]) > 50)
expect("/api/runs/0/buffers?px=10", 200, lambda d: "KV_CACHE" in d["live_max"] and len(d["live_max"]["KV_CACHE"]) == 10)
# Heatmap: an embedding lookup reads only the rows of the step's tokens, so step 1 alone reads one row.
hm = expect("/api/runs/0/heatmap?step=1&cumulative=0&bins=100", 200, lambda d: len(d["file"]) == 100 and d["bytes"]["file"] > 0)
mm = json.loads(get("/api/runs/0/memory-map")[2])
emb = next(i for i, t in enumerate(mm["tensors"]) if t["name"] == "token_embd.weight")
row_bytes = mm["tensors"][emb]["shape"][0] * 4
if hm:
    rows = {t[0]: t for t in hm["tensors"]}
    if rows.get(emb, [0, 0, 0])[2] != row_bytes:
        failures += 1
        print(f"FAIL: step 1 should read one embedding row ({row_bytes} bytes): {rows.get(emb)}")
expect("/api/runs/0/heatmap?step=5&cumulative=1&bins=10&start=0&end=1000", 200, lambda d: d["end"] == 1000)
expect("/api/runs/0/summary", 200, lambda d: len(d["steps"]) == 6 and len(d["hottest_tensors"]) > 0)
# A dense run has no routing: the run says so, and the routing route answers 404 with a JSON error.
expect("/api/runs/0/run", 200, lambda d: d["derived"]["routed"] is False)
expect("/api/runs/0/routing", 404, lambda d: "no expert routing" in d["error"])
# Nor a weight budget: the weight-cache route answers 404 saying so.
expect("/api/runs/0/run", 200, lambda d: d["derived"]["weight_budget"] is False)
expect("/api/runs/0/weight-cache", 404, lambda d: "no weight budget" in d["error"])
# The web app's files, nothing else.
expect("/", 200, lambda b: b"test app" in b)
expect("/assets/app.js", 200)
# API answers and the bundle go out uncompressed even to a browser accepting brotli (compressing them at quality 11
# took longer than any view needs: docs/viewer.md, Performance).
for path in ["/api/runs/0/graph?step=1", "/api/runs/0/heatmap?step=1", "/assets/app.js"]:
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    c.request("GET", path, headers={"Accept-Encoding": "gzip, deflate, br"})
    r = c.getresponse()
    r.read()
    c.close()
    if r.status != 200 or r.getheader("Content-Encoding"):
        failures += 1
        print(f"FAIL: GET {path} accepting br: {r.status} Content-Encoding {r.getheader('Content-Encoding')}")
for bad in ["/api/../../etc/passwd", "/api/%2e%2e/%2e%2e/etc/passwd", "/%2e%2e/secret.txt", "/../secret.txt",
            "/assets/../../secret.txt", "/assets/%2E%2E/%2E%2E/secret.txt", "/api/runs/0/..%2f..%2frun.json"]:
    s, ct, body = get(bad)
    if s < 400 or s >= 500 or b"secret" in body or b"root:" in body:
        failures += 1
        print(f"FAIL: traversal {bad}: {s} {body[:100]!r}")
for path, status in [("/nope", 404), ("/api", 404), ("/api/nope", 404), ("/api/runs/1/run", 404), ("/api/runs/x/run", 404),
                     ("/api/runs/-1/run", 404), ("/api/runs/0/nope", 404), ("/api/runs/0/run/extra", 404),
                     ("/api/runs/0/ops?step=abc", 400), ("/api/runs/0/ops?step=99", 400), ("/api/runs/0/ops?limit=-1", 400),
                     ("/api/runs/0/ops?limit=999999", 400), ("/api/runs/0/ops?op=FOO", 400), ("/api/runs/0/ops?phase=x", 400),
                     ("/api/runs/0/ops?i=99999999", 400), ("/api/runs/0/spans?t0=5&t1=1", 400), ("/api/runs/0/spans?t0=nan", 400),
                     ("/api/runs/0/heatmap?bins=0", 400), ("/api/runs/0/heatmap?cumulative=2", 400),
                     ("/api/runs/0/heatmap?start=10&end=5", 400), ("/api/runs/0/heatmap?step=1e3", 400),
                     ("/api/runs/0/graph?step=", 400), ("/api/runs/0/buffers?px=0", 400), ("/api/runs/0/steps?from=100", 400),
                     # Every integer parameter is range-checked before any arithmetic (offset + limit overflowed).
                     ("/api/runs/0/ops?offset=9223372036854775807", 400), ("/api/runs/0/ops?offset=9223372036854775808", 400),
                     ("/api/runs/0/ops?offset=-1", 400), (f"/api/runs/0/ops?offset={n_ops + 1}", 400),
                     ("/api/runs/0/ops?offset=9223372036854775807&name=ffn", 400), ("/api/runs/0/ops?offset=%2B5", 400),
                     ("/api/runs/0/ops?locate=9223372036854775807", 400), (f"/api/runs/0/ops?locate={n_ops}", 400),
                     ("/api/runs/0/ops?limit=9223372036854775807", 400), ("/api/runs/0/ops?step=99999999999999999999", 400),
                     ("/api/runs/0/ops?layer=-9223372036854775808", 400), ("/api/runs/0/ops?i=-1", 400),
                     ("/api/runs/0/spans?t1=1e400", 400), ("/api/runs/0/spans?px=1.5", 400), ("/api/runs/0/spans?t0=-1", 400),
                     ("/api/runs/0/heatmap?start=-1", 400), ("/api/runs/0/heatmap?bins=9223372036854775807", 400),
                     ("/api/runs/0/buffers?max_events=-1", 400), ("/api/runs/0/graph?timing_only=2", 400)]:
    expect(path, status)
# The last page and one past the end are fine: an empty page.
expect(f"/api/runs/0/ops?offset={n_ops}", 200, lambda d: d["total"] == n_ops and d["rows"] == [])
expect(f"/api/runs/0/ops?offset={n_ops}&name=ffn", 200, lambda d: d["rows"] == [])
# Still alive after all that.
expect("/api/runs", 200)
sys.exit(1 if failures else 0)
PY
rc=$?

kill -INT "$server"
for _ in $(seq 50); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$server" 2>/dev/null; then
  echo "FAIL: serve did not stop on SIGINT"; rc=1
else
  wait "$server"; code=$?
  [ "$code" -eq 0 ] || { echo "FAIL: serve exited $code after SIGINT"; rc=1; }
  grep -q stopped "$scratch/log" || { echo "FAIL: no 'stopped' message"; rc=1; }
fi
server=
[ "$rc" -eq 0 ] && echo "serve API: all checks passed"
exit "$rc"
