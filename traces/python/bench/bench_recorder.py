#!/usr/bin/env python3
"""Benchmark of the recorder: time per forward on the calling thread, and throughput.

A forward is `rows` decode rows x 12 QSA layers x `k` top-k ids (default 32 x 12 x 512, the
issue's figure), unsorted as an indexer emits them, each selection keeping `overlap` of the
previous step's ids (contexts of 16k-128k tokens). Two runs:
  paced:   one forward every --step-ms (an engine's decode step; sleeping releases the GIL
           as a GPU wait does), calling-thread time per forward: median, p90, p99, max;
  unpaced: forwards back to back until the bounded queue pushes back: what the writer's
           thread sustains (forwards/s, ids/s), and the file's bytes per id.

usage: bench_recorder.py [--rows 32] [--k 512] [--forwards 300] [--step-ms 30] [--out DIR]
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

try:
    import kvtier_trace as kt
except ImportError:  # run from the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import kvtier_trace as kt

LAYERS = 12


def make_steps(rows, k, steps, overlap, seed):
    """[steps] x [layers, rows, k] int32 top-k ids; and the rows' start positions."""
    rng = np.random.default_rng(seed)
    ctx = rng.integers(16384, 131072, rows)
    visible = (ctx // 4)[None, :, None]
    cur = rng.integers(0, visible, (LAYERS, rows, k))
    out = []
    for _ in range(steps):
        change = rng.random(cur.shape) > overlap
        cur = np.where(change, rng.integers(0, visible, cur.shape), cur)
        out.append(rng.permuted(cur, axis=2).astype(np.int32))
    return ctx, out


def run(path, ctx, steps, n, step_s):
    rows = len(ctx)
    times = []
    t0 = time.perf_counter()
    with kt.TraceWriter(path, producer="bench_recorder") as w:
        for r in range(rows):
            w.begin(f"req-{r}", int(ctx[r]))
        row_list = [kt.Row(f"req-{r}", int(ctx[r])) for r in range(rows)]
        for i in range(n):
            topk = steps[i % len(steps)]
            a = time.perf_counter()
            fwd = w.forward(row_list)
            for layer in range(LAYERS):
                fwd.set_layer(layer, topk[layer])
            fwd.commit()
            times.append(time.perf_counter() - a)
            for row in row_list:
                row.position += 1
            if step_s:
                time.sleep(max(0.0, step_s - (time.perf_counter() - a)))
        t_calls = time.perf_counter() - t0
    return np.array(times) * 1e3, t_calls, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--k", type=int, default=512)
    ap.add_argument("--forwards", type=int, default=300)
    ap.add_argument("--step-ms", type=float, default=30.0)
    ap.add_argument("--overlap", type=float, default=0.8)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    ctx, steps = make_steps(a.rows, a.k, 64, a.overlap, seed=1)
    ids = a.rows * LAYERS * a.k
    d = a.out or tempfile.mkdtemp()
    print(f"forward: {a.rows} rows x {LAYERS} layers x {a.k} ids = {ids} ids; "
          f"{os.cpu_count()} cores; python {sys.version.split()[0]}, numpy {np.__version__}")
    run(os.path.join(d, "warm.ktr"), ctx, steps, 20, 0)

    ms, _, _ = run(os.path.join(d, "paced.ktr"), ctx, steps, a.forwards, a.step_ms / 1e3)
    print(f"paced ({a.step_ms:g} ms per step), calling thread per forward: median "
          f"{np.median(ms):.3f} ms, p90 {np.percentile(ms, 90):.3f}, p99 "
          f"{np.percentile(ms, 99):.3f}, max {ms.max():.3f} ms")

    path = os.path.join(d, "unpaced.ktr")
    ms, t_calls, t_all = run(path, ctx, steps, a.forwards, 0)
    size = os.path.getsize(path)
    print(f"unpaced: {a.forwards} forwards in {t_all:.2f} s with close = "
          f"{a.forwards / t_all:.1f} forwards/s, {a.forwards * ids / t_all / 1e6:.2f} M ids/s; "
          f"calling thread median {np.median(ms):.3f} ms (includes waits on the full queue)")
    print(f"file: {size / 1e6:.1f} MB, {size / (a.forwards * ids):.3f} bytes per id")
    if not a.out:
        for name in ("warm.ktr", "paced.ktr", "unpaced.ktr"):
            os.remove(os.path.join(d, name))
        os.rmdir(d)


if __name__ == "__main__":
    main()
