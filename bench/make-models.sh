#!/usr/bin/env bash
# Make the realistic-shape benchmark models of docs/performance.md (issue 39): random weights in llama.cpp's
# shapes with real vocabularies, written in F16 by ../shared/tools/synth_gguf.py and quantized by `tensortrace
# quantize` (the same bytes as llama-quantize's). They are 0.6-3 GB each: never commit them.
# Usage: bench/make-models.sh [OUT_DIR (default ../bench-models)] [TENSORTRACE (default build/tensortrace)]
# Run from the repository's root; files already present are kept.
set -euo pipefail
out=${1:-../bench-models}
bin=${2:-build/tensortrace}
shared=../shared
for need in "$shared/tools/synth_gguf.py" "$shared/models/TinyLLama-v0.Q4_0.gguf" \
  "$shared/models/synth-qwen2-256.Q8_0.gguf" "$shared/models/synth-qwen3moe-256.Q4_K_M.gguf" "$bin"; do
  [ -e "$need" ] || {
    echo "make-models.sh: missing $need" >&2
    exit 1
  }
done
mkdir -p "$out"

synth() { # NAME ARGS...: the F16 file, unless present
  local name=$1
  shift
  [ -e "$out/$name.F16.gguf" ] && return
  /usr/bin/python3 "$shared/tools/synth_gguf.py" --dtype f16 --name "$name" --out "$out/$name.F16.gguf.tmp" "$@"
  mv "$out/$name.F16.gguf.tmp" "$out/$name.F16.gguf"
}
quantize() { # NAME TYPE
  [ -e "$out/$1.$2.gguf" ] || "$bin" quantize "$out/$1.F16.gguf" "$out/$1.$2.gguf" "$2"
}

synth synth-llama-1b --vocab "$shared/models/TinyLLama-v0.Q4_0.gguf" --arch llama --n-embd 2048 --n-layer 16 \
  --n-ff 8192 --n-head 32 --n-head-kv 8 --rope-base 500000 --seed 31
synth synth-qwen2-1.5b --vocab "$shared/models/synth-qwen2-256.Q8_0.gguf" --arch qwen2 --n-embd 1536 --n-layer 28 \
  --n-ff 8960 --n-head 12 --n-head-kv 2 --tied --rope-base 1000000 --eps 1e-6 --seed 32
# A mixture of experts of realistic size (0.94 B parameters, 0.14 B active a token): qwen3moe, 32 experts, 4 used.
synth synth-qwen3moe-1b --vocab "$shared/models/synth-qwen3moe-256.Q4_K_M.gguf" --arch qwen3moe --n-embd 1024 \
  --n-layer 12 --n-ff 768 --n-ff-exp 768 --n-head 16 --n-head-kv 4 --head-dim 64 --n-expert 32 --n-expert-used 4 \
  --rope-base 1000000 --eps 1e-6 --seed 33
quantize synth-llama-1b Q4_K_M
quantize synth-llama-1b Q8_0
quantize synth-qwen2-1.5b Q4_K_M
quantize synth-qwen3moe-1b Q4_K_M
ls -l "$out"
