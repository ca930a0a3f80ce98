#!/usr/bin/env python3
"""Adds the attend's CTAs (bf16) and rows (fp8) to a points file written before those inputs.

The calibration of 4fb5071 wrote `attention` and `attention_fp8` with one input, hbm_bytes, and
its points in sweep order: rows in {1, 2, 4, 8, 16, 32} (outer) x selected tokens per row in
{512, 1024, 2051} (inner), 2 KV heads, token bytes 2048 (bf16) and 1040 (fp8)
(cuda/calibrate/sweep.cpp and bench_attention.cpp at 4fb5071). Rows and tokens follow from the
order (each point's hbm_bytes is checked against them), the CTAs from the attend's split rule
(model/attend_grid.hpp) with the card's SM count. Every other series is copied as it is.

usage: derive_attend_inputs.py IN.json OUT.json [--sms 132]
"""
import argparse
import json

ROWS = [1, 2, 4, 8, 16, 32]
TOKENS = [512, 1024, 2051]
KV_HEADS = 2


def splits(rows, width, sms):
    want = (2 * sms) // max(1, rows * KV_HEADS)
    return min(max(want, 1), max(1, (width + 31) // 32))


def derive(series, token_bytes, extra, sms):
    grid = [(r, t) for r in ROWS for t in TOKENS]
    if len(series["points"]) != len(grid):
        raise SystemExit(f"{series['term']}: {len(series['points'])} points, the grid has {len(grid)}")
    out = []
    for (rows, tokens), (x, y) in zip(grid, series["points"]):
        if x != rows * tokens * token_bytes:
            raise SystemExit(f"{series['term']}: point {x} is not {rows} rows x {tokens} tokens")
        ctas = rows * KV_HEADS * splits(rows, tokens, sms)
        out.append([x, ctas if extra == "ctas" else rows, y])
    return dict(series, inputs=["hbm_bytes", extra], points=out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--sms", type=int, default=132)
    a = ap.parse_args()
    with open(a.src) as f:
        points = json.load(f)
    for i, s in enumerate(points["series"]):
        if s["term"] == "attention" and s["inputs"] == ["hbm_bytes"]:
            points["series"][i] = derive(s, 2048, "ctas", a.sms)
        elif s["term"] == "attention_fp8" and s["inputs"] == ["hbm_bytes"]:
            points["series"][i] = derive(s, 1040, "rows", a.sms)
    with open(a.dst, "w") as f:
        json.dump(points, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
