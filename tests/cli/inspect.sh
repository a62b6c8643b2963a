#!/usr/bin/env bash
# `tensortrace inspect` on the bundled models: the human report (layout sections, tensor table), --json (valid,
# every tensor, consistent offsets) and --kv (every key listed).
# Usage: tests/cli/inspect.sh PATH/TO/tensortrace REPO_DIR
set -uo pipefail
bin=$1
repo=$2
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tt-cli-inspect.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

for model in stories260K.gguf TinyLLama-v0.Q4_0.gguf; do
  path=$repo/models/$model

  # Human output.
  if ! "$bin" inspect "$path" >"$scratch/human" 2>"$scratch/err"; then
    fail "inspect $model exited non-zero: $(cat "$scratch/err")"
    continue
  fi
  [ -s "$scratch/err" ] && fail "inspect $model wrote to stderr: $(cat "$scratch/err")"
  for line in '^layout$' '^  header +\[ +0, +24\)' '^  metadata +\[' '^  tensor info +\[' '^  data +\[' \
    '^architecture +llama$' '^tensors$' '^  name +type +shape +start +end +bytes +layer$' \
    '^  token_embd\.weight +(F32|Q4_0) +\[64, ' '^  blk\.0\.attn_q\.weight ' '^by type$' '^parameters '; do
    grep -Eq -- "$line" "$scratch/human" || fail "inspect $model: no line matching /$line/"
  done

  # JSON: parses, and has every tensor with consistent fields.
  if ! "$bin" inspect --json "$path" >"$scratch/json" 2>"$scratch/err"; then
    fail "inspect --json $model exited non-zero: $(cat "$scratch/err")"
    continue
  fi
  python3 -m json.tool "$scratch/json" >/dev/null 2>"$scratch/err" || fail "inspect --json $model: invalid JSON: $(cat "$scratch/err")"
  python3 - "$scratch/json" "$scratch/human" "$path" >"$scratch/check" 2>&1 <<'PY' || fail "inspect --json $model: $(cat "$scratch/check")"
import json, os, re, sys
m = json.load(open(sys.argv[1]))
human = open(sys.argv[2]).read()
size = os.path.getsize(sys.argv[3])
assert m["format"] == "tensortrace.memory-map" and m["version"] == 1, "format/version"
assert m["file"] == os.path.basename(sys.argv[3]), m["file"]
assert m["file_size"] == size, "file_size"
assert m["architecture"] == "llama", m["architecture"]
s = m["sections"]
assert s["header"] == [0, 24], s["header"]
assert s["header"][1] == s["metadata"][0] and s["metadata"][1] == s["tensor_info"][0], "sections not contiguous"
assert s["tensor_info"][1] <= s["data"][0] == m["data_offset"] and s["data"][1] == size, "data section"
# Every tensor of the human table is in the JSON, in the same order, with the same offsets.
table = human.split("\ntensors\n", 1)[1].splitlines()[1:]
rows = [l.split() for l in table if l.strip()]
assert len(rows) == len(m["tensors"]) > 0, f"{len(rows)} table rows, {len(m['tensors'])} JSON tensors"
prev_end = m["data_offset"]
for row, t in zip(rows, m["tensors"]):
    for key in ("name", "type", "shape", "offset_start", "offset_end", "size_bytes", "layer", "category", "component"):
        assert key in t, f"{t.get('name')}: no {key}"
    assert row[0] == t["name"] and row[1] == t["type"], (row, t["name"])
    assert int(row[-4]) == t["offset_start"] and int(row[-3]) == t["offset_end"], row
    assert t["offset_end"] - t["offset_start"] == t["size_bytes"], t["name"]
    assert t["offset_start"] >= prev_end and t["offset_start"] % m["alignment"] == 0, t["name"]
    prev_end = t["offset_end"]
    layer = re.match(r"blk\.(\d+)\.", t["name"])
    assert t["layer"] == (int(layer.group(1)) if layer else None), t["name"]
assert prev_end <= size
print(len(rows), "tensors")
PY

  # --kv lists every key (and --json --kv adds them to the JSON).
  if ! "$bin" inspect --kv "$path" >"$scratch/kv" 2>"$scratch/err"; then
    fail "inspect --kv $model exited non-zero: $(cat "$scratch/err")"
    continue
  fi
  grep -Eq '^metadata \([0-9]+ keys\)$' "$scratch/kv" || fail "inspect --kv $model: no 'metadata (N keys)' heading"
  for key in general.architecture llama.context_length llama.embedding_length llama.block_count \
    tokenizer.ggml.model tokenizer.ggml.tokens tokenizer.ggml.scores tokenizer.ggml.token_type; do
    grep -Eq "^  @[0-9]+ +$key " "$scratch/kv" || fail "inspect --kv $model: key $key not listed"
  done
  grep -Eq '^  @[0-9]+ +tokenizer\.ggml\.tokens +ARRAY +\[[0-9]+ × STRING\]' "$scratch/kv" ||
    fail "inspect --kv $model: tokens not summarised as an array of strings"
  n_keys=$(sed -n 's/^metadata (\([0-9]*\) keys)$/\1/p' "$scratch/kv")
  listed=$(grep -Ec '^  @[0-9]+ ' "$scratch/kv")
  [ "$n_keys" = "$listed" ] || fail "inspect --kv $model: heading says $n_keys keys, $listed listed"
  "$bin" inspect --json --kv "$path" | python3 -c '
import json, sys
m = json.load(sys.stdin)
assert "tokenizer.ggml.tokens" in m["metadata"] and len(m["metadata"]) == int(sys.argv[1]), "metadata keys"
' "$n_keys" 2>"$scratch/err" || fail "inspect --json --kv $model: $(tail -1 "$scratch/err")"
done

if [ "$failures" -ne 0 ]; then
  echo "inspect.sh: $failures failure(s)" >&2
  exit 1
fi
echo "inspect.sh: ok"
