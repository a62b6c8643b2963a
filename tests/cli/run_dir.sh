#!/usr/bin/env bash
# A run directory is owned by one process (docs/run-directory.md): a second run on the same -o is refused naming the
# first; a stale RUN_DIR.partial is kept unless --overwrite; default names never collide; SIGINT and SIGTERM stop
# after the current step with a finished run directory (exit 130 / 143), and a second SIGINT ends the run at once.
# Usage: tests/cli/run_dir.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$(realpath "$1")
repo=$2
model=$(realpath "$repo/models/stories260K.gguf")
failures=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-run-dir.XXXXXX")
background=()
cleanup() {
  for p in "${background[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$scratch"
}
trap cleanup EXIT

bad() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
good() { echo "ok: $*"; }

short=(run -m "$model" -p "Once upon a time" -n 4 --temp 0 -t 1 --no-progress)
# Long (the model's whole context: about 4.7 KB of text) for runs held mid-generation by held_run.
long=(run -m "$model" -p "Once upon a time" -n 2040 --temp 0 -t 1 --no-progress)

# wait_for PATH: until it exists and is not empty (at most 120 s).
wait_for() {
  for _ in $(seq 1200); do
    [ -s "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

# held_run NAME ARGS...: runs `tensortrace ARGS...` with its stdout into a pipe of 4 KiB that nobody reads, so the
# run blocks writing a token mid-generation; then writes its pid to NAME.held, waits for the file NAME.release,
# drains the pipe (the run goes on) and writes its exit status (128 + signal after a signal) to NAME.status and
# stderr to NAME.err. Run it in the background.
held_run() {
  local name=$1
  shift
  python3 - "$scratch/$name" "$bin" "$@" <<'PY'
import array, fcntl, os, subprocess, sys, termios, time
prefix, cmd = sys.argv[1], sys.argv[2:]
r, w = os.pipe()
fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ: the smallest pipe
with open(prefix + ".err", "w") as err:
    p = subprocess.Popen(cmd, stdout=w, stderr=err, stdin=subprocess.DEVNULL)
os.close(w)
# Held: the pipe is full, or the run sleeps in a write to it (a write that does not fit the page's room waits for
# a reader, so the pipe may hold a little under 4 KiB).
def writing_to_pipe():
    try:
        with open(f"/proc/{p.pid}/wchan") as f:
            return "pipe_write" in f.read()
    except OSError:
        return False
queued = array.array("i", [0])
while queued[0] < 4096 and p.poll() is None and not writing_to_pipe():
    time.sleep(0.01)
    fcntl.ioctl(r, termios.FIONREAD, queued)
with open(prefix + ".held", "w") as f:
    f.write(str(p.pid) if p.poll() is None else "finished")
while not os.path.exists(prefix + ".release"):
    time.sleep(0.01)
while os.read(r, 65536):
    pass
rc = p.wait()
with open(prefix + ".status", "w") as f:
    f.write(str(128 - rc if rc < 0 else rc))
PY
}

# check_finished DIR INTERRUPTED: run.json says interrupted=INTERRUPTED (true/false), steps_done is the number of
# lines in steps.jsonl and of steps in run.json's trace counts, and `dump` reads the whole trace.
check_finished() {
  local dir=$1 interrupted=$2
  if [ ! -f "$dir/run.json" ] || [ -e "$dir.partial" ]; then
    bad "$dir: not finished ($(ls -d "$dir"* 2>/dev/null | tr '\n' ' '))"
    return
  fi
  local lines
  lines=$(wc -l <"$dir/steps.jsonl")
  if ! python3 - "$dir/run.json" "$interrupted" "$lines" <<'PY'; then
import json, sys
run = json.load(open(sys.argv[1]))
want = sys.argv[2] == "true"
lines = int(sys.argv[3])
problems = []
if run.get("interrupted") is not want:
    problems.append(f"interrupted is {run.get('interrupted')!r}, expected {want}")
if run.get("steps_done") != lines:
    problems.append(f"steps_done {run.get('steps_done')!r} but steps.jsonl has {lines} lines")
if run["trace"]["steps"] != lines:
    problems.append(f"trace.steps {run['trace']['steps']} but steps.jsonl has {lines} lines")
if want and not (0 < lines < 2040):
    problems.append(f"{lines} steps: not stopped mid-run")
if problems:
    print("; ".join(problems), file=sys.stderr)
    sys.exit(1)
PY
    bad "$dir: run.json does not match the directory"
    return
  fi
  if ! "$bin" dump "$dir" --limit 1 >"$scratch/dump.out" 2>"$scratch/dump.err"; then
    bad "$dir: dump fails: $(cat "$scratch/dump.err")"
    return
  fi
  good "$dir finished: interrupted $interrupted, $lines steps, dump reads it"
}

cd "$scratch" || exit 1

# 1. Two runs on one -o: the second is refused while the first runs (stopped, so it stays mid-run), naming it; the
#    first finishes a directory of its own.
held_run first "${long[@]}" -o "$scratch/shared" &
driver=$!
background+=("$driver")
wait_for "$scratch/first.held"
first=$(cat "$scratch/first.held")
if [ "$first" -gt 0 ] 2>/dev/null && [ -d "$scratch/shared.partial" ]; then
  for extra in "" --overwrite; do
    status=0
    "$bin" "${short[@]}" -o "$scratch/shared" $extra >/dev/null 2>"$scratch/second.err" || status=$?
    if [ "$status" -eq 0 ] || ! grep -q "shared.partial' is being written by process $first" "$scratch/second.err"; then
      bad "a second run ${extra:+($extra) }on a busy -o: exit $status, $(cat "$scratch/second.err")"
    else
      good "a second run ${extra:+($extra) }is refused: $(cat "$scratch/second.err")"
    fi
  done
else
  bad "the first run was not held mid-run: $first, $(cat "$scratch/first.err")"
fi
touch "$scratch/first.release"
wait "$driver"
[ "$(cat "$scratch/first.status")" = 0 ] || bad "the first run failed: $(tail -3 "$scratch/first.err")"
check_finished "$scratch/shared" false
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["options"]["n_predict"])' \
  "$scratch/shared/run.json" 2>&1)" = 2040 ] || bad "shared/run.json is not the first run's"

# 2. A stale partial (a killed run's, or the user's) is kept and named; --overwrite deletes it.
mkdir "$scratch/user.partial"
echo data >"$scratch/user.partial/keep.txt"
status=0
"$bin" "${short[@]}" -o "$scratch/user" >/dev/null 2>"$scratch/err" || status=$?
if [ "$status" -eq 0 ] || [ "$(wc -l <"$scratch/err")" -ne 1 ] || ! grep -q "user.partial' is left from a run" "$scratch/err" ||
  ! grep -q -- "--overwrite" "$scratch/err" || [ ! -f "$scratch/user.partial/keep.txt" ] || [ -e "$scratch/user" ]; then
  bad "a stale partial: exit $status, $(cat "$scratch/err"), keep.txt $(cat "$scratch/user.partial/keep.txt" 2>&1)"
else
  good "a stale partial is kept: $(cat "$scratch/err")"
fi
if "$bin" "${short[@]}" -o "$scratch/user" --overwrite >/dev/null 2>"$scratch/err" && [ ! -e "$scratch/user.partial" ]; then
  check_finished "$scratch/user" false
else
  bad "--overwrite over a stale partial: $(cat "$scratch/err")"
fi
# An existing run: refused without --overwrite, replaced with it; a directory that is no run is never replaced.
status=0
"$bin" "${short[@]}" -o "$scratch/user" >/dev/null 2>"$scratch/err" || status=$?
[ "$status" -ne 0 ] && grep -q "'$scratch/user' already exists" "$scratch/err" ||
  bad "an existing run directory: exit $status, $(cat "$scratch/err")"
if "$bin" run -m "$model" -p "Hello" -n 2 --temp 0 -t 1 --no-progress -o "$scratch/user" --overwrite >/dev/null \
  2>"$scratch/err" && grep -q '"prompt": "Hello"' "$scratch/user/run.json" && [ -z "$(ls -A "$scratch" | grep tensortrace)" ]; then
  good "--overwrite replaces a finished run"
else
  bad "--overwrite over a finished run: $(cat "$scratch/err"); $(ls -A "$scratch")"
fi
mkdir -p "$scratch/notes"
echo mine >"$scratch/notes/file.txt"
status=0
"$bin" "${short[@]}" -o "$scratch/notes" --overwrite >/dev/null 2>"$scratch/err" || status=$?
if [ "$status" -eq 0 ] || ! grep -q "not a run directory" "$scratch/err" || [ ! -f "$scratch/notes/file.txt" ]; then
  bad "--overwrite over a directory that is no run: exit $status, $(cat "$scratch/err")"
else
  good "--overwrite leaves a directory that is no run: $(cat "$scratch/err")"
fi

# 3. Default names: taken names get -2, -3, ... Every name of the next 30 seconds is taken (as by runs in the same
#    second), and three runs start at once.
mkdir -p "$scratch/runs"
now=$(date +%s)
for s in $(seq 0 29); do
  d="$scratch/runs/$(date -d "@$((now + s))" +%Y%m%d-%H%M%S)-stories260K"
  mkdir "$d" && echo '{}' >"$d/run.json"
done
pids=()
for i in 1 2 3; do
  "$bin" "${short[@]}" >/dev/null 2>"$scratch/default-$i.err" &
  pids+=("$!")
done
for i in 1 2 3; do
  wait "${pids[$((i - 1))]}" || bad "default name run $i: $(cat "$scratch/default-$i.err")"
done
made=$(ls "$scratch/runs" | grep -c -- '-stories260K-[0-9]*$')
if [ "$made" -ne 3 ] || ls -a "$scratch/runs" | grep -q -e partial -e '^\.tensortrace'; then
  bad "default names: $made new run directories: $(ls -a "$scratch/runs" | tr '\n' ' ')"
else
  for d in "$scratch"/runs/*-stories260K-[0-9]*; do check_finished "$d" false; done
fi

# 4. SIGINT and SIGTERM mid-run: the run stops after the current step and finishes its directory. Two SIGINTs: the
#    second ends it at once, as the default action (the partial directory stays, as after a kill).
for sig in INT TERM INT,INT; do
  name=sig${sig/,/-}
  held_run "$name" "${long[@]}" -o "$scratch/$name" &
  driver=$!
  background+=("$driver")
  wait_for "$scratch/$name.held"
  pid=$(cat "$scratch/$name.held")
  if ! [ "$pid" -gt 0 ] 2>/dev/null; then
    bad "$name: the run was not held mid-run: $pid"
  else
    for s in ${sig/,/ }; do
      # Signals of one kind do not queue: the next is sent once this one is handled (no longer pending).
      kill -"$s" "$pid"
      for _ in $(seq 600); do
        grep -q '^ShdPnd:\s*0*$' "/proc/$pid/status" 2>/dev/null && break
        sleep 0.01
      done
    done
  fi
  touch "$scratch/$name.release"
  wait "$driver"
  status=$(cat "$scratch/$name.status")
  want=$((128 + $(kill -l "${sig%,*}")))
  if [ "$sig" = INT,INT ]; then
    if [ "$status" -ne 130 ] || [ -e "$scratch/$name" ] || [ ! -d "$scratch/$name.partial" ]; then
      bad "two SIGINTs: exit $status, $(ls -d "$scratch/$name"* | tr '\n' ' ') $(tail -2 "$scratch/$name.err")"
    else
      good "two SIGINTs end the run at once (exit 130, $name.partial stays)"
    fi
  elif [ "$status" -ne "$want" ] || ! grep -q "interrupted by SIG$sig" "$scratch/$name.err"; then
    bad "SIG$sig: exit $status (expected $want): $(tail -3 "$scratch/$name.err")"
  else
    check_finished "$scratch/$name" true
  fi
done

if [ "$failures" -ne 0 ]; then
  echo "run_dir.sh: $failures failure(s)" >&2
  exit 1
fi
echo "run_dir.sh: ok"
