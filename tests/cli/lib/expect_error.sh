# Sourced by the tests/cli/*_errors.sh scripts (not a test itself: CTest runs only tests/cli/*.sh).
# Needs $bin (the tensortrace binary), $scratch (a temporary directory) and $failures (a counter) set.

# expect_error DESCRIPTION PATTERN ARGS...: one stderr line starting with "tensortrace" and matching PATTERN.
expect_error() {
  local what=$1 pattern=$2
  shift 2
  local status=0
  "$bin" "$@" >"$scratch/out" 2>"$scratch/err" </dev/null || status=$?
  local lines
  lines=$(wc -l <"$scratch/err")
  local problem=""
  if [ "$status" -eq 0 ]; then
    problem="exit status 0"
  elif [ "$status" -ge 128 ]; then
    problem="killed by signal $((status - 128))"
  elif [ -s "$scratch/out" ]; then
    problem="wrote to stdout: $(head -c 200 "$scratch/out")"
  elif [ "$lines" -ne 1 ]; then
    problem="$lines lines on stderr: $(head -c 400 "$scratch/err")"
  elif ! grep -q '^tensortrace' "$scratch/err"; then
    problem="stderr does not start with 'tensortrace': $(cat "$scratch/err")"
  elif ! grep -Eq -- "$pattern" "$scratch/err"; then
    problem="stderr does not match /$pattern/: $(cat "$scratch/err")"
  fi
  if [ -n "$problem" ]; then
    echo "FAIL: $what (tensortrace $*): $problem" >&2
    failures=$((failures + 1))
  else
    echo "ok: $what: $(cat "$scratch/err")"
  fi
}
