#!/usr/bin/env bash
# `tensortrace bench` on the bundled model: llama-bench's table with a row per phase (and per tracing mode with
# --trace-overhead, plus the traced/untraced ratios), no run directory left behind, the kernels' instruction set
# chosen with --kernel-isa, bad values refused.
# Usage: tests/cli/bench.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
model=$repo/models/stories260K.gguf
failures=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-bench.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# The benchmark's traced runs write their run directories under TMPDIR and must remove them.
if ! TMPDIR=$scratch "$bin" bench -m "$model" -p 8 -n 8 -t 2 -r 2 --trace-overhead >"$scratch/out" 2>"$scratch/err"; then
  fail "bench --trace-overhead exited non-zero: $(cat "$scratch/err")"
fi
cat "$scratch/out"
for mode in off on; do
  for test in pp8 tg8; do
    # | model | size | params | backend | threads | trace | test | t/s as mean ± std |
    grep -Eq "^\| stories260K \| [^|]+ \| [^|]+ \| [^|]+ \| 2 \| ${mode} \| ${test} \| [0-9]+\.[0-9]+ ± [0-9]+\.[0-9]+ \|$" \
      "$scratch/out" || fail "no table row for tracing $mode, $test"
  done
done
grep -Eq '^\| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| 2 \| (off|on) \| (pp8|tg8) \| 0\.00 ' "$scratch/out" && fail "a rate of 0"
for test in pp8 tg8; do
  # Generation's line also gives the steps.jsonl line's time on the second thread (a positive time).
  line_part=""
  [ "$test" = tg8 ] && line_part="; its steps.jsonl line took ([1-9][0-9]*\.[0-9]|0\.[1-9]) ± [0-9]+\.[0-9] us on thread 1, beside the next step's preparation"
  grep -Eq "^- ${test}: traced/untraced [0-9]+\.[0-9]{3} ± [0-9]+\.[0-9]{3} \(median [0-9]+\.[0-9]{3}\) over 2 pairs \(overhead -?[0-9]+\.[0-9]%, -?[0-9]+\.[0-9] ± [0-9]+\.[0-9] us a token \(median -?[0-9]+\.[0-9]\), of which [0-9]+\.[0-9] ± [0-9]+\.[0-9] us in the tracer's callbacks${line_part}\)$" \
    "$scratch/out" || fail "no overhead line for $test"
  # Two pairs: the median of the ratios is their mean.
  ratios=$(sed -En "s/^- ${test}: traced\/untraced ([0-9.]+) ± [0-9.]+ \(median ([0-9.]+)\).*/\1 \2/p" "$scratch/out")
  [ "${ratios% *}" = "${ratios#* }" ] || fail "$test: the median of two ratios is not their mean: $ratios"
  # The median's interval (order statistics): two pairs hold it at 50%, too few for a verdict on tracing's bound,
  # which only generation gets: at most 15 us added a step where an untraced step takes under 1 ms (stories260K on
  # an idle machine), else within 3% (the same steps on a busy one).
  verdict=""
  [ "$test" = tg8 ] && verdict="; an untraced step takes (under 1000 us: at most 15 us added a step \(median -?[0-9]+\.[0-9], interval -?[0-9]+\.[0-9]--?[0-9]+\.[0-9]\)|1000 us or more: within 3% of untraced): undecided \(2 pairs are too few for a 95% interval\)"
  grep -Eq "^- ${test}: median ratio [0-9]+\.[0-9]{3}, 50\.0% interval [0-9]+\.[0-9]{3}-[0-9]+\.[0-9]{3} \(order statistics of the 2 pairs\)${verdict}$" \
    "$scratch/out" || fail "no median interval line for $test"
  # The pairs grouped by the threads' round trip before each run: every pair in one group or among the mixed ones.
  line=$(grep -E "^- ${test} by the threads' round trip:( [0-9]+ pairs at [0-9]+-[0-9]+ ns, median ratio [0-9]+\.[0-9]{3} \([0-9]+\.[0-9]% interval [0-9]+\.[0-9]{3}-[0-9]+\.[0-9]{3}\), median -?[0-9]+\.[0-9] us a token;)* [0-9]+ pairs whose two runs met different round trips$" "$scratch/out")
  if [ -z "$line" ]; then
    fail "no round-trip line for $test"
  else
    counted=$(echo "$line" | grep -Eo '[0-9]+ pairs' | awk '{n += $1} END {print n}')
    [ "$counted" = 2 ] || fail "$test: the round-trip groups hold $counted pairs, not 2: $line"
  fi
  grep -Eq "^${test}: threads 0 and 1's round trip before each run: median [0-9]+ ns \([0-9]+-[0-9]+\)$" "$scratch/err" ||
    fail "no round trip on stderr for $test: $(cat "$scratch/err")"
done
leftover=$(find "$scratch" -mindepth 1 -maxdepth 1 -name 'tt-bench-*' | head -1)
[ -z "$leftover" ] || fail "run directory left behind: $leftover"

# Without --trace-overhead: one mode, no ratio lines.
"$bin" bench -m "$model" -p 0 -n 4 -t 1 -r 1 >"$scratch/plain" 2>"$scratch/plain-err" || fail "plain bench exited non-zero"
grep -q "round trip" "$scratch/plain-err" && fail "one thread: a round trip printed"
[ "$(grep -c '| tg4 |' "$scratch/plain")" -eq 1 ] || fail "plain bench: expected one tg4 row: $(cat "$scratch/plain")"
grep -q 'traced/untraced' "$scratch/plain" && fail "plain bench printed an overhead line"

# Generation's weight-read rate beside the machine's read bandwidth, on stderr: for weights that fit the last-level
# cache (--probe auto), the probe read once after the runs.
grep -Eq '^tg4: weight reads [0-9]+\.[0-9]{2} GB/s \([0-9]+\.[0-9] MiB per token, median\), [0-9]+% of the machine'"'"'s read bandwidth [0-9]+\.[0-9]{2} GB/s with 1 thread \(read once after the runs\)$' \
  "$scratch/plain-err" || fail "plain bench: no weight-read rate beside the read bandwidth: $(cat "$scratch/plain-err")"
grep -Eq ' 0\.00 GB/s' "$scratch/plain-err" && fail "plain bench: a rate of 0: $(cat "$scratch/plain-err")"

# --probe each: the probe read after each repetition, each repetition against its own (the form bench/sitting.sh
# parses); no such line for a prompt-only run.
"$bin" bench -m "$model" -p 0 -n 4 -t 2 -r 3 --probe each >/dev/null 2>"$scratch/each-err" || fail "bench --probe each exited non-zero"
grep -Eq '^tg4: weight reads [0-9]+\.[0-9]{2} GB/s \([0-9]+\.[0-9] MiB per token, median\), [0-9]+% of the machine'"'"'s read bandwidth \(median over the repetitions of each against the probe read after it: [0-9]+-[0-9]+%; the probe [0-9]+\.[0-9]{2} GB/s, [0-9]+\.[0-9]{2}-[0-9]+\.[0-9]{2}, with 2 threads\)$' \
  "$scratch/each-err" || fail "bench --probe each: no per-repetition roof: $(cat "$scratch/each-err")"
grep -Eq ' 0\.00 GB/s' "$scratch/each-err" && fail "bench --probe each: a rate of 0: $(cat "$scratch/each-err")"
"$bin" bench -m "$model" -p 4 -n 0 -t 1 -r 1 --probe each >/dev/null 2>"$scratch/pp-err" || fail "bench -n 0 --probe each exited non-zero"
grep -q "weight reads" "$scratch/pp-err" && fail "bench -n 0: a weight-read line without generation"
"$bin" bench -m "$model" -p 0 -n 4 --probe always >/dev/null 2>"$scratch/bad-probe" && fail "bench --probe always accepted"
grep -q -- "--probe" "$scratch/bad-probe" || fail "bench --probe always: the error does not name the option: $(cat "$scratch/bad-probe")"

# -d: each test after that many tokens in the cache (llama-bench's "@ d" rows).
"$bin" bench -m "$model" -p 4 -n 4 -d 64 -t 1 -r 1 >"$scratch/depth" 2>/dev/null || fail "bench -d 64 exited non-zero"
for test in pp4 tg4; do
  grep -Eq "^\| stories260K \| [^|]+ \| [^|]+ \| [^|]+ \| 1 \| off \| ${test} @ d64 \| [0-9]+\.[0-9]+ ± [0-9]+\.[0-9]+ \|$" \
    "$scratch/depth" || fail "bench -d 64: no row for ${test} @ d64: $(cat "$scratch/depth")"
done

# A mixture of experts reads, of each expert tensor, the experts a token is routed to: its bytes per token are the
# weights' less the embedding table and less the unused experts' share (counted here from inspect --json).
moe=$repo/../shared/models/synth-qwen3moe-256.Q4_K_M.gguf
if [ ! -f "$moe" ]; then
  echo "SKIP: a mixture of experts' bytes per token ($moe is absent)"
else
  expected=$("$bin" inspect --json "$moe" | python3 -c '
import json, sys
d = json.load(sys.stdin)
total = sum(t["size_bytes"] for t in d["tensors"])
names = {t["name"] for t in d["tensors"]}
total -= sum(t["size_bytes"] for t in d["tensors"] if t["name"] == "token_embd.weight" and "output.weight" in names)
total -= sum(t["size_bytes"] * (64 - 8) // 64 for t in d["tensors"] if "_exps." in t["name"])
print(f"{total / 1048576:.1f}")')
  "$bin" bench -m "$moe" -p 0 -n 2 -t 1 -r 1 >/dev/null 2>"$scratch/moe-err" || fail "bench on $moe exited non-zero"
  grep -q "^tg2: weight reads [0-9.]* GB/s ($expected MiB per token, median)" "$scratch/moe-err" ||
    fail "bench on $moe: not $expected MiB per token (its 8 of 64 experts): $(cat "$scratch/moe-err")"
  layout=$("$bin" inspect "$moe")
  grep -Eq 'expert_count +64$' <<<"$layout" || fail "$moe: not 64 experts (the check above assumes 64, 8 used)"
  grep -Eq 'expert_used_count +8$' <<<"$layout" || fail "$moe: not 8 experts used"
fi

# --bandwidth: the probe alone, no model needed; 1 thread and -t threads.
if "$bin" bench --bandwidth -t 2 >"$scratch/bw" 2>"$scratch/bw-err"; then
  grep -Eq '^read bandwidth \(2048 MiB array, best of 3 passes\): [0-9]+\.[0-9]{2} GB/s with 1 thread, [0-9]+\.[0-9]{2} GB/s with 2 threads$' \
    "$scratch/bw" || fail "bench --bandwidth: unexpected output: $(cat "$scratch/bw")"
  grep -Eq ' 0\.00 GB/s' "$scratch/bw" && fail "bench --bandwidth: a rate of 0"
else
  fail "bench --bandwidth exited non-zero: $(cat "$scratch/bw-err")"
fi
# Without --bandwidth a model is required.
if "$bin" bench -n 4 >/dev/null 2>"$scratch/err"; then
  fail "bench without -m exited 0"
elif ! grep -q -- '-m MODEL is required' "$scratch/err"; then
  fail "bench without -m: unclear error: $(cat "$scratch/err")"
fi

# --kernel-isa caps the kernels' instruction set; the backend column names the one used.
"$bin" bench -m "$model" -p 4 -n 4 -t 1 -r 1 --kernel-isa scalar >"$scratch/scalar" 2>/dev/null ||
  fail "bench --kernel-isa scalar exited non-zero"
[ "$(grep -Ec '^\| stories260K \| [^|]+ \| [^|]+ \| CPU scalar \| 1 \| off \| (pp4|tg4) \|' "$scratch/scalar")" -eq 2 ] ||
  fail "bench --kernel-isa scalar: expected two rows on 'CPU scalar': $(cat "$scratch/scalar")"

# amx where the CPU has AMX-INT8 (the project's machines): the backend column says so, and avx512 keeps the
# AVX-512 VNNI kernels; elsewhere amx is refused by name.
if grep -qw amx_int8 /proc/cpuinfo; then
  for isa in amx:amx avx512:avx512-vnni; do
    "$bin" bench -m "$model" -p 4 -n 0 -t 1 -r 1 --kernel-isa "${isa%%:*}" >"$scratch/isa" 2>/dev/null ||
      fail "bench --kernel-isa ${isa%%:*} exited non-zero"
    grep -Eq "^\| stories260K \| [^|]+ \| [^|]+ \| CPU ${isa#*:} \| 1 \| off \| pp4 \|" "$scratch/isa" ||
      fail "bench --kernel-isa ${isa%%:*}: expected a row on 'CPU ${isa#*:}': $(cat "$scratch/isa")"
  done
elif "$bin" bench -m "$model" -p 4 -n 0 -t 1 -r 1 --kernel-isa amx >/dev/null 2>"$scratch/err"; then
  fail "bench --kernel-isa amx exited 0 on a CPU without AMX-INT8"
elif ! grep -q 'no AMX-INT8' "$scratch/err"; then
  fail "bench --kernel-isa amx without AMX: unclear error: $(cat "$scratch/err")"
fi

# Bad values: a clear error and a non-zero exit.
for args in "-r 0" "-p 0 -n 0" "-t 0" "-n -3" "-d -1" "--kernel-isa sse9"; do
  # shellcheck disable=SC2086
  if "$bin" bench -m "$model" $args >/dev/null 2>"$scratch/err"; then
    fail "bench $args exited 0"
  elif ! [ -s "$scratch/err" ]; then
    fail "bench $args: nothing on stderr"
  fi
done

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "bench: all checks passed"
