#!/usr/bin/env python3
"""ctest: docs/recording.md's example (traces/python/examples/mock_engine.py) records a
trace of its mock serving loop, and kvtier reads it back (`kvtier trace info`) with the
loop's requests, rows and widths; with --torch too where torch is importable.

usage: test_recording_example.py <kvtier executable> <traces/python dir>
"""
import json
import os
import subprocess
import sys
import tempfile

KVTIER, PYDIR = sys.argv[1], sys.argv[2]
EXAMPLE = os.path.join(PYDIR, "examples", "mock_engine.py")


def run(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL:", " ".join(cmd), r.stdout, r.stderr)
        sys.exit(1)
    return r.stdout


try:
    import torch  # noqa: F401
    variants = [[], ["--torch"]]
except ImportError:
    variants = [[]]
    print("skipped: the --torch run (torch is not importable here)")
with tempfile.TemporaryDirectory() as d:
    for extra in variants:
        out = os.path.join(d, "mock.ktr")
        print(run(sys.executable, EXAMPLE, "--out", out, "--requests", "5", "--decode", "30",
                  *extra).strip())
        info = json.loads(run(KVTIER, "trace", "info", out, "--json"))
        ok = (info["requests"] == 5 and info["decode_rows"] == 5 * 30 and
              info["prefill_rows"] > 5 and info["block_topk"] == 64)
        print(("ok" if ok else "FAIL") + f": kvtier trace info reads {info['requests']} "
              f"requests, {info['forwards']} forwards, {info['decode_rows']} decode rows, "
              f"{info['selected_ids']} ids {' '.join(extra)}")
        if not ok:
            sys.exit(1)
print("the recording example passed")
