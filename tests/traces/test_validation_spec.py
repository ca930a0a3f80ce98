#!/usr/bin/env python3
"""ctest: the same bad records to both sides. Every case of the validation spec
(traces/python/kvtier_trace/validation.json) goes to the Python writer -- through write()
and through the engine hook (forward/set_layer/commit, ids shuffled and padded) -- and, as a
JSON-lines file, to kvtier's reader; all must refuse the case's last record with the rule's
message, word for word. (test_validation_spec.cpp checks the C++ validator itself against
the spec, including the cases that no file can hold: negative values, unknown kinds.)

usage: test_validation_spec.py <kvtier executable> <traces/python dir>
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

KVTIER, PYDIR = sys.argv[1], sys.argv[2]
sys.path.insert(0, PYDIR)
import kvtier_trace as kt  # noqa: E402
from kvtier_trace.validate import MESSAGES, SPEC, Limits  # noqa: E402

failures = 0


def check(cond, what):
    global failures
    print(("ok: " if cond else "FAIL: ") + what)
    failures += not cond


def record_of(rec):
    """A spec record as the Python API takes it: Begin, End, or (rows, selections)."""
    if "begin" in rec:
        b = rec["begin"]
        return kt.Begin(b["id"], b["prompt_tokens"], b.get("shared_with", 0),
                        b.get("shared_pages", 0))
    if "end" in rec:
        return kt.End(rec["end"]["id"])
    f = rec["forward"]
    rows = [kt.Row(r["request"], r["position"], r.get("count", 1), r["kind"]) for r in f["rows"]]
    return rows, f["selections"]


def refusal(geometry, records, forward):
    """Hands the records to a Python writer (forwards through `forward(w, rows, sel)`);
    the message of the record it refuses, or None."""
    with tempfile.TemporaryDirectory() as d:
        w = kt.TraceWriter(os.path.join(d, "t.ktr"), geometry=geometry)
        try:
            for rec in map(record_of, records):
                if isinstance(rec, tuple):
                    forward(w, *rec)
                else:
                    w.write(rec)
        except kt.TraceError as e:
            return str(e)
        finally:
            w.close()
    return None


def through_write(w, rows, sel):
    w.write(kt.Forward(rows, [[np.array(s, np.int64) for s in per_row] for per_row in sel]))


def through_hook(w, rows, sel, rng=np.random.default_rng(3)):
    """The engine hook: each layer's ids shuffled and padded with -1, as a top-k comes."""
    fwd = w.forward(rows)
    for layer, per_row in enumerate(sel):
        topk = np.full((len(per_row), max(len(s) for s in per_row) + 3), -1, np.int64)
        for i, s in enumerate(per_row):
            topk[i, : len(s)] = rng.permutation(s)
        fwd.set_layer(layer, topk)
    fwd.commit()


def kvtier_reads(geometry, records):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "case.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps({"kvtier_trace": 1, "geometry": geometry, "producer": "spec",
                                "created": ""}) + "\n")
            for rec in records:
                f.write(json.dumps(rec) + "\n")
        r = subprocess.run([KVTIER, "trace", "info", path], capture_output=True, text=True)
        return r.returncode, r.stderr.strip()


geometry = SPEC["cases_geometry"]
figures = Limits(geometry).params()
for case in SPEC["cases"]:
    rule, records = case["rule"], case["records"]
    n = len(records) - 1
    expected = MESSAGES[rule].format(**figures, **case["params"])
    got = refusal(geometry, records, through_write)
    check(got == f"record {n}: {expected}", f"{rule}: Python write() says {got!r}")
    f = records[-1].get("forward")
    # the hook takes ids in any order and one top-k per QSA layer: no case for those rules
    if rule not in ("not_ascending", "layer_count"):
        got = refusal(geometry, records, through_hook)
        check(got == f"record {n}: {expected}", f"{rule}: Python hook says {got!r}")
    if case.get("files", True):
        rc, err = kvtier_reads(geometry, records)
        m = re.search(r": record (\d+) \(line \d+, byte offset \d+\): (.*)$", err)
        check(rc == 1 and m is not None and int(m.group(1)) == n and m.group(2) == expected,
              f"{rule}: kvtier's reader says {err!r}")
print(f"{len(SPEC['cases'])} cases; {failures} failed")
sys.exit(1 if failures else 0)
