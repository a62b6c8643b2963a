#!/usr/bin/env bash
# Bad input to `run` and `--config`, out-of-range numbers for every subcommand's numeric options, an unknown
# subcommand, and `dump` of steps and traces that are not there: each prints exactly one line on stderr starting
# with "tensortrace", nothing on stdout, and exits non-zero.
# Usage: tests/cli/run_errors.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
model=$repo/models/stories260K.gguf
failures=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-run-errors.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# shellcheck source=lib/expect_error.sh
source "$(dirname "$0")/lib/expect_error.sh"

expect_error "an unknown subcommand" "^tensortrace: error: unknown command 'frobnicate' \(see tensortrace --help\)$" \
  frobnicate
expect_error "an unknown subcommand before a known one" "unknown command 'frob' \(see tensortrace --help\)$" \
  frob run -m "$model" -p Hi

# The prompt.
expect_error "an empty -p" "the prompt is empty" run -m "$model" -p ""
expect_error "-f DIRECTORY" "-f: '$scratch' is a directory" run -m "$model" -f "$scratch"
: >"$scratch/empty.txt"
expect_error "-f EMPTY_FILE" "-f: '$scratch/empty.txt' is empty" run -m "$model" -f "$scratch/empty.txt"
expect_error "-f MISSING" "-f: cannot open '$scratch/missing.txt': No such file or directory" \
  run -m "$model" -f "$scratch/missing.txt"
expect_error "-p and -f" "give only one of -p PROMPT or -f PROMPT_FILE" run -m "$model" -p Hi -f "$scratch/empty.txt"
# The prompt is printed once the model has loaded, so nothing reaches stdout before a load error.
expect_error "a missing model" "cannot open '$scratch/missing.gguf'" \
  run --no-progress -m "$scratch/missing.gguf" -p Hello -o "$scratch/never"
[ -e "$scratch/never" ] && echo "FAIL: a run directory was left after a load error" >&2 && failures=$((failures + 1))

# expect_range SUBCOMMAND_ARGS... -- OPTION VALUE: the value is refused with a message naming the option and the
# value (no 309-digit bound).
expect_range() {
  local args=()
  while [ "$1" != "--" ]; do
    args+=("$1")
    shift
  done
  shift
  local option=$1 value=$2
  expect_error "${args[0]} $option $value" "^tensortrace: error: ${option}: must be (an integer|a number) in [[(].*[])], got '${value}'$" \
    "${args[@]}" "$option" "$value"
}
run_args=(run -m "$model" -p Hi --no-trace)
for bad in "--n-predict -1" "--n-predict 2000000" "--threads 0" "--threads 100000" "--ctx-size 0" "--seed -1" \
  "--seed 4294967296" "--temp -1" "--temp nan" \
  "--temp inf" "--top-k -3" "--top-k 99999999" "--top-p 0" "--top-p 1.5" "--min-p -0.1" "--min-p 1" \
  "--repeat-penalty 0" "--repeat-penalty -2" "--repeat-last-n -1" "--logit-top-k 0" "--logit-top-k 5000"; do
  # shellcheck disable=SC2086
  expect_range "${run_args[@]}" -- $bad
done
for bad in "--n-prompt -1" "--n-gen -1" "--threads 0" "--repetitions 0" "--repetitions 100000"; do
  # shellcheck disable=SC2086
  expect_range bench -m "$model" -- $bad
done
for bad in "--port -1" "--port 65536"; do
  # shellcheck disable=SC2086
  expect_range serve "$scratch" -- $bad
done
expect_range analyze "$scratch" -- --page-size -1
expect_range analyze "$scratch" -- --page-size 0
expect_range analyze "$scratch" -- --page-size 99999999999
expect_range dump "$scratch" -- --step -1
expect_range dump "$scratch" -- --limit -1
expect_range diff "$scratch" "$scratch" -- --tolerance -1
expect_range diff "$scratch" "$scratch" -- --tolerance nan
expect_range diff "$scratch" "$scratch" -- --top 0
expect_error "a non-number" "^tensortrace: error: --top-k: must be an integer in \[0, 1048576\], got 'three'$" \
  "${run_args[@]}" --top-k three

# dump: a step past the last one, an empty trace.bin.
if "$bin" run -m "$model" -p Hi -n 2 --no-progress -o "$scratch/run" >/dev/null 2>"$scratch/run-err"; then
  # -n 2: the prompt's step and one generation step.
  expect_error "dump --step past the last step" "step 99999 is not in the trace \(it has 2 steps: 0 to 1\)" \
    dump "$scratch/run" --step 99999
  expect_error "dump --step one past the last step" "step 2 is not in the trace \(it has 2 steps: 0 to 1\)" \
    dump "$scratch/run" --step 2
  cp -r "$scratch/run" "$scratch/run-empty"
  : >"$scratch/run-empty/trace.bin"
  expect_error "an empty trace.bin" "'$scratch/run-empty/trace.bin' is empty \(0 bytes\)" dump "$scratch/run-empty"
else
  echo "FAIL: run for the dump tests exited non-zero: $(cat "$scratch/run-err")" >&2
  failures=$((failures + 1))
fi

# --config: the file, its syntax, its keys and its values.
expect_error "--config MISSING" "^tensortrace: error: run --config: cannot open '$scratch/missing.toml': No such file" \
  run -m "$model" -p Hi --config "$scratch/missing.toml"
expect_error "--config DIRECTORY" "run --config: '$scratch' is a directory" run -m "$model" -p Hi --config "$scratch"
head -c 3000 "$model" >"$scratch/binary.toml"
expect_error "--config BINARY_FILE" "run --config '$scratch/binary.toml': line 1, column [0-9]+: " \
  run -m "$model" -p Hi --config "$scratch/binary.toml"
# config_error NAME CONTENTS PATTERN: run --config with a file holding CONTENTS.
config_error() {
  printf '%s\n' "$2" >"$scratch/$1.toml"
  expect_error "--config $1" "^tensortrace: error: run --config '$scratch/$1.toml': $3" \
    run -m "$model" -p Hi --no-trace --config "$scratch/$1.toml"
}
config_error syntax 'n-predict = = 7' "line 1, column [0-9]+: "
config_error unknown-key 'frobnicate = 1' "unknown key 'frobnicate' \(keys are run's long option names: see tensortrace run --help\)$"
config_error short-key 'n = 7' "unknown key 'n' \(keys are run's long option names"
config_error config-key 'config = "other.toml"' "key 'config' cannot be set in a config file$"
config_error help-key 'help = true' "key 'help' cannot be set in a config file$"
config_error range 'top-k = -3' "key 'top-k': must be an integer in \[0, 1048576\], got '-3'$"
config_error float-range 'top-p = 1.5' "key 'top-p': must be a number in \(0, 1\], got '1.5'$"
config_error not-integer 'n-predict = 1.5' "key 'n-predict': must be an integer in \[0, 1048576\], got '1.5'$"
config_error string-for-number 'n-predict = "seven"' "key 'n-predict': must be an integer in \[0, 1048576\], got 'seven'$"
config_error bool-for-number 'n-predict = true' "key 'n-predict': expected a number or a string, got a boolean$"
config_error choice 'kernel-isa = "sse"' "key 'kernel-isa': sse not in \{auto,amx,avx512,avx2,scalar\}$"
config_error flag-not-bool 'no-trace = 1' "key 'no-trace': expected true or false \(it is a flag\), got 1$"
config_error table $'[sampling]\ntemp = 0.5' "key 'sampling': expected a value, got a table \(keys are top-level\)$"
config_error array 'n-predict = [1, 2]' "key 'n-predict': expected a value, got an array$"
# bench reads the same way.
printf 'n-gen = -1\n' >"$scratch/bench.toml"
expect_error "bench --config with a bad value" "^tensortrace: error: bench --config '$scratch/bench.toml': key 'n-gen': must be an integer in \[0, 65536\], got '-1'$" \
  bench -m "$model" --config "$scratch/bench.toml"

if [ "$failures" -ne 0 ]; then
  echo "run_errors.sh: $failures failure(s)" >&2
  exit 1
fi
echo "run_errors.sh: ok"
