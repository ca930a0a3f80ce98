#!/usr/bin/env python3
"""ctest: the Python recorder's own properties (traces/python/kvtier_trace).

- the vectorised delta coder and varints give the bytes of a plain per-id reference coder
  (random forwards: rows coming and going, empty and full selections, ids of 1-5 varint
  bytes, and the byte map split into groups);
- request ids of any hashable type, integer ids kept, a clash refused;
- errors of the writer's thread (I/O, checks deferred for device ids) reach the caller, and
  close() still ends the file cleanly after a deferred check;
- frames are flushed whole: a process killed mid-recording leaves a file that `kvtier trace
  repair` turns into a valid trace; a quiet writer still flushes after flush_seconds;
- torch CPU tensors (when torch is importable) record the same bytes as numpy arrays.

usage: test_recorder.py <kvtier executable> <traces/python dir>
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

KVTIER, PYDIR = sys.argv[1], sys.argv[2]
sys.path.insert(0, PYDIR)
import kvtier_trace as kt  # noqa: E402
from kvtier_trace import encode  # noqa: E402
from kvtier_trace.format import TAG_FORWARD, put_varint, varint_bytes  # noqa: E402
from kvtier_trace.staging import Staged  # noqa: E402

GEOMETRY = {"total_layers": 6, "qsa_layer_ids": [1, 3, 5], "select_budget": 64, "page_size": 16}
SEED = 20261201
failures = 0


def check(cond, what):
    global failures
    print(("ok: " if cond else "FAIL: ") + what)
    failures += not cond


def kvtier(*args):
    r = subprocess.run([KVTIER, "trace", *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


# ------------------------------------------------------------------ coding vs a reference
def reference_forward(prev, fids, positions, counts, decode, sel):
    """The format's forward record, one id at a time (sel[layer][row] ascending lists)."""
    out = bytearray([TAG_FORWARD])
    put_varint(out, len(fids))
    for f, p, c, k in zip(fids, positions, counts, decode):
        for x in (f, p, c, int(k)):
            put_varint(out, x)
    for l in range(len(sel)):
        for r, f in enumerate(fids):
            old, new = prev[f][l], sel[l][r]
            removed = [i for i, x in enumerate(old) if x not in set(new)]
            added = [x for x in new if x not in set(old)]
            put_varint(out, len(removed))
            put_varint(out, len(added))
            for seq in (removed, added):
                last = -1
                for x in seq:
                    put_varint(out, x - last - 1)
                    last = x
            prev[f][l] = new
    return bytes(out)


def coding_matches_reference(map_bytes):
    rng = np.random.default_rng(SEED)
    encode._MAP_BYTES = map_bytes
    layers = 3
    enc = encode.DeltaEncoder(layers)
    prev = {}
    open_ids = []
    ok = True
    for step in range(120):
        if len(open_ids) < 5 or rng.random() < 0.2:
            f = int(rng.integers(1, 1 << 40)) if rng.random() < 0.3 else step + 1
            if f not in prev:
                enc.begin(f)
                prev[f] = [[] for _ in range(layers)]
                open_ids.append(f)
        if len(open_ids) > 3 and rng.random() < 0.15:
            f = open_ids.pop(int(rng.integers(len(open_ids))))
            enc.end(f)
            del prev[f]
        rows = [f for f in open_ids if rng.random() < 0.8]
        ctx = [int(rng.choice([5, 300, 20000, 1 << 22, 1 << 30])) for _ in rows]
        sel, arrays = [], []
        for l in range(layers):
            per_row = []
            k = int(rng.integers(0, 40))
            a = np.full((len(rows), 2 * k), -1, np.int64)
            for i, f in enumerate(rows):
                old = prev[f][l]
                keep = [x for x in old if rng.random() < 0.7]
                new = rng.integers(0, ctx[i], int(rng.integers(0, k + 1))).tolist()
                ids = sorted(set(keep[:k]) | set(new))[:k]
                per_row.append(ids)
                dup = ids + ids[: len(ids) // 3]  # duplicates and padding: the same set
                a[i, : len(dup)] = rng.permutation(dup)
            sel.append(per_row)
            arrays.append(a)
        positions = [c * 4 for c in ctx]
        counts = [1] * len(rows)
        decode = [True] * len(rows)
        cur, n_cur = encode.selections_of(arrays)
        got = enc.forward(rows, positions, counts, decode, cur, n_cur).tobytes()
        want = reference_forward(prev, rows, positions, counts, decode, sel)
        if got != want:
            print(f"step {step}: {len(got)} bytes vs {len(want)} of the reference")
            ok = False
            break
    encode._MAP_BYTES = 1 << 25
    return ok


check(coding_matches_reference(1 << 25), "forwards code to the reference coder's bytes")
check(coding_matches_reference(1 << 12), "... with the byte map split into groups")
vals = np.array([0, 1, 127, 128, 255, 16383, 16384, 2**21, 2**32 - 1, 2**35, 2**63 - 1],
                np.int64)
ref = bytearray()
for v in vals.tolist():
    put_varint(ref, v)
check(varint_bytes(vals).tobytes() == bytes(ref), "varints of 1..9 bytes")
check(varint_bytes(np.arange(100)).tobytes() == bytes(range(100)), "one-byte varints")

with tempfile.TemporaryDirectory() as d:
    p = lambda name: os.path.join(d, name)  # noqa: E731
    ids = np.arange(16)[None, ::-1]

    def one_forward(w, keys, pos=100):
        f = w.forward([kt.Row(k, pos) for k in keys])
        for l in range(3):
            f.set_layer(l, np.repeat(ids, len(keys), 0))
        f.commit()

    # -------------------------------------------------------------- request ids
    with kt.TraceWriter(p("keys.ktr"), geometry=GEOMETRY) as w:
        a = w.begin("cmpl-a", 100)
        b = w.begin(("batch", 7), 100, shared_with="cmpl-a", shared_pages=2)
        c = w.begin(5, 100)
        one_forward(w, ["cmpl-a", ("batch", 7), 5])
        try:
            w.begin(a, 100)
            check(False, "an integer id of an open mapped request is refused")
        except kt.TraceError as e:
            check("taken by request 'cmpl-a'" in str(e), f"a clash is refused: {e}")
        try:
            w.end("nobody")
            check(False, "ending an unknown key is refused")
        except kt.TraceError as e:
            check(str(e) == "record 4: request 'nobody' ends but is not open", str(e))
        w.end("cmpl-a")
        d2 = w.begin("cmpl-d", 100)
    check((a, b, c) == (1, 2, 5) and d2 == 3, f"keys map to 1, 2; 5 stays 5 ({a}, {b}, {c}, {d2})")
    _, recs = kt.read_trace(p("keys.ktr"))
    check(recs[1] == kt.Begin(2, 100, 1, 2) and recs[3].rows[1].request == 2,
          "the file holds the integers, the shared prefix mapped too")

    def run_child(path, frame_bytes, body):
        """A recording process: kvtier_trace imported, a writer `w` on path, then body."""
        script = ("import os, sys, signal, resource, numpy as np\n"
                  f"sys.path.insert(0, {os.path.abspath(PYDIR)!r})\n"
                  "import kvtier_trace as kt\n"
                  f"w = kt.TraceWriter(sys.argv[1], geometry={GEOMETRY!r}, "
                  f"frame_bytes={frame_bytes})\n" + body)
        return subprocess.run([sys.executable, "-c", script, path], capture_output=True,
                              text=True)

    # -------------------------------------------------------------- errors of the thread
    r = run_child(p("full.ktr"), 100, (
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4000, 4000))  # writes past it: EFBIG\n"
        "w.begin(1, 400)\n"
        "try:\n"
        "    for step in range(1000):\n"
        "        f = w.forward([kt.Row(1, 400 + step)])\n"
        "        for l in range(3): f.set_layer(l, np.arange(step % 90, step % 90 + 16)[None])\n"
        "        f.commit()\n"
        "except kt.TraceError as e:\n"
        "    print(e)\n"
        "    w.close()  # reported already: no second raise\n"
        "    sys.exit(3)\n"
    ))
    check(r.returncode == 3 and "the writer stopped" in r.stdout and "too large" in r.stdout,
          f"a write error reaches the caller: {r.stdout.strip()} {r.stderr.strip()[-300:]}")
    rc, out, err = kvtier("repair", p("full.ktr"), p("full_rep.ktr"))
    check(rc == 0 and "kept" in out, f"what was written before it repairs: {out.strip()}")

    class FakeEvent:  # a device copy that is already done
        def synchronize(self):
            pass

    class FakePinned:
        def __init__(self, a):
            self.a = a

        def numpy(self):
            return self.a

    class FakePool:
        def give(self, buf):
            pass

    def on_device(a):
        s = Staged(None)
        s._event, s._pinned, s._pinned_flat, s._pool = FakeEvent(), FakePinned(a), None, FakePool()
        return s

    w = kt.TraceWriter(p("deferred.ktr"), geometry=GEOMETRY)
    w.begin(1, 100)
    one_forward(w, [1])
    f = w.forward([kt.Row(1, 101)])
    f.set_layer(0, ids)
    f.set_layer(1, ids)
    f._staged[2] = on_device(np.arange(17)[None, :])  # 17 ids > block_topk 16: found later
    f.commit()
    try:
        for _ in range(100):
            time.sleep(0.02)
            w.flush()
        check(False, "a deferred check reaches the caller")
    except kt.TraceError as e:
        check("record 2: decode row of request 1 at layer 2 selects 17 blocks, more than "
              "block_topk 16" in str(e), f"a deferred check reaches the caller: {e}")
    w.close()
    rc, out, err = kvtier("info", p("deferred.ktr"), "--json")
    check(rc == 0 and '"forwards":1' in out.replace(" ", ""),
          "after a deferred error the file ends cleanly with the records before it: " + err)

    # -------------------------------------------------------------- killed mid-recording
    r = run_child(p("killed.ktr"), 300, (
        "rng = np.random.default_rng(1)\n"
        "for r in range(4): w.begin(r + 1, 400)\n"
        "for step in range(200):\n"
        "    f = w.forward([kt.Row(r + 1, 400 + step) for r in range(4)])\n"
        "    for l in range(3): f.set_layer(l, rng.integers(0, 100, (4, 16)))\n"
        "    f.commit()\n"
        "    if step == 150:\n"
        "        w.flush()\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
    ))
    check(r.returncode == -signal.SIGKILL, f"the recording process was killed ({r.returncode})")
    rc, _, err = kvtier("info", p("killed.ktr"))
    check(rc == 1 and "without the end marker" in err, "the killed file reads as cut: " +
          err.strip()[-120:])
    rc, out, err = kvtier("repair", p("killed.ktr"), p("repaired.ktr"))
    check(rc == 0 and "kept 151 forwards (155 records)" in out,
          f"kvtier trace repair keeps every flushed forward: {out.strip()} {err}")
    rc, out, _ = kvtier("info", p("repaired.ktr"), "--json")
    check(rc == 0 and '"forwards":151' in out.replace(" ", ""), "the repaired trace reads")

    # -------------------------------------------------------------- flush after a quiet spell
    w = kt.TraceWriter(p("quiet.ktr"), geometry=GEOMETRY, flush_seconds=0.2)
    w.begin(1, 100)
    one_forward(w, [1])
    time.sleep(1.0)
    with open(p("quiet.ktr"), "rb") as fh, open(p("quiet_copy.ktr"), "wb") as out_f:
        out_f.write(fh.read())
    rc, out, _ = kvtier("repair", p("quiet_copy.ktr"), p("quiet_rep.ktr"))
    check(rc == 0 and "kept 1 forwards (2 records)" in out,
          f"a quiet writer flushed after flush_seconds: {out.strip()}")
    w.close()

    # -------------------------------------------------------------- torch tensors
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None:
        print("skipped: torch is not importable here (the CPU tensor check)")
    else:
        rng = np.random.default_rng(SEED)
        data = [rng.integers(-1, 100, (3, 16)) for _ in range(6)]
        rows_of = lambda a: [torch.from_numpy(r[: 5 + i]) for i, r in enumerate(a)]  # noqa: E731
        for name, conv in (("np.ktr", lambda a: a), ("torch.ktr", torch.from_numpy),
                           ("np_rows.ktr", lambda a: [r[: 5 + i] for i, r in enumerate(a)]),
                           ("torch_rows.ktr", rows_of)):
            with kt.TraceWriter(p(name), geometry=GEOMETRY, created="t") as w:
                for r in range(3):
                    w.begin(r + 1, 400)
                for step in range(2):
                    f = w.forward([kt.Row(r + 1, 400 + step) for r in range(3)])
                    for l in range(3):
                        f.set_layer(l, conv(data[step * 3 + l]))
                    f.commit()
        same = lambda a, b: open(p(a), "rb").read() == open(p(b), "rb").read()  # noqa: E731
        check(same("np.ktr", "torch.ktr"), "torch CPU tensors record the bytes numpy arrays do")
        check(same("np_rows.ktr", "torch_rows.ktr"),
              "... and so does one tensor per row (ragged, as a prefill chunk's ids)")

print("all recorder checks passed" if not failures else f"{failures} recorder checks failed")
sys.exit(1 if failures else 0)
