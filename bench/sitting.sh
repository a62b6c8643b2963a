#!/usr/bin/env bash
# One sitting of docs/performance.md's method: for each model, ROUNDS rounds alternating `tensortrace bench`
# (pp128 and tg64) and llama.cpp's (scripts/llamacpp-oracle/llamacpp-bench, llama-bench's timing through
# node-llama-cpp's prebuilt libraries; built here when the oracle's node_modules are installed), then per model the
# median and range over the rounds of each figure, as a Markdown table. The
# machine's two-thread read bandwidth (bench --bandwidth) is measured at the start and the end, and the load average
# is printed with each round: a sitting on a loaded machine says so. Then, for each model whose weights stream from
# memory, one traced `bench -p 0 -n 64 -r 3 --trace` gives generation's weight reads against the probe read after
# each repetition (the roof table).
# Usage: bench/sitting.sh [-r ROUNDS (3)] [-b TENSORTRACE (build/tensortrace)] MODEL.gguf...
set -euo pipefail
rounds=3
bin=build/tensortrace
while getopts "r:b:" o; do
  case $o in
    r) rounds=$OPTARG ;;
    b) bin=$OPTARG ;;
    *)
      echo "usage: bench/sitting.sh [-r ROUNDS] [-b TENSORTRACE] MODEL.gguf..." >&2
      exit 2
      ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || {
  echo "usage: bench/sitting.sh [-r ROUNDS] [-b TENSORTRACE] MODEL.gguf..." >&2
  exit 2
}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || {
  echo "sitting.sh: -r wants a positive number of rounds, got '$rounds'" >&2
  exit 2
}
for m in "$@"; do
  [ -f "$m" ] || {
    echo "sitting.sh: no model file '$m'" >&2
    exit 1
  }
done
oracle=scripts/llamacpp-oracle
llamacpp=""
if [ -d "$oracle/node_modules/node-llama-cpp" ]; then
  llamacpp=$("$oracle/build-bench.sh" | tail -1)
else
  echo "sitting.sh: $oracle/node_modules missing (cd $oracle && npm install: npm 11 refuses npm ci on this lock file, which lists the linux-x64 package alone): llama.cpp's columns left empty" >&2
fi

log=$(mktemp -d "${TMPDIR:-/tmp}/tt-sitting.XXXXXX")
trap 'rm -rf "$log"' EXIT
bandwidth() { "$bin" bench --bandwidth -t 2 2>&1 | grep -o '[0-9.]* GB/s' | tail -1; }
echo "bandwidth at start: $(bandwidth) (2 threads)"
for ((r = 1; r <= rounds; ++r)); do
  for m in "$@"; do
    name=$(basename "$m" .gguf)
    echo "round $r/$rounds $name (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    # bench's table rows end in "| ppN | mean ± sd |"; keep the mean.
    "$bin" bench -m "$m" -p 128 -n 64 -t 2 -r 3 2>/dev/null |
      awk -F'|' -v n="$name" '$(NF-2) ~ /pp|tg/ { gsub(/ /, "", $(NF-2)); split($(NF-1), a, "±"); print n, "tt_" $(NF-2), a[1]+0 }' \
        >>"$log/figures"
    if [ -n "$llamacpp" ]; then
      "$llamacpp" "$m" -p 128 -n 64 -t 2 -r 3 2>/dev/null |
        awk -F'|' -v n="$name" '$(NF-2) ~ /pp|tg/ { gsub(/ /, "", $(NF-2)); split($(NF-1), a, "±"); print n, "llama_" $(NF-2), a[1]+0 }' \
          >>"$log/figures"
    fi
  done
done
echo "bandwidth at end: $(bandwidth) (2 threads)"
for m in "$@"; do
  name=$(basename "$m" .gguf)
  echo "roof $name (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  # Only the per-repetition form: weights in the last-level cache are not bounded by the roof.
  "$bin" bench -m "$m" -p 0 -n 64 -t 2 -r 3 --trace 2>&1 >/dev/null |
    sed -En 's/^tg64: weight reads ([0-9.]+) GB\/s .*, ([0-9]+)% of the machine.s read bandwidth \(median over the repetitions of each against the probe read after it: ([0-9]+-[0-9]+)%; the probe ([0-9.]+) GB\/s, ([0-9.]+-[0-9.]+),.*/\1 \2 \3 \4 \5/p' |
    sed "s/^/$name /" >>"$log/roofs"
done
python3 - "$log/figures" "$@" <<'EOF'
import statistics, sys, os
rows = {}
for line in open(sys.argv[1]):
    name, key, v = line.split()
    rows.setdefault(name, {}).setdefault(key, []).append(float(v))
def cell(v):
    return f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})" if v else ""
def ratio(tt, ll):
    return f"{statistics.median(tt) / statistics.median(ll):.2f}" if tt and ll else ""
print("| model | tt pp128 | llama.cpp pp128 | pp ratio | tt tg64 | llama.cpp tg64 | tg ratio |")
print("|---|---:|---:|---:|---:|---:|---:|")
for m in sys.argv[2:]:
    name = os.path.basename(m)[:-5]
    r = rows.get(name, {})
    cols = []
    for phase in ("pp128", "tg64"):
        tt, ll = r.get("tt_" + phase, []), r.get("llama_" + phase, [])
        cols += [cell(tt), cell(ll), ratio(tt, ll)]
    print(f"| {name} | " + " | ".join(cols) + " |")
EOF
if [ -s "$log/roofs" ]; then
  echo
  echo "| model (traced tg64) | weight reads GB/s | share of the probe read after each repetition: median (range) | probe GB/s: median (range) |"
  echo "|---|---:|---:|---:|"
  while read -r name reads share shares probe probes; do
    echo "| $name | $reads | $share% ($shares%) | $probe ($probes) |"
  done <"$log/roofs"
fi
