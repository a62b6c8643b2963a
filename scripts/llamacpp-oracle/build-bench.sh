#!/usr/bin/env bash
# Builds llamacpp-bench (llama-bench's pp/tg timing against node-llama-cpp's prebuilt llama.cpp libraries) into
# OUT_DIR (default build/llamacpp-bench beside this script's package), with the headers of the llama.cpp release
# those libraries were built from (node-llama-cpp ships its source as a git bundle). Needs `npm install` here first.
# Usage: scripts/llamacpp-oracle/build-bench.sh [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "${1:-$here/build}")
bins=$here/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
bundle=$here/node_modules/node-llama-cpp/llama/gitRelease.bundle
for f in "$bins/libllama.v0.5.0.so" "$bundle"; do
  [ -e "$f" ] || {
    echo "build-bench.sh: '$f' missing (cd $here && npm ci)" >&2
    exit 1
  }
done
mkdir -p "$out"
if [ ! -f "$out/include/llama.h" ]; then
  src=$(mktemp -d "${TMPDIR:-/tmp}/llamacpp-src.XXXXXX")
  trap 'rm -rf "$src"' EXIT
  git clone -q --no-checkout "$bundle" "$src/repo"
  git -C "$src/repo" archive HEAD include ggml/include | tar -x -C "$src"
  mkdir -p "$out/include"
  cp "$src"/include/*.h "$src"/ggml/include/*.h "$out/include/"
fi
g++ -std=c++17 -O2 -I "$out/include" -DLLAMACPP_BINS="\"$bins\"" "$here/llamacpp-bench.cpp" -o "$out/llamacpp-bench" \
  "$bins/libllama.v0.5.0.so" "$bins/libggml.v0.5.0.so" "$bins/libggml-base.so" -Wl,-rpath,"$bins"
echo "$out/llamacpp-bench"
