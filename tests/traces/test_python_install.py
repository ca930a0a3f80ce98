#!/usr/bin/env python3
"""ctest: the README's install command works, offline: a venv with --system-site-packages
(numpy, zstandard and setuptools from Debian's packages), `python -m pip install
--no-build-isolation ./traces/python` from a copy of the source; the installed package
(validation.json included) writes a trace that kvtier reads.

usage: test_python_install.py <kvtier executable> <traces/python dir>
Exits 77 (skipped) when this python cannot make a venv with pip (Debian: python3-venv).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

KVTIER, SRC = sys.argv[1], os.path.abspath(sys.argv[2])


def run(*cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        print("FAIL:", " ".join(cmd), "\n", r.stdout[-3000:], r.stderr[-3000:])
        sys.exit(1)
    return r.stdout


with tempfile.TemporaryDirectory() as d:
    venv = os.path.join(d, "venv")
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("skipped: this python cannot make a venv with pip (Debian: apt install "
              "python3-venv):", r.stderr.strip()[-500:])
        sys.exit(77)
    py = os.path.join(venv, "bin", "python")
    src = os.path.join(d, "traces", "python")  # a copy: the build writes into its tree
    shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                            "__pycache__"))
    r = subprocess.run([py, "-c", "import setuptools, wheel; print(setuptools.__file__)"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL: the venv has no setuptools/wheel to build with (Debian: apt install "
              "python3-setuptools python3-wheel):", r.stderr.strip()[-500:])
        sys.exit(1)
    print("setuptools from", r.stdout.strip())
    # the README's command, with pip told not to look for an index (this machine has none)
    out = run(py, "-m", "pip", "install", "--no-build-isolation", "--no-index", src,
              cwd=d, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    print(out.strip().splitlines()[-1])
    script = (
        "import kvtier_trace as kt, numpy as np, os, sys\n"
        "assert kt.__file__.startswith(sys.prefix), kt.__file__\n"
        "assert os.path.exists(os.path.join(os.path.dirname(kt.__file__), 'validation.json'))\n"
        "with kt.TraceWriter(sys.argv[1], producer='install test') as w:\n"
        "    w.begin('r', 4096)\n"
        "    f = w.forward([kt.Row('r', 4096)])\n"
        "    for l in range(12): f.set_layer(l, np.arange(512)[None, ::-1])\n"
        "    f.commit()\n"
    )
    trace = os.path.join(d, "t.ktr")
    run(py, "-c", script, trace, cwd=d)  # cwd: not the source tree
    info = json.loads(run(KVTIER, "trace", "info", trace, "--json"))
    if info["decode_rows"] != 1 or info["selected_ids"] != 12 * 512:
        print("FAIL: kvtier reads", info)
        sys.exit(1)
    print("ok: installed into a venv, imported from it, its trace read by kvtier")
