#!/usr/bin/env bash
# Every subcommand that opens a run directory reads it through the one loader (tt::load_run) and refuses the same
# damaged directory with the same one-line error: a trace reading past the model file, a buffer range past its
# buffer, a field of the wrong type. `dump` read trace.bin without these checks.
# Usage: tests/cli/rundir_errors.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
failures=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-rundir.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# shellcheck source=lib/expect_error.sh
source "$(dirname "$0")/lib/expect_error.sh"

"$bin" run -m "$repo/models/stories260K.gguf" -p "Once upon a time" -n 2 --temp 0 -t 1 --no-progress \
  -o "$scratch/run" >/dev/null 2>&1 || { echo "FAIL: demo run" >&2; exit 1; }

# edited NAME FILE PYTHON: a copy of the run whose FILE (JSON) is changed by PYTHON acting on `j`.
edited() {
  cp -r "$scratch/run" "$scratch/$1"
  python3 - "$scratch/$1/$2" "$3" <<'PY'
import json, sys
path, code = sys.argv[1], sys.argv[2]
j = json.load(open(path))
exec(code)
json.dump(j, open(path, "w"))
PY
}
# Layer 0's K cache (buffer 3) one byte long in buffers.json: the trace reads more of it.
edited small-kv buffers.json 'j["events"] = [e[:6] + [1] + e[7:] if e[4] == 3 else e for e in j["events"]]'
edited bad-type memory-map.json 'j["tensors"][0]["offset_start"] = "zero"'

for cmd in dump analyze "export --format perfetto -o $scratch/out.json" "diff $scratch/run"; do
  # shellcheck disable=SC2086
  set -- $cmd
  sub=$1
  shift
  expect_error "$sub: a buffer range past its buffer" "touches [0-9]+ bytes of buffer 3 \(K cache L0\) at offset [0-9]+, past its 1 bytes in buffers.json" \
    "$sub" "$scratch/small-kv" "$@"
  expect_error "$sub: a field of the wrong type" "memory-map.json': field 'tensors\[0\].offset_start' is \"zero\", expected an integer" \
    "$sub" "$scratch/bad-type" "$@"
done

[ "$failures" -eq 0 ] && echo "run directory errors: all checks passed"
exit $((failures > 0))
