#!/usr/bin/python3
"""The table and plot of bench/budget-experiment.sh from its work directory.

Usage: bench/budget_experiment.py WORK_DIR OUT_DIR READS
WORK_DIR holds MODEL/BUDGET-POLICY-PREFETCH run directories (each with a .analysis.json beside it), MODEL.io.json
(bench --io --json) and `load`; writes OUT_DIR/budget-experiment.md and OUT_DIR/budget-experiment.svg.
"""
import json
import os
import sys
from xml.sax.saxutils import escape

work, out, reads = sys.argv[1], sys.argv[2], sys.argv[3]
POLICIES = ["lru", "lfu", "least-stale", "opt"]
BUDGETS = [25, 50, 75, 100]


def row(model, budget, policy, prefetch):
    d = os.path.join(work, model, f"{budget}-{policy}-{prefetch}")
    run = json.load(open(os.path.join(d, "run.json")))
    steps = [json.loads(l) for l in open(os.path.join(d, "steps.jsonl"))]
    a = json.load(open(d + ".analysis.json"))["weight_cache"]
    gen = steps[1:]  # the generation steps (step 0: the prompt)
    gen_ns = sum(s["end_ns"] - s["start_ns"] for s in gen)
    all_ns = sum(s["end_ns"] - s["start_ns"] for s in steps)
    stall = sum(s["weight_stall_ns"] for s in steps)
    replay = a["replay_prefetch"] if prefetch != "none" else a["simulated"]
    return {
        "tps": len(gen) * 1e9 / gen_ns if gen_ns else 0.0,
        "read_per_step": sum(s["weight_bytes_read"] for s in gen) / max(1, len(gen)),
        "measured": a["measured"]["hit_rate"],
        "simulated": replay["hit_rate"],
        "no_prefetch": a["replay_no_prefetch"]["hit_rate"],
        "stall_share": stall / all_ns if all_ns else 0.0,
        "stall_ms_step": stall / 1e6 / len(steps),
        "prefetch_hits": a["measured"]["prefetch_hits"],
        "rate": run["weight_cache"]["read_bytes_per_s"],
    }


models = sorted(m for m in os.listdir(work) if os.path.isdir(os.path.join(work, m)))
load = open(os.path.join(work, "load")).read().strip().replace("\n", "; ")
md = [f"Reads: {reads}. Machine load (1, 5, 15 min): {load}.", ""]
data = {}
for m in models:
    io = json.load(open(os.path.join(work, m + ".io.json")))["io"]
    md.append(f"**{m}** (storage, bench --io {io['method']}: sequential {io['sequential_bytes_per_s'] / 1e6:.0f} MB/s, "
              f"4 KiB random {io['random_4k_bytes_per_s'] / 1e6:.0f} MB/s)")
    md.append("")
    md.append("| budget | policy | prefetch | tokens/s | MiB read / token | hit rate measured | replayed | "
              "no-prefetch replay | prefetch hits | stall share | stall ms / step | read MB/s |")
    md.append("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for b in BUDGETS:
        for p in POLICIES:
            for f in ["none", "next-layer"]:
                if p == "opt" and f != "none":
                    continue
                r = row(m, b, p, f)
                data[(m, b, p, f)] = r
                md.append(f"| {b}% | {'opt-from lru' if p == 'opt' else p} | {f} | {r['tps']:.2f} | "
                          f"{r['read_per_step'] / 1048576:.1f} | {100 * r['measured']:.1f}% | "
                          f"{100 * r['simulated']:.1f}% | {100 * r['no_prefetch']:.1f}% | {r['prefetch_hits']} | "
                          f"{100 * r['stall_share']:.0f}% | {r['stall_ms_step']:.1f} | {r['rate'] / 1e6:.0f} |")
    md.append("")
md.append("Tokens/s over the generation steps; MiB read a generation step (demand and prefetch reads); hit rates of "
          "the demand accesses: measured, replayed (without prefetch the pinned replay of the same accesses, with "
          "prefetch simulate_cache of the stream with its prefetches), and the demand stream replayed without "
          "prefetch; stall share: the ops' waits for weights over all steps' time.")
open(os.path.join(out, "budget-experiment.md"), "w").write("\n".join(md) + "\n")

# The plot: per model, tokens/s (top) and stall share (bottom) against the budget, a line per policy and prefetch.
W, H, PAD, GAP = 360, 200, 48, 40
colors = {"lru": "#1f77b4", "lfu": "#ff7f0e", "least-stale": "#2ca02c", "opt": "#7f7f7f"}
svg = []
width = PAD + len(models) * (W + GAP) + 150
height = 2 * (H + PAD) + 40
svg.append(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           'font-size="11">')
svg.append(f'<rect width="{width}" height="{height}" fill="white"/>')
for mi, m in enumerate(models):
    for pi, (key, label) in enumerate([("tps", "tokens/s"), ("stall_share", "stall share")]):
        x0, y0 = PAD + mi * (W + GAP), 30 + pi * (H + PAD)
        vals = [data[k][key] for k in data if k[0] == m]
        top = max(vals) * 1.1 if vals and max(vals) > 0 else 1.0
        svg.append(f'<text x="{x0}" y="{y0 - 8}" font-weight="bold">{escape(m)}: {label}</text>')
        svg.append(f'<rect x="{x0}" y="{y0}" width="{W}" height="{H}" fill="none" stroke="#999"/>')
        for t in range(5):
            v = top * t / 4
            y = y0 + H - H * t / 4
            svg.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + W}" y2="{y:.1f}" stroke="#eee"/>')
            txt = f"{100 * v:.0f}%" if key == "stall_share" else f"{v:.1f}"
            svg.append(f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{txt}</text>')
        for bi, b in enumerate(BUDGETS):
            x = x0 + W * (bi + 0.5) / len(BUDGETS)
            svg.append(f'<text x="{x:.1f}" y="{y0 + H + 14}" text-anchor="middle">{b}%</text>')
        for p in POLICIES:
            for f in ["none", "next-layer"]:
                pts = [(x0 + W * (bi + 0.5) / len(BUDGETS), y0 + H - H * data[(m, b, p, f)][key] / top)
                       for bi, b in enumerate(BUDGETS) if (m, b, p, f) in data]
                if not pts:
                    continue
                dash = ' stroke-dasharray="5,3"' if f != "none" else ""
                svg.append(f'<polyline fill="none" stroke="{colors[p]}" stroke-width="1.8"{dash} points="'
                           + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
lx = PAD + len(models) * (W + GAP)
ly = 40
for p in POLICIES:
    for f in ["none", "next-layer"]:
        if p == "opt" and f != "none":
            continue
        dash = ' stroke-dasharray="5,3"' if f != "none" else ""
        svg.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" stroke="{colors[p]}" stroke-width="1.8"{dash}/>')
        name = "opt-from lru" if p == "opt" else p
        svg.append(f'<text x="{lx + 30}" y="{ly + 4}">{name}{", prefetch" if f != "none" else ""}</text>')
        ly += 16
svg.append(f'<text x="{PAD}" y="{height - 8}">budget (% of the weight bytes); dashed: --prefetch next-layer</text>')
svg.append("</svg>")
open(os.path.join(out, "budget-experiment.svg"), "w").write("\n".join(svg) + "\n")
