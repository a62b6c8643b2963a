#!/usr/bin/env python3
"""Packs a run directory into one fuzz_rundir input (fuzz/fuzz_rundir.cpp): trace.bin, steps.jsonl, buffers.json,
run.json and memory-map.json in that order, separated by the target's separator; an absent file is an empty part.

    python3 fuzz/pack_rundir.py RUN_DIR OUT_FILE [--trace-bytes N]   (N: keep only the first N bytes of trace.bin)
"""
import argparse
import pathlib

SEPARATOR = b"\n--tensortrace-file--\n"
FILES = ["trace.bin", "steps.jsonl", "buffers.json", "run.json", "memory-map.json"]

p = argparse.ArgumentParser()
p.add_argument("run_dir", type=pathlib.Path)
p.add_argument("out", type=pathlib.Path)
p.add_argument("--trace-bytes", type=int)
a = p.parse_args()
parts = []
for name in FILES:
    f = a.run_dir / name
    b = f.read_bytes() if f.exists() else b""
    if name == "trace.bin" and a.trace_bytes is not None:
        b = b[: a.trace_bytes]
    parts.append(b)
a.out.write_bytes(SEPARATOR.join(parts))
