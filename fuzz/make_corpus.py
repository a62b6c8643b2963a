#!/usr/bin/env python3
"""Writes the fuzzer's seed corpus (fuzz/corpus/): small valid GGUF files covering every metadata type, nested
arrays, v2 and v3, custom alignment and several tensor types, plus the first bytes of the two bundled models
(their real metadata, cut short). Run from anywhere: python3 fuzz/make_corpus.py. Keeps the corpus < 1 MB."""
import os
import struct
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "fuzz", "corpus")

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B", U64: "<Q",
              I64: "<q", F64: "<d"}
# ggml type id -> (block size, bytes per block)
TYPES = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144),
         "Q6_K": (14, 256, 210), "I8": (24, 1, 1), "BF16": (30, 1, 2)}


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STR:
        return gstr(v)
    if vtype == ARR:
        etype, items = v
        return struct.pack("<IQ", etype, len(items)) + b"".join(value(etype, x) for x in items)
    return struct.pack(SCALAR_FMT[vtype], v)


def gguf(kvs, tensors=(), version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, type name, dims)] filled with a byte pattern."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, vtype, v in kvs:
        out += gstr(key) + struct.pack("<I", vtype) + value(vtype, v)
    offset, datas = 0, []
    for name, tname, dims in tensors:
        tid, block, bpb = TYPES[tname]
        n = 1
        for d in dims:
            n *= d
        size = n // block * bpb
        out += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", tid, offset)
        datas.append((offset, bytes((i * 7 + 3) & 0xFF for i in range(size))))
        offset += (size + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    data_start = len(out)
    for off, d in datas:
        out += b"\0" * (data_start + off - len(out)) + d
    return out


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    write("empty-v3.gguf", gguf([]))
    write("empty-v2.gguf", gguf([], version=2))
    scalars = [("u8", U8, 200), ("i8", I8, -5), ("u16", U16, 60000), ("i16", I16, -3000), ("u32", U32, 4000000000),
               ("i32", I32, -7), ("f32", F32, 1.5), ("bool", BOOL, 1), ("str", STR, "héllo"),
               ("u64", U64, 2**63 + 1), ("i64", I64, -2**40), ("f64", F64, -0.25)]
    write("scalars.gguf", gguf(scalars))
    arrays = [("general.architecture", STR, "llama"),
              ("strings", ARR, (STR, ["a", "", "ccc"])),
              ("floats", ARR, (F32, [0.5, -1.0])),
              ("nested", ARR, (ARR, [(I32, [1, 2]), (I32, []), (U8, [9])])),
              ("deep", ARR, (ARR, [(ARR, [(ARR, [(BOOL, [0, 1])])])])),
              ("empty", ARR, (U64, []))]
    write("arrays.gguf", gguf(arrays, version=2))
    tensors = [("token_embd.weight", "Q4_0", [64, 4]), ("blk.0.attn_q.weight", "Q8_0", [32, 2]),
               ("blk.0.ffn_down.weight", "Q4_K", [256, 1]), ("blk.1.attn_norm.weight", "F32", [8]),
               ("output.weight", "F16", [4, 2, 2, 1]), ("rope_freqs.weight", "BF16", [3]),
               ("scale", "I8", [5])]
    write("tensors-align64.gguf", gguf([("general.alignment", U32, 64)], tensors, alignment=64))
    llama = [("general.architecture", STR, "llama"), ("general.name", STR, "mini"),
             ("llama.block_count", U32, 1), ("llama.embedding_length", U32, 8),
             ("tokenizer.ggml.model", STR, "llama"),
             ("tokenizer.ggml.tokens", ARR, (STR, ["<unk>", "<s>", "</s>", "a"])),
             ("tokenizer.ggml.scores", ARR, (F32, [0.0, 0.0, 0.0, -1.0])),
             ("tokenizer.ggml.token_type", ARR, (I32, [2, 3, 3, 1])),
             ("tokenizer.ggml.add_bos_token", BOOL, 1)]
    llama_tensors = [("token_embd.weight", "F32", [8, 4]), ("blk.0.attn_q.weight", "F32", [8, 8]),
                     ("blk.0.ffn_up.weight", "Q6_K", [256, 1]), ("output_norm.weight", "F32", [8])]
    write("llama-mini.gguf", gguf(llama, llama_tensors))
    write("zero-size-tensor.gguf", gguf([], [("e", "F32", [0, 3]), ("x", "F32", [2])]))
    # The real metadata of the bundled models, cut short (they parse up to the truncation).
    for model, keep in (("stories260K.gguf", 16 * 1024), ("TinyLLama-v0.Q4_0.gguf", 16 * 1024)):
        with open(os.path.join(REPO, "models", model), "rb") as f:
            write(model.replace(".gguf", "") + "-head.gguf", f.read(keep))
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"make_corpus: {len(os.listdir(OUT))} files, {total} bytes in {OUT}")
    if total >= 1 << 20:
        sys.exit("make_corpus: corpus is over 1 MB")


if __name__ == "__main__":
    main()
