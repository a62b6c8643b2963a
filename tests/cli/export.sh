#!/usr/bin/env bash
# `tensortrace export`: a 3-token run exported in every format; the Perfetto JSON loaded by Python's json module
# (a parser independent of ours) and checked against `dump`'s counts; the SQLite file opened by the sqlite3 shell
# when present; errors for a missing run directory, a non-run directory, an unknown format; a truncated trace
# exports what is there with a warning.
# Usage: tests/cli/export.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
failures=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-export.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

run="$scratch/run"
if ! "$bin" run -m "$repo/models/stories260K.gguf" -p "Once upon a time" -n 3 --temp 0 -t 2 --trace-values \
  -o "$run" >"$scratch/run.out" 2>"$scratch/run.err"; then
  cat "$scratch/run.err" >&2
  echo "export.sh: could not make a run" >&2
  exit 1
fi

for format in perfetto sqlite tokens-json; do
  if ! "$bin" export "$run" --format "$format" >"$scratch/out" 2>"$scratch/err"; then
    fail "export --format $format: $(cat "$scratch/err")"
  elif grep -Evq "^${format}: step [0-9]+/[0-9]+$" "$scratch/err"; then
    # Progress lines appear once an export has taken a second (a loaded machine); nothing else may.
    fail "export --format $format wrote to stderr: $(cat "$scratch/err")"
  else
    echo "ok: $(cat "$scratch/out")"
  fi
done
[ -f "$run/export/trace.perfetto.json" ] || fail "no $run/export/trace.perfetto.json"
[ -f "$run/export/trace.sqlite" ] || fail "no $run/export/trace.sqlite"
[ -f "$run/export/tokens-json/traces/token-00002.json" ] || fail "no tokens-json/traces/token-00002.json"
if ls "$run/export" | grep -q 'tmp-'; then fail "temporary files left in $run/export"; fi

# -o: another place.
"$bin" export "$run" --format perfetto -o "$scratch/elsewhere/p.json" >/dev/null 2>&1 ||
  fail "export -o into a new directory"
[ -f "$scratch/elsewhere/p.json" ] || fail "-o did not write $scratch/elsewhere/p.json"

# Counts from `dump`'s first line: "trace v1: 3 steps, N ops, M worker spans".
read -r steps ops spans < <("$bin" dump "$run" --limit 0 | head -1 | sed -E 's/.*: ([0-9]+) steps, ([0-9]+) ops, ([0-9]+) worker spans.*/\1 \2 \3/')
views=$("$bin" dump "$run" | awk '$6 == "RESHAPE" || $6 == "VIEW" || $6 == "PERMUTE"' | wc -l)
# Split nodes show their second worker: thr "0+1" (2 threads: the prompt's feed-forward products are split).
split=$("$bin" dump "$run" | awk '$5 == "0+1" && $6 == "MUL_MAT"' | wc -l)
[ "$split" -gt 0 ] || fail "dump shows no MUL_MAT shared by two workers (thr 0+1)"

if command -v python3 >/dev/null 2>&1; then
  if python3 - "$run/export/trace.perfetto.json" "$steps" "$spans" "$views" <<'EOF'; then
import json, sys
from collections import defaultdict
path, steps, spans, views = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
d = json.load(open(path))
events = d["traceEvents"]
problems = []
for e in events:
    for k in ("ph", "ts", "pid", "tid", "name"):
        if k not in e:
            problems.append(f"event without {k}: {e}")
    if e.get("ph") == "X" and "dur" not in e:
        problems.append(f"X event without dur: {e}")
x = [e for e in events if e["ph"] == "X"]
op = [e for e in x if e.get("cat") == "op"]
vw = [e for e in x if e.get("cat") == "view"]
st = [e for e in x if e.get("cat") == "step"]
if len(op) != spans: problems.append(f"{len(op)} op slices, {spans} spans")
if len(vw) != views: problems.append(f"{len(vw)} view slices, {views} views")
if len(st) != steps: problems.append(f"{len(st)} step slices, {steps} steps")
names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
for n in ("steps", "worker 0", "worker 1"):
    if n not in names: problems.append(f"no thread named {n!r}")
per_tid = defaultdict(list)
for e in op:
    per_tid[e["tid"]].append((round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)))
for tid, v in per_tid.items():
    v.sort()
    for a, b in zip(v, v[1:]):
        if b[0] < a[1]: problems.append(f"tid {tid}: slices overlap {a} {b}")
if not any(e["ph"] == "C" for e in events): problems.append("no counter events")
if problems:
    print("\n".join(problems[:10]), file=sys.stderr)
    sys.exit(1)
print(f"python json: {len(events)} events, {len(op)} op slices, {len(vw)} views, {len(st)} steps")
EOF
    echo "ok: perfetto JSON loads in python"
  else
    fail "perfetto JSON check in python"
  fi
else
  echo "skip: python3 not installed"
fi

if command -v sqlite3 >/dev/null 2>&1; then
  got=$(sqlite3 "$run/export/trace.sqlite" "SELECT count(*) FROM ops; SELECT count(*) FROM spans; SELECT count(*) FROM steps;" | tr '\n' ' ')
  if [ "$got" = "$ops $spans $steps " ]; then echo "ok: sqlite3 counts $got"; else fail "sqlite3 counts '$got', expected '$ops $spans $steps '"; fi
else
  echo "skip: sqlite3 shell not installed"
fi

# expect_error DESCRIPTION PATTERN ARGS...: non-zero exit, one stderr line starting with "tensortrace", matching.
expect_error() {
  local what=$1 pattern=$2
  shift 2
  local status=0
  "$bin" "$@" >"$scratch/out" 2>"$scratch/err" </dev/null || status=$?
  if [ "$status" -eq 0 ] || [ "$status" -ge 128 ]; then
    fail "$what: exit status $status"
  elif [ "$(wc -l <"$scratch/err")" -ne 1 ] || ! grep -q '^tensortrace' "$scratch/err" ||
    ! grep -Eq -- "$pattern" "$scratch/err"; then
    fail "$what: stderr $(cat "$scratch/err")"
  else
    echo "ok: $what: $(cat "$scratch/err")"
  fi
}
expect_error "a missing run directory" "'$scratch/nope' does not exist" export "$scratch/nope" --format sqlite
mkdir -p "$scratch/empty"
expect_error "a non-run directory" "is not a run directory" export "$scratch/empty" --format perfetto
expect_error "an unknown format" "unknown format 'csv'" export "$run" --format csv
expect_error "no format" "format is required" export "$run"

# A truncated trace: exported up to the last complete record, with a warning; exit 0.
cp -r "$run" "$scratch/cut"
rm -rf "$scratch/cut/export"
size=$(stat -c %s "$scratch/cut/trace.bin")
truncate -s $((size * 2 / 3)) "$scratch/cut/trace.bin"
for format in perfetto sqlite tokens-json; do
  if ! "$bin" export "$scratch/cut" --format "$format" >"$scratch/out" 2>"$scratch/err"; then
    fail "truncated trace, $format: $(cat "$scratch/err")"
  elif ! grep -q "warning: trace.bin is truncated at byte" "$scratch/err"; then
    fail "truncated trace, $format: no warning: $(cat "$scratch/err")"
  else
    echo "ok: truncated trace, $format: $(head -1 "$scratch/err")"
  fi
done

if [ "$failures" -ne 0 ]; then
  echo "export.sh: $failures failure(s)" >&2
  exit 1
fi
echo "export.sh: ok"
