"""scripts/targets.py on logs written here: each target judged as the write-ups judge it, a run
that is missing or not JSON never counted as met."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import targets  # noqa: E402


def put(logs, name, obj):
    with open(os.path.join(logs, f"t-{name}.log"), "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))


def model_run(ms, bytes_per_step, **kw):
    r = {"decode_steady_forwards": 14, "decode_steady_ms_per_step": ms,
         "decode_steady_h2d_bytes_per_step": bytes_per_step, "decode_tokens_per_s": 100.0,
         "micro_batches": 1, "hit_rate": 0.5, "pool_pages": 1000, "prefill_tokens": 8,
         "prefill_ms": 1.0, "prefill_tokens_per_s": 8000.0}
    r.update(kw)
    return r


def trace_run(us, checksum="ab", pool=0):
    steps = [{"rows": 8, "tokens": 8, "decode_tokens": 8, "gpu_us": u} for u in us]
    steps.append({"rows": 8, "tokens": 800, "decode_tokens": 0, "gpu_us": 1e6})  # prefill
    steps.append({"rows": 2, "tokens": 2, "decode_tokens": 2, "gpu_us": 1e6})  # fewer rows
    return {"steps": steps, "checksum": checksum, "pool_pages": pool}


def by_target(rows):
    return {r["target"]: r for r in rows}


class Targets(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.logs = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_nothing_measured_is_nothing_met(self):
        rows = targets.judge(self.logs)
        self.assertEqual(len(rows), 14)
        self.assertTrue(all(r["met"] is None and r["measured"] is None for r in rows))

    def test_bank_and_step(self):
        fig = lambda n, v, t="", d="": {"name": n, "value": v, "unit": "", "target": t, "detail": d}
        put(self.logs, "bank", {"figures": [fig("host bank size", 97.5),
                                            fig("ready (map, fault in, pin)", 10.4, "<= 10", "x")]})
        put(self.logs, "step", {"figures": [fig("step a, 0 misses", 4.9, "<= 5 us"),
                                            fig("step b, 0 misses", 5.2, "<= 5 us"),
                                            fig("step c, 16 misses", 40.0, "")]})
        r = by_target(targets.judge(self.logs))
        self.assertEqual(r["100 GiB host bank ready, s"]["met"], False)
        self.assertAlmostEqual(r["100 GiB host bank ready, s"]["measured"], 10.4)
        step = r["all-hit step beside, us a layer"]
        self.assertEqual((step["met"], step["measured"]), (False, 5.2))  # the slowest all-hit row
        put(self.logs, "step", {"figures": [fig("step a, 0 misses", 4.9, "<= 5 us")]})
        self.assertTrue(by_target(targets.judge(self.logs))["all-hit step beside, us a layer"]["met"])

    def test_trace_ratio_of_the_decode_medians_of_the_most_rows(self):
        put(self.logs, "trace-device", trace_run([100, 101, 99]))
        put(self.logs, "trace-mirror", trace_run([109, 110, 111], pool=5590))
        t = by_target(targets.judge(self.logs))["bundled 8-request trace, mirror / device"]
        self.assertAlmostEqual(t["measured"], 1.1)
        self.assertTrue(t["met"])
        put(self.logs, "trace-mirror", trace_run([109, 110, 111], checksum="cd", pool=5590))
        t = by_target(targets.judge(self.logs))["bundled 8-request trace, mirror / device"]
        self.assertFalse(t["met"])  # a mirror that reads other bytes meets nothing
        self.assertIn("DIFFER", t["note"])

    def test_host_against_its_link_floor(self):
        put(self.logs, "8x1m-host-b24", model_run(4.4, 204e6))  # floor 4.0 ms
        h = by_target(targets.judge(self.logs))["8x1m host at B = 24 GiB, step / link floor"]
        self.assertAlmostEqual(h["measured"], 1.1)
        self.assertTrue(h["met"])
        put(self.logs, "8x1m-host-b24", model_run(7.3, 204e6))
        self.assertFalse(by_target(targets.judge(self.logs))
                         ["8x1m host at B = 24 GiB, step / link floor"]["met"])

    def test_mirror_against_the_larger_of_device_and_its_own_link(self):
        name = "8x1m mirror at B = 24 GiB, step / max(device, own link)"
        put(self.logs, "8x1m-mirror-b24", model_run(36.7, 1784e6))  # link 34.98 ms
        m = by_target(targets.judge(self.logs))[name]
        self.assertIsNone(m["met"])  # no device ideal: not judged on the link alone
        put(self.logs, "8x1m-device", model_run(3.85, 0))
        m = by_target(targets.judge(self.logs))[name]
        self.assertAlmostEqual(m["measured"], 36.7 / 34.98, places=3)
        self.assertTrue(m["met"])
        put(self.logs, "8x1m-device", model_run(40.0, 0))  # the device ideal is the larger
        m = by_target(targets.judge(self.logs))[name]
        self.assertAlmostEqual(m["measured"], 36.7 / 40.0)
        put(self.logs, "8x1m-mirror-b24", model_run(36.7, 1784e6, decode_steady_forwards=0))
        self.assertIsNone(by_target(targets.judge(self.logs))[name]["met"])

    def test_copy_first_and_prefill(self):
        put(self.logs, "copy-first-default", model_run(2.59, 0))
        put(self.logs, "copy-first", model_run(2.65, 0))
        put(self.logs, "prefill-1m", model_run(0, 0, prefill_tokens=1048576, prefill_ms=84100.0,
                                               prefill_tokens_per_s=12466.0))
        r = by_target(targets.judge(self.logs))
        self.assertTrue(r["8 x 16k mirror 2,400 slots, default / --copy-first"]["met"])
        self.assertTrue(r["1M prefill on host at B = 24 GiB, tokens/s"]["met"])
        put(self.logs, "copy-first", model_run(2.50, 0))
        self.assertFalse(by_target(targets.judge(self.logs))
                         ["8 x 16k mirror 2,400 slots, default / --copy-first"]["met"])

    def test_a_log_that_is_not_json_is_not_measured(self):
        put(self.logs, "bank", "kvtier bench: error: no CUDA device found\n")
        self.assertIsNone(by_target(targets.judge(self.logs))["100 GiB host bank ready, s"]["met"])

    def test_command_line(self):
        script = os.path.join(ROOT, "scripts", "targets.py")
        put(self.logs, "prefill-1m", model_run(0, 0, prefill_tokens_per_s=4000.0))
        out = subprocess.run([sys.executable, script, self.logs], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0)
        self.assertIn("0 of 14 met; 13 not measured", out.stdout)
        js = subprocess.run([sys.executable, script, self.logs, "--json"], capture_output=True,
                            text=True)
        self.assertEqual(json.loads(js.stdout)[-1]["met"], False)
        bad = subprocess.run([sys.executable, script, os.path.join(self.logs, "nowhere")],
                             capture_output=True, text=True)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("not a directory", bad.stderr)
        self.assertEqual(subprocess.run([sys.executable, script], capture_output=True).returncode, 2)


if __name__ == "__main__":
    unittest.main()
