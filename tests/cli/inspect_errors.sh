#!/usr/bin/env bash
# Every way `tensortrace inspect` can be given bad input: exactly one line on stderr starting with "tensortrace",
# nothing on stdout, a non-zero exit.
# Usage: tests/cli/inspect_errors.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
failures=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-errors.XXXXXX")
trap 'chmod -R u+rwx "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT

# shellcheck source=lib/expect_error.sh
source "$(dirname "$0")/lib/expect_error.sh"

expect_error "no arguments" "subcommand is required"
expect_error "inspect without a model" "model is required" inspect
expect_error "a bad flag" "--no-such-flag" inspect --no-such-flag "$repo/models/stories260K.gguf"
expect_error "a bad flag before the subcommand" "error" --no-such-flag
expect_error "a missing file" "cannot open '$scratch/missing.gguf': No such file or directory" \
  inspect "$scratch/missing.gguf"
expect_error "a directory" "'$scratch' is a directory" inspect "$scratch"

printf 'hello, this is not a model\n' >"$scratch/text.gguf"
expect_error "a non-GGUF file" "text.gguf: not a GGUF file: bad magic 68656c6c" inspect "$scratch/text.gguf"
: >"$scratch/empty.gguf"
expect_error "an empty file" "empty.gguf' is empty" inspect "$scratch/empty.gguf"
head -c 20000 "$repo/models/stories260K.gguf" >"$scratch/cut.gguf"
expect_error "a truncated model" "cut.gguf: .*tensor '[a-z_.0-9]+' .* extends past the end of the file \(20000 bytes\)" \
  inspect "$scratch/cut.gguf"
head -c 5000 "$repo/models/stories260K.gguf" >"$scratch/cut-meta.gguf"
expect_error "a model cut inside its metadata" "cut-meta.gguf: .*(truncated|past the end|cannot fit)" \
  inspect --json "$scratch/cut-meta.gguf"

printf 'GGUF\x01\x00\x00\x00' >"$scratch/v1.gguf"
expect_error "a GGUF v1 file" "GGUF v1 is not supported" inspect "$scratch/v1.gguf"

cp "$repo/models/stories260K.gguf" "$scratch/unreadable.gguf"
chmod 000 "$scratch/unreadable.gguf"
if [ -r "$scratch/unreadable.gguf" ]; then
  echo "skip: an unreadable file (running as root: chmod 000 does not stop reading)"
else
  expect_error "an unreadable file" "cannot open '$scratch/unreadable.gguf': Permission denied" \
    inspect "$scratch/unreadable.gguf"
fi

if [ "$failures" -ne 0 ]; then
  echo "inspect_errors.sh: $failures failure(s)" >&2
  exit 1
fi
echo "inspect_errors.sh: ok"
