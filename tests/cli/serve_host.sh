#!/usr/bin/env bash
# `tensortrace serve` answers only requests naming it in their Host header (localhost, 127.0.0.1, [::1], the --host
# name, with or without a port): any other name may be another site's page reaching it through DNS rebinding.
# Usage: tests/cli/serve_host.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
source "$(dirname "$0")/lib/serve.sh"

make_run "$scratch/run"
# 127.0.0.2 is a loopback address of its own: the --host name differs from the usual loopback names.
start_serve "$scratch/log" "$scratch/run" --port 0 --host 127.0.0.2

timeout 60 python3 - "$port" <<'PY'
import http.client, json, sys
port = int(sys.argv[1])
failures = 0
def get(path, host):
    c = http.client.HTTPConnection("127.0.0.2", port, timeout=10)
    c.putrequest("GET", path, skip_host=True)
    if host is not None:
        c.putheader("Host", host)
    c.endheaders()
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body
accepted = ["localhost", f"localhost:{port}", "LOCALHOST:8080", "127.0.0.1", f"127.0.0.1:{port}", "[::1]",
            f"[::1]:{port}", "127.0.0.2", f"127.0.0.2:{port}"]
refused = ["evil.com", f"evil.com:{port}", "localhost.evil.com", "evil.com:localhost", "127.0.0.1.evil.com",
           "localhost:", "localhost:80x", "[::1", "::1", "[::2]", "", None]
for host in accepted:
    for path in ["/api/runs", "/"]:
        s, body = get(path, host)
        if s != 200:
            failures += 1
            print(f"FAIL: Host {host!r} {path}: {s} {body[:200]!r}")
for host in refused:
    for path in ["/api/runs", "/api/runs/0/run", "/", "/nope"]:
        s, body = get(path, host)
        ok = s in (400, 403, 421) and b"runs" not in body and b"test app" not in body
        if ok and s != 400:
            err = json.loads(body).get("error", "")
            ok = "host" in err
        if not ok:
            failures += 1
            print(f"FAIL: Host {host!r} {path}: {s} {body[:200]!r}")
sys.exit(1 if failures else 0)
PY
rc=$?
[ "$rc" -eq 0 ] && echo "serve host: all checks passed"
exit "$rc"
