#!/usr/bin/env bash
# record.mjs with llama.cpp's CPU backend variants that have no AMX: on an AMX CPU llama.cpp's best variant
# (sapphirerapids) multiplies Q8_0 and Q4_1 batches on AMX in an order of its own, while the engine's default is the
# order of the shared records' build (AMX off; docs/engine.md). The package is copied to a temporary directory
# without that variant (node-llama-cpp picks the best variant it finds), so the recording runs llama.cpp's next
# best variant for this CPU. Arguments: those of record.mjs.
# Usage: scripts/llamacpp-oracle/record-without-amx.sh MODEL.gguf "PROMPT" N OUT_DIR [INDEX] [THREADS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$here/node_modules/node-llama-cpp" ] || {
  echo "record-without-amx.sh: $here/node_modules missing (cd $here && npm ci)" >&2
  exit 1
}
[ $# -ge 4 ] || {
  echo 'usage: record-without-amx.sh MODEL.gguf "PROMPT" N OUT_DIR [INDEX] [THREADS]' >&2
  exit 2
}
model=$(realpath "$1")
out=$(realpath -m "$4")
copy=$(mktemp -d "${TMPDIR:-/tmp}/llamacpp-oracle.XXXXXX")
trap 'rm -rf "$copy"' EXIT
cp -r "$here/record.mjs" "$here/package.json" "$here/node_modules" "$copy/"
rm -f "$copy"/node_modules/@node-llama-cpp/linux-x64/bins/*/libggml-cpu-sapphirerapids.so
(cd "$copy" && node record.mjs "$model" "$2" "$3" "$out" "${@:5}")
