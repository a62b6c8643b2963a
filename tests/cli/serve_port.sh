#!/usr/bin/env bash
# `tensortrace serve --port P` binds P exclusively: a second server on a port another one holds refuses to start
# (one clear line, non-zero exit) instead of sharing the first one's requests.
# Usage: tests/cli/serve_port.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
source "$(dirname "$0")/lib/serve.sh"

make_run "$scratch/run"
start_serve "$scratch/log1" "$scratch/run" --port 0
first=$server
rc=0

# Bounded: before the fix the second server started and served for ever.
timeout 10 "$bin" serve "$scratch/run" --port "$port" --web-dir "$scratch/web" >"$scratch/out2" 2>"$scratch/err2"
code=$?
if [ "$code" -eq 124 ] || grep -q "serving http" "$scratch/out2"; then
  echo "FAIL: a second serve on port $port started"; rc=1
elif [ "$code" -eq 0 ]; then
  echo "FAIL: a second serve on port $port exited 0"; rc=1
else
  [ "$(wc -l <"$scratch/err2")" -eq 1 ] || { echo "FAIL: expected one error line: $(cat "$scratch/err2")"; rc=1; }
  grep -q "^tensortrace.*port $port is in use (try --port 0)" "$scratch/err2" ||
    { echo "FAIL: unclear error: $(cat "$scratch/err2")"; rc=1; }
fi

# The first server still answers, and its port stays its own.
curl -sf --max-time 10 "${url}api/runs" | grep -q '"runs"' || { echo "FAIL: the first server stopped answering"; rc=1; }
kill -0 "$first" 2>/dev/null || { echo "FAIL: the first server died"; rc=1; }

[ "$rc" -eq 0 ] && echo "serve port: all checks passed"
exit "$rc"
