#!/usr/bin/env python3
"""Issue 17's targets against what one `gpu.sh targets` call measured.

usage: scripts/targets.py LOGS [--json]

LOGS holds the runs' outputs as `gpu.sh targets` names them (t-NAME.log, each the JSON of a
kvtier command). Each target is judged the way the write-ups under bench/results/ judge it:

  bank       `kvtier bench host-bank --gib 100`: ready in <= 10 s (the call's first bank, so
             on a machine just started);
  step       `kvtier bench residency`: every all-hit step beside <= 5 us a layer;
  trace      the bundled concurrent8-16k-128k trace: mirror at its planned pool against device,
             median GPU us of the decode forwards of the most rows, <= 1.1 x;
  CASE       (8x1m, 32x128k, 64x32k, decoding together at depth) host at B = 24 GiB: the
             steady step <= 1.1 x the link floor, the bytes it reads over the link per step at 51 GB/s; mirror at
             B GiB: the steady step <= 1.15 x the larger of the device ideal's steady step and
             its own link time (its bytes over the link per step at 51 GB/s), at B = 16 and
             24 GiB;
  copy-first the mirror at 8 x 16k with 2,400 slots: the default's steady step no longer than
             --copy-first's;
  prefill    a 1M prompt's prefill on host at B = 24 GiB: >= 5,000 tokens/s.

A run that is missing or failed (no JSON) is reported as not measured, never as met. Prints a
table (or, with --json, a list of rows); exits 0 whatever was met, 2 on bad usage.
"""
import json
import os
import statistics
import sys

LINK_GBPS = 51.0  # the link floor's rate in every write-up (PCIe Gen5 x16, measured H2D)
CASES = ("8x1m", "32x128k", "64x32k")


def load(logs, name):
    """The JSON a run printed, or None when the run is missing or printed none."""
    try:
        with open(os.path.join(logs, f"t-{name}.log")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def row(target, measured, limit, met, note=""):
    return {"target": target, "measured": measured, "limit": limit, "met": met, "note": note}


def missing(target, limit, name):
    return row(target, None, limit, None, f"not measured (t-{name}.log missing or not JSON)")


def bank(logs):
    b = load(logs, "bank")
    if b is None:
        return [missing("100 GiB host bank ready, s", "<= 10", "bank")]
    fig = {f["name"]: f for f in b["figures"]}
    ready = fig.get("ready (map, fault in, pin)")
    size = fig.get("host bank size")
    if ready is None or size is None:
        return [row("100 GiB host bank ready, s", None, "<= 10", None, "no ready figure")]
    return [row("100 GiB host bank ready, s", ready["value"], "<= 10", ready["value"] <= 10.0,
                f"{size['value']:.1f} GiB; {ready['detail']}")]


def step(logs):
    b = load(logs, "step")
    if b is None:
        return [missing("all-hit step beside, us a layer", "<= 5", "step")]
    rows = [f for f in b["figures"] if f["target"] == "<= 5 us"]
    if not rows:
        return [row("all-hit step beside, us a layer", None, "<= 5", None, "no all-hit figure")]
    worst = max(rows, key=lambda f: f["value"])
    return [row("all-hit step beside, us a layer", worst["value"], "<= 5",
                all(f["value"] <= 5.0 for f in rows),
                f"the slowest of {len(rows)}: {worst['name']}")]


def decode_median_us(run):
    """Median GPU us of the decode forwards (every row a decode token) of the most rows."""
    dec = [s for s in run["steps"] if 0 < s["tokens"] == s["decode_tokens"]]
    most = max((s["rows"] for s in dec), default=0)
    us = [s["gpu_us"] for s in dec if s["rows"] == most]
    return (statistics.median(us), most, len(us)) if us else (None, 0, 0)


def trace(logs):
    target = "bundled 8-request trace, mirror / device"
    d, m = load(logs, "trace-device"), load(logs, "trace-mirror")
    if d is None or m is None:
        return [missing(target, "<= 1.1", "trace-device" if d is None else "trace-mirror")]
    dus, rows, n = decode_median_us(d)
    mus, _, _ = decode_median_us(m)
    if not dus or not mus:
        return [row(target, None, "<= 1.1", None, "no decode forwards")]
    same = "digests equal" if d["checksum"] == m["checksum"] else "DIGESTS DIFFER"
    ratio = mus / dus
    return [row(target, ratio, "<= 1.1", ratio <= 1.1 and d["checksum"] == m["checksum"],
                f"{mus:.1f} / {dus:.1f} us, {n} forwards of {rows} rows, pool "
                f"{m['pool_pages']}, {same}")]


def steady(run):
    """(steady ms a step, link ms a step of its steady bytes), or None without steady steps."""
    ms = run.get("decode_steady_ms_per_step")
    if not run.get("decode_steady_forwards") or ms is None:
        return None
    return ms, run["decode_steady_h2d_bytes_per_step"] / (LINK_GBPS * 1e6)


def case(logs, name):
    out = []
    dev = load(logs, f"{name}-device")
    dev_ms = steady(dev)[0] if dev and steady(dev) else None
    h = load(logs, f"{name}-host-b24")
    target = f"{name} host at B = 24 GiB, step / link floor"
    s = steady(h) if h else None
    if h is None:
        out.append(missing(target, "<= 1.1", f"{name}-host-b24"))
    elif s is None or s[1] <= 0:
        out.append(row(target, None, "<= 1.1", None, "no steady steps"))
    else:
        out.append(row(target, s[0] / s[1], "<= 1.1", s[0] / s[1] <= 1.1,
                       f"{s[0]:.2f} ms a step, floor {s[1]:.2f} ms, "
                       f"{h['decode_tokens_per_s']:.0f} decode tokens/s, "
                       f"{h['micro_batches']} micro-batches"))
    for b in (16, 24):
        m = load(logs, f"{name}-mirror-b{b}")
        target = f"{name} mirror at B = {b} GiB, step / max(device, own link)"
        if m is None:
            out.append(missing(target, "<= 1.15", f"{name}-mirror-b{b}"))
            continue
        s = steady(m)
        if s is None:
            out.append(row(target, None, "<= 1.15", None, "no steady steps"))
            continue
        if dev_ms is None:
            out.append(row(target, None, "<= 1.15", None,
                           f"no device ideal (t-{name}-device.log missing or without steady steps)"))
            continue
        bound = max(dev_ms, s[1])
        ideal = f"device {dev_ms:.2f} ms"
        out.append(row(target, s[0] / bound, "<= 1.15", s[0] / bound <= 1.15,
                       f"{s[0]:.2f} ms a step, {ideal}, own link {s[1]:.2f} ms, hit rate "
                       f"{m['hit_rate']:.3f}, pool {m['pool_pages']}, "
                       f"{m['micro_batches']} micro-batches"))
    return out


def copy_first(logs):
    target = "8 x 16k mirror 2,400 slots, default / --copy-first"
    d, c = load(logs, "copy-first-default"), load(logs, "copy-first")
    if d is None or c is None:
        return [missing(target, "<= 1", "copy-first-default" if d is None else "copy-first")]
    sd, sc = steady(d), steady(c)
    if sd is None or sc is None:
        return [row(target, None, "<= 1", None, "no steady steps")]
    return [row(target, sd[0] / sc[0], "<= 1", sd[0] <= sc[0],
                f"{sd[0]:.3f} against {sc[0]:.3f} ms a step")]


def prefill(logs):
    p = load(logs, "prefill-1m")
    target = "1M prefill on host at B = 24 GiB, tokens/s"
    if p is None:
        return [missing(target, ">= 5000", "prefill-1m")]
    tps = p["prefill_tokens_per_s"]
    return [row(target, tps, ">= 5000", tps >= 5000.0,
                f"{p['prefill_tokens']} tokens in {p['prefill_ms'] / 1000:.1f} s")]


def judge(logs):
    rows = bank(logs) + step(logs) + trace(logs)
    for name in CASES:
        rows += case(logs, name)
    return rows + copy_first(logs) + prefill(logs)


def main(argv):
    if len(argv) < 2 or len(argv) > 3 or (len(argv) == 3 and argv[2] != "--json"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    if not os.path.isdir(argv[1]):
        print(f"targets: {argv[1]}: not a directory", file=sys.stderr)
        return 2
    rows = judge(argv[1])
    if len(argv) == 3:
        print(json.dumps(rows, indent=1))
        return 0
    met = {True: "yes", False: "NO", None: "-"}
    w = max(len(r["target"]) for r in rows)
    print(f"{'target':{w}s} {'measured':>9s} {'limit':>8s} {'met':>4s}  note")
    for r in rows:
        v = "-" if r["measured"] is None else f"{r['measured']:.3f}"
        print(f"{r['target']:{w}s} {v:>9s} {r['limit']:>8s} {met[r['met']]:>4s}  {r['note']}")
    n = sum(r["met"] is True for r in rows)
    print(f"{n} of {len(rows)} met; {sum(r['met'] is None for r in rows)} not measured")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
