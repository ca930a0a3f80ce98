#!/usr/bin/env python3
"""ctest: the Python reader/writer (traces/python) against the C++ one, both directions.

usage: test_python_traces.py <kvtier executable> <traces/python dir>
"""
import filecmp
import os
import subprocess
import sys
import tempfile

import numpy as np

KVTIER, PYDIR = sys.argv[1], sys.argv[2]
sys.path.insert(0, PYDIR)
import kvtier_trace as kt  # noqa: E402

GEOMETRY = {"total_layers": 6, "qsa_layer_ids": [1, 3, 5], "select_budget": 64, "page_size": 16}


def kvtier(*args):
    r = subprocess.run([KVTIER, "trace", *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    print("ok:", what)


with tempfile.TemporaryDirectory() as d:
    p = lambda name: os.path.join(d, name)  # noqa: E731
    with open(p("geom.json"), "w") as f:
        import json
        json.dump(GEOMETRY, f)

    # 1. C++ writes, Python reads (binary zstd, binary raw, JSON lines): identical records.
    rc, _, err = kvtier("gen", "-o", p("a.ktr"), "--geometry", p("geom.json"), "--requests", "3",
                        "--concurrent", "2", "--prompt-min", "300", "--prompt-max", "900",
                        "--decode", "30", "--prefill-chunk", "128", "--shared-prefix", "100",
                        "--seed", "4")
    check(rc == 0, "kvtier trace gen: " + err)
    check(kvtier("convert", p("a.ktr"), p("a.jsonl"))[0] == 0, "convert to jsonl")
    check(kvtier("convert", p("a.ktr"), p("a_raw.ktr"), "--zstd-level", "0")[0] == 0,
          "convert to raw frames")
    h, recs = kt.read_trace(p("a.ktr"))
    hj, recs_j = kt.read_trace(p("a.jsonl"))
    _, recs_raw = kt.read_trace(p("a_raw.ktr"))
    check(len(recs) > 50 and recs == recs_j == recs_raw, f"Python reads {len(recs)} records "
          "identically from the C++ binary (zstd, raw) and JSON-lines forms")
    check(h == hj, "headers agree")

    # 2. Python writes (zstd when libzstd loads, raw frames, JSON lines), C++ reads: the C++
    #    JSON-lines conversion of each is byte-identical to that of the C++-written trace.
    for name, kw in (("b_zstd.ktr", {}), ("b_raw.ktr", {"zstd_level": 0}),
                     ("b.jsonl", {}), ("b_frames.ktr", {"frame_bytes": 300})):
        with kt.TraceWriter(p(name), geometry=h["geometry"], producer=h["producer"],
                            created=h["created"], **kw) as w:
            for r in recs:
                w.write(r)
        rc, _, err = kvtier("convert", p(name), p(name + ".back.jsonl"))
        check(rc == 0, f"C++ reads Python-written {name}: {err}")
        check(filecmp.cmp(p("a.jsonl"), p(name + ".back.jsonl"), shallow=False),
              f"{name}: C++ sees exactly the records the C++ writer wrote")

    # 3. The engine-hook API: padded top-k per layer, union semantics left to the caller.
    with kt.TraceWriter(p("hook.ktr"), geometry=GEOMETRY, producer="hook test") as w:
        w.begin(7, 400)
        for step in range(5):
            fwd = w.forward([kt.Row(7, 400 + step, 1, "decode")])
            for layer in range(3):
                topk = np.full((1, 16), -1, np.int64)
                topk[0, :10] = np.arange(10)[::-1] * 9 + step  # unsorted, padded
                fwd.set_layer(layer, topk)
            fwd.commit()
        w.end(7)
    rc, out, err = kvtier("info", p("hook.ktr"), "--json")
    check(rc == 0, "C++ reads the hook-written trace: " + err)
    info = json.loads(out)
    check(info["decode_rows"] == 5 and info["selected_ids"] == 150, "hook trace counts")

    # 4. Bad input is refused with a clear message, and the Python writer validates too.
    with open(p("a.ktr"), "rb") as f:
        data = f.read()
    with open(p("cut.ktr"), "wb") as f:
        f.write(data[: len(data) // 2])
    rc, _, err = kvtier("info", p("cut.ktr"))
    check(rc == 1 and "truncated" in err and "byte offset" in err, "truncated: " + err.strip())
    try:
        kt.read_trace(p("cut.ktr"))
        check(False, "Python reader refuses a truncated trace")
    except kt.TraceError as e:
        check("byte offset" in str(e), "Python reader refuses a truncated trace: " + str(e))
    w = kt.TraceWriter(p("bad.ktr"), geometry=GEOMETRY)
    w.begin(1, 40)
    try:
        w.write(kt.Forward([kt.Row(1, 40)], [[np.array([0, 10], np.int32)]] * 3))
        check(False, "Python writer refuses ids beyond the context")
    except kt.TraceError as e:
        check("beyond the context" in str(e), "Python writer refuses ids beyond the context")
    w = kt.TraceWriter(p("far.ktr"), geometry=GEOMETRY)
    for what, act in (("a prompt", lambda: w.begin(2, 1 << 40)),
                      ("a row", lambda: (w.begin(3, 40), w.write(
                          kt.Forward([kt.Row(3, 1 << 40)], [[np.array([0], np.int32)]] * 3))))):
        try:
            act()
            check(False, f"Python writer refuses {what} beyond the largest context")
        except kt.TraceError as e:
            check("largest context" in str(e),
                  f"Python writer refuses {what} beyond the largest context: {e}")
print("all Python trace checks passed")
