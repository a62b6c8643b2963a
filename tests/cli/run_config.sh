#!/usr/bin/env bash
# `--config FILE` (TOML, keys = long option names): its values take effect in run (the model and flags too), the
# command line overrides them, run.json records the file and the values read; bench reads it the same way.
# Usage: tests/cli/run_config.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
# Absolute: the script changes directory.
bin=$(realpath "$1")
repo=$(realpath "$2")
model=$repo/models/stories260K.gguf
failures=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-run-config.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# options RUN_DIR EXPRESSION: a Python expression over o = run.json's "options".
options() {
  python3 -c 'import json, sys; o = json.load(open(sys.argv[1] + "/run.json"))["options"]; print(eval(sys.argv[2]))' "$1" "$2"
}

cat >"$scratch/run.toml" <<EOF
# Greedy, 7 tokens, the bundled model, no progress lines.
model = "$model"
n-predict = 7
temp = 0.0
top-k = 5
no-progress = true
EOF

# The file's values take effect; -m comes from the file too.
if "$bin" run -p "Once upon a time" --config "$scratch/run.toml" -o "$scratch/a" >"$scratch/out" 2>"$scratch/err"; then
  [ "$(options "$scratch/a" 'o["n_predict"]')" = 7 ] || fail "n-predict = 7 from the file did not take effect"
  [ "$(options "$scratch/a" 'o["sampling"]["top_k"]')" = 5 ] || fail "top-k = 5 from the file did not take effect"
  [ "$(options "$scratch/a" 'o["sampling"]["temperature"]')" = 0.0 ] || fail "temp = 0.0 from the file did not take effect"
  grep -q "loading" "$scratch/err" && fail "no-progress = true from the file did not take effect: $(cat "$scratch/err")"
  [ "$(options "$scratch/a" 'o["config_file"]')" = "$scratch/run.toml" ] ||
    fail "run.json options.config_file is not the file: $(options "$scratch/a" 'o["config_file"]')"
  [ "$(options "$scratch/a" 'json.dumps(o["config"], sort_keys=True)')" = \
    "{\"model\": \"$model\", \"n-predict\": 7, \"no-progress\": true, \"temp\": 0.0, \"top-k\": 5}" ] ||
    fail "run.json options.config is not the values read: $(options "$scratch/a" 'o["config"]')"
else
  fail "run --config exited non-zero: $(cat "$scratch/err")"
fi

# The command line overrides the file; a relative path is recorded absolute.
cd "$scratch" || exit 1
if "$bin" run -p "Once upon a time" --config run.toml -n 3 --top-k 9 -o "$scratch/b" >"$scratch/out" 2>"$scratch/err"; then
  [ "$(options "$scratch/b" 'o["n_predict"]')" = 3 ] || fail "-n 3 on the command line did not override n-predict = 7"
  [ "$(options "$scratch/b" 'o["sampling"]["top_k"]')" = 9 ] || fail "--top-k 9 did not override top-k = 5"
  [ "$(options "$scratch/b" 'o["sampling"]["temperature"]')" = 0.0 ] || fail "temp = 0.0 from the file was lost"
  [ "$(options "$scratch/b" 'o["config_file"]')" = "$scratch/run.toml" ] ||
    fail "a relative --config path is not recorded absolute: $(options "$scratch/b" 'o["config_file"]')"
  # The values read, not the ones that won.
  [ "$(options "$scratch/b" 'o["config"]["n-predict"]')" = 7 ] || fail "run.json options.config lost n-predict = 7"
else
  fail "run --config with overrides exited non-zero: $(cat "$scratch/err")"
fi
cd - >/dev/null || exit 1

# Without --config: config_file is null and config empty.
if "$bin" run -m "$model" -p Hi -n 1 --no-progress -o "$scratch/c" >/dev/null 2>"$scratch/err"; then
  [ "$(options "$scratch/c" 'o["config_file"]')" = None ] || fail "no --config: config_file is not null"
  [ "$(options "$scratch/c" 'o["config"]')" = "{}" ] || fail "no --config: config is not {}"
else
  fail "run without --config exited non-zero: $(cat "$scratch/err")"
fi

# bench: the same mechanism (n-gen from the file, -p from the command line).
printf 'n-gen = 2\nrepetitions = 1\nthreads = 1\n' >"$scratch/bench.toml"
if "$bin" bench -m "$model" -p 0 --config "$scratch/bench.toml" >"$scratch/out" 2>"$scratch/err"; then
  grep -q '| tg2 |' "$scratch/out" || fail "bench: n-gen = 2 from the file did not take effect: $(cat "$scratch/out")"
  grep -q '| pp' "$scratch/out" && fail "bench: -p 0 on the command line did not override the default"
else
  fail "bench --config exited non-zero: $(cat "$scratch/err")"
fi

if [ "$failures" -ne 0 ]; then
  echo "run_config.sh: $failures failure(s)" >&2
  exit 1
fi
echo "run_config.sh: ok"
