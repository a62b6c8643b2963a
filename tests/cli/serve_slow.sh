#!/usr/bin/env bash
# Slow clients cannot starve `tensortrace serve`: while eight connections each trickle a header line every 0.5 s,
# a normal request is answered at once, and each trickling request is cut off once its time is up (5 s).
# Bounded: the whole test stops by itself in under a minute (about 12 s when it passes).
# Usage: tests/cli/serve_slow.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
source "$(dirname "$0")/lib/serve.sh"

make_run "$scratch/run"
start_serve "$scratch/log" "$scratch/run" --port 0

timeout 50 python3 - "$port" <<'PY'
import http.client, socket, sys, threading, time
port = int(sys.argv[1])
n_slow, interval, request_time, margin = 8, 0.5, 5.0, 4.0
failures = 0
stop = threading.Event()
ended = [None] * n_slow  # seconds from a slow client's first byte until the server answered or closed it

def slow(i):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    t0 = time.monotonic()
    s.sendall(b"GET /api/runs HTTP/1.1\r\nHost: localhost\r\n")
    s.setblocking(False)
    line = 0
    while not stop.is_set():
        time.sleep(interval)
        try:
            if s.recv(4096) is not None:  # an answer (an error status) or end of stream: the server gave up
                ended[i] = time.monotonic() - t0
                break
        except BlockingIOError:
            pass
        except OSError:
            ended[i] = time.monotonic() - t0
            break
        try:
            s.sendall(f"X-Slow-{line}: {i}\r\n".encode())
        except OSError:
            ended[i] = time.monotonic() - t0
            break
        line += 1
    s.close()

threads = [threading.Thread(target=slow, args=(i,), daemon=True) for i in range(n_slow)]
for t in threads:
    t.start()
time.sleep(1.5)

def normal_request(what):
    global failures
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
        c.request("GET", "/api/runs")
        r = c.getresponse()
        ok = r.status == 200 and b'"runs"' in r.read()
        c.close()
    except OSError as e:
        ok = False
    took = time.monotonic() - t0
    if not ok:
        failures += 1
        print(f"FAIL: {what}: no answer within 3 s (waited {took:.1f} s)")

normal_request(f"a normal request while {n_slow} clients trickle headers")
deadline = time.monotonic() + request_time + margin
for t in threads:
    t.join(max(0.0, deadline - time.monotonic()))
stop.set()
for i, e in enumerate(ended):
    if e is None or e > request_time + margin:
        failures += 1
        print(f"FAIL: slow client {i} still being read after {request_time + margin:.0f} s (ended: {e})")
normal_request("a normal request after the slow clients")
sys.exit(1 if failures else 0)
PY
rc=$?
[ "$rc" -eq 124 ] && echo "FAIL: the test did not finish in 50 s"
kill -0 "$server" 2>/dev/null || { echo "FAIL: the server died"; rc=1; }
[ "$rc" -eq 0 ] && echo "serve slow clients: all checks passed"
exit "$rc"
