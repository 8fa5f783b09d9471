"""memplan_torch.Monitor on a fake torch (no GPU, no torch needed)."""

import json
import os
import sys
import tempfile
import unittest
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import fake_torch  # noqa: E402
from fake_torch import MiB  # noqa: E402


class FakeTorchCase(unittest.TestCase):
    """Installs a fresh fake `torch` in sys.modules for each test."""

    def setUp(self):
        self._saved = {k: sys.modules.get(k) for k in ("torch",)}
        self.torch = fake_torch.make_module()
        sys.modules["torch"] = self.torch
        import memplan_torch  # noqa: F401

        self.mp = memplan_torch

    def tearDown(self):
        for k, v in self._saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v

    def unmonitored_peaks(self, steps, leak_bytes=0):
        """Per-step (allocated, reserved) peaks of the loop without a monitor, on a fresh
        allocator, reading the fake's own peaks (reset at each step's start)."""
        self.torch = fake_torch.make_module()
        sys.modules["torch"] = self.torch
        a = fake_torch.allocator()
        model = fake_torch.Net()
        opt = fake_torch.Optimizer(model.parameters())
        keep = []
        out = []
        for _ in range(steps):
            a.reset_true_peaks()
            fake_torch.train_step(model, opt, keep, leak_bytes)
            out.append((a.true_peak_allocated, a.true_peak_reserved, a.allocated))
        return out

    def monitored(self, steps, leak_bytes=0, net=None, **kw):
        self.torch = fake_torch.make_module()
        sys.modules["torch"] = self.torch
        model = fake_torch.Net(**(net or {}))
        opt = fake_torch.Optimizer(model.parameters())
        keep = []
        with self.mp.Monitor(model, opt, **kw) as mon:
            for _ in range(steps):
                fake_torch.train_step(model, opt, keep, leak_bytes)
                mon.step()
        return mon


class MonitorPeaks(FakeTorchCase):
    def test_step_peaks_equal_the_allocators_own(self):
        want = self.unmonitored_peaks(4)
        mon = self.monitored(4)
        self.assertEqual(len(mon.steps), 4)
        for s, (alloc, reserved, end) in zip(mon.steps, want):
            self.assertEqual(s["peak_allocated"], alloc)
            self.assertEqual(s["peak_reserved"], reserved)
            self.assertEqual(s["allocated_end"], end)
        # The monitor reset the counters at its boundaries (it owns them while it runs).
        self.assertGreater(fake_torch.allocator().resets, 4 * 20)

    def test_fast_statistics_and_public_functions_agree(self):
        fast = self.monitored(3)
        self.assertGreater(getattr(fake_torch.allocator(), "raw_calls", 0), 50)
        self.torch = fake_torch.make_module()
        del self.torch._C  # a torch without the allocator's raw statistics
        sys.modules["torch"] = self.torch
        model = fake_torch.Net()
        opt = fake_torch.Optimizer(model.parameters())
        with self.mp.Monitor(model, opt) as slow:
            for _ in range(3):
                fake_torch.train_step(model, opt)
                slow.step()
        self.assertEqual(getattr(fake_torch.allocator(), "raw_calls", 0), 0)
        strip = [{k: v for k, v in s.items() if k not in ("samples", "seconds", "phases")}
                 for s in fast.steps]
        self.assertEqual(strip, [{k: v for k, v in s.items()
                                  if k not in ("samples", "seconds", "phases")}
                                 for s in slow.steps])

    def test_phase_peaks_partition_the_step(self):
        mon = self.monitored(3)
        for s in mon.steps:
            self.assertEqual(list(s["phases"]), ["forward", "backward", "optimizer"])
            self.assertEqual(s["peak_allocated"],
                             max(p["peak_allocated"] for p in s["phases"].values()))
            self.assertEqual(s["peak_reserved"],
                             max(p["peak_reserved"] for p in s["phases"].values()))
        # Optimizer state appears in the first step only: its optimizer phase is higher
        # relative to its start than the later ones'.
        s0, s1 = mon.steps[0], mon.steps[1]
        self.assertGreater(s1["allocated_start"], s0["allocated_start"])

    def test_module_forward_peak_includes_its_workspace(self):
        mon = self.monitored(2)
        mods = mon.steps[1]["modules"]
        # Every submodule is named as its path, with a forward and a backward peak.
        for name in ("embed", "blocks.b0", "blocks.b0.fc1", "blocks.b0.fc2",
                     "blocks.b1.fc1", "head"):
            self.assertIn(name, mods)
            self.assertIn("forward", mods[name])
            self.assertIn("backward", mods[name])
        fc1 = mods["blocks.b0.fc1"]["forward"]
        fc2 = mods["blocks.b0.fc2"]["forward"]
        # fc1: its 16 MiB output, then a 16 MiB workspace; fc2 (no workspace) adds its 8 MiB
        # output to fc1's: fc1 peaks 8 MiB higher.
        self.assertEqual(fc1 - fc2, 8 * MiB)
        self.assertEqual(mods["blocks.b0"]["forward"], max(fc1, fc2))
        # b1 starts where b0 left (its outputs, 24 MiB, are kept for backward) and adds 24 MiB
        # without a workspace: b0 peaked at its start + 32 MiB, b1 at b0's start + 48 MiB.
        self.assertEqual(mods["blocks.b1"]["forward"] - mods["blocks.b0"]["forward"], 16 * MiB)
        # fc1's 16 MiB backward workspace comes before its 8 MiB input and 2 MiB weight
        # gradients: without it, b0.fc1's backward peaks 6 MiB lower, and nothing else changes.
        bare = self.monitored(2, net={"workspace": 0}).steps[1]["modules"]
        self.assertEqual(mods["blocks.b0.fc1"]["backward"] - bare["blocks.b0.fc1"]["backward"],
                         6 * MiB)
        self.assertEqual(mods["blocks.b1.fc1"]["backward"], bare["blocks.b1.fc1"]["backward"])
        self.assertEqual(mods["head"]["backward"], bare["head"]["backward"])
        # Relative to each call's start: fc1 rises by its output and workspace (32 MiB) and
        # keeps its output (16 MiB); fc2 rises by and keeps its 8 MiB output; the block keeps
        # both outputs (the graph holds them) and rises as far as fc1 took it.
        f1, f2, b0 = mods["blocks.b0.fc1"], mods["blocks.b0.fc2"], mods["blocks.b0"]
        self.assertEqual((f1["forward_rise"], f1["forward_kept"]), (32 * MiB, 16 * MiB))
        self.assertEqual((f2["forward_rise"], f2["forward_kept"]), (8 * MiB, 8 * MiB))
        self.assertEqual((b0["forward_rise"], b0["forward_kept"]), (32 * MiB, 24 * MiB))
        # In backward, fc1's workspace (16 MiB) is the most it rises above where its gradient
        # arrived; without the workspace it rises by its input and weight gradients (10 MiB).
        self.assertEqual(f1["backward_rise"], 16 * MiB)
        self.assertEqual(bare["blocks.b0.fc1"]["backward_rise"], 10 * MiB)
        # No module peak exceeds the step's.
        for m in mods.values():
            for v in m.values():
                self.assertLessEqual(v, mon.steps[1]["peak_allocated"])

    def test_prefix_and_module_selection(self):
        mon = self.monitored(1, prefix="m.", modules=["blocks.b0", "head"])
        self.assertEqual(sorted(mon.steps[0]["modules"]), ["m.blocks.b0", "m.head"])
        with self.assertRaisesRegex(ValueError, "not in the model: nope"):
            self.monitored(1, modules=["nope"])
        # Depth 1; "blocks" is a container that is never called, so it has no figures.
        mon = self.monitored(1, modules=1)
        self.assertEqual(sorted(mon.steps[0]["modules"]), ["embed", "head"])

    def test_hooks_are_removed_on_close(self):
        model = fake_torch.Net()
        opt = fake_torch.Optimizer(model.parameters())
        orig = self.torch.autograd.backward
        with self.mp.Monitor(model, opt):
            self.assertIsNot(self.torch.autograd.backward, orig)
        self.assertIs(self.torch.autograd.backward, orig)
        for _, m in model.named_modules():
            self.assertEqual(m._pre, [])
            self.assertEqual(m._post, [])
        self.assertEqual(opt._pre, [])


class Leaks(FakeTorchCase):
    def test_planted_leak_is_reported_within_three_steps_with_its_size(self):
        seen = []
        mon = self.monitored(5, leak_bytes=4 * MiB, on_warning=seen.append)
        self.assertEqual(len(mon.leaks), 1)
        lk = mon.leaks[0]
        self.assertLessEqual(lk["first_step"], 2)
        self.assertEqual(lk["bytes_per_step"], 4 * MiB)
        self.assertEqual(lk["last_step"], 4)
        self.assertEqual([w["kind"] for w in seen], ["leak"])
        self.assertLessEqual(seen[0]["step"], 2)
        self.assertIn("4.0 MiB per step", seen[0]["message"])

    def test_no_leak_without_growth(self):
        mon = self.monitored(6)
        self.assertEqual(mon.leaks, [])

    def test_small_growth_below_threshold_is_not_a_leak(self):
        mon = self.monitored(5, leak_bytes=64 * 1024)
        self.assertEqual(mon.leaks, [])
        mon = self.monitored(5, leak_bytes=64 * 1024, leak_min_bytes=32 * 1024)
        self.assertEqual(len(mon.leaks), 1)
        self.assertEqual(mon.leaks[0]["bytes_per_step"], 64 * 1024)


class Cache(FakeTorchCase):
    def test_probe_measures_what_empty_cache_frees(self):
        mon = self.monitored(3, probe_empty_cache="step_end")
        ec = mon.trace["empty_cache"]
        self.assertEqual([r["step"] for r in ec], [0, 1, 2])
        for r, s in zip(ec, mon.steps):
            self.assertEqual(r["reserved_before"], s["reserved_end"])
            self.assertEqual(r["freed_bytes"], r["reserved_before"] - r["reserved_after"])
            self.assertEqual(r["reason"], "probe")
            # What stays reserved is at least what is allocated, and within one segment of it.
            self.assertGreaterEqual(r["reserved_after"], r["allocated"])
            self.assertLess(r["reserved_after"] - r["allocated"], fake_torch.SEGMENT)
        self.assertGreater(ec[0]["freed_bytes"], 0)
        self.assertEqual(fake_torch.allocator().empty_cache_calls, 3)

    def test_probe_every_and_forward_end(self):
        mon = self.monitored(4, probe_empty_cache="forward_end", probe_every=2)
        self.assertEqual([(r["step"], r["at"]) for r in mon.trace["empty_cache"]],
                         [(0, "forward_end"), (2, "forward_end")])

    def test_threshold_policy_releases_only_above_its_share(self):
        mon = self.monitored(3, policy=self.mp.EmptyCachePolicy(share=0.9))
        self.assertEqual(mon.trace["empty_cache"], [])
        # The fake device is 16 GiB; a share below the run's reserved memory triggers it.
        mon = self.monitored(3, policy=self.mp.EmptyCachePolicy(share=0.004))
        ec = mon.trace["empty_cache"]
        self.assertGreater(len(ec), 0)
        for r in ec:
            self.assertEqual(r["reason"], "policy")
            self.assertGreater(r["reserved_before"], 0.004 * (16 << 30))
            self.assertGreaterEqual(r["seconds"], 0.0)
        self.assertIn("empty_cache:", mon.summary())
        with self.assertRaises(ValueError):
            self.mp.EmptyCachePolicy(share=1.5)

    def test_fragmentation_and_device_view(self):
        mon = self.monitored(2)
        s = mon.steps[-1]
        self.assertEqual(s["fragmentation_end"], s["reserved_end"] - s["allocated_end"])
        self.assertEqual(s["device_used_end"], s["reserved_end"] + 500 * MiB)


class PlanComparison(FakeTorchCase):
    def plan_doc(self, forward, backward=None, optimizer=None):
        def peak(f, b, o):
            ph = {"forward": {"allocated_bytes": f, "reserved_bytes": f}}
            if b is not None:
                ph["backward"] = {"allocated_bytes": b, "reserved_bytes": b}
            if o is not None:
                ph["optimizer"] = {"allocated_bytes": o, "reserved_bytes": o}
            top = max(x for x in (f, b, o) if x is not None)
            return {"allocated_bytes": top, "reserved_bytes": top, "phases": ph}

        p = peak(forward, backward, optimizer)
        return {"model": "net.onnx", "config": {"mode": "train"}, "peak": p, "first_step": p,
                "steady": p}

    def test_warns_as_soon_as_a_phase_exceeds_the_plan(self):
        want = self.unmonitored_peaks(1)
        seen = []
        big = 10 << 30
        doc = self.plan_doc(8 * MiB, big, big)  # forward planned far too low
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mon = self.monitored(2, plan=doc, margin=0.1, on_warning=seen.append)
        kinds = [(w["step"], w["phase"], w["kind"]) for w in seen]
        self.assertEqual(kinds, [(0, "forward", "over_plan"), (1, "forward", "over_plan")])
        self.assertTrue(any(issubclass(w.category, self.mp.MemplanWarning) for w in caught))
        # Warned during the forward of step 0: the measured value then is below the step peak.
        self.assertLessEqual(seen[0]["measured"], want[0][0])
        self.assertGreater(seen[0]["measured"], 8 * MiB * 1.1)
        self.assertEqual(mon.trace["plan"]["margin"], 0.1)

    def test_no_warning_within_the_margin(self):
        seen = []
        mon = self.monitored(2, on_warning=seen.append)
        s = mon.steps[1]["phases"]
        doc = self.plan_doc(s["forward"]["peak_allocated"], s["backward"]["peak_allocated"],
                            s["optimizer"]["peak_allocated"])
        seen = []
        self.monitored(3, plan=doc, margin=0.1, on_warning=seen.append)
        self.assertEqual([w for w in seen if w["step"] > 0], [])

    def test_plan_file_errors(self):
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.json")
            with open(bad, "w") as f:
                f.write("{not json")
            with self.assertRaisesRegex(self.mp.PlanError, "not JSON"):
                self.mp.load_plan(bad)
            with open(bad, "w") as f:
                json.dump({"peak": {"allocated_bytes": -1, "reserved_bytes": 0}, "config": {}}, f)
            with self.assertRaisesRegex(self.mp.PlanError, "allocated_bytes"):
                self.mp.load_plan(bad)
            with self.assertRaisesRegex(self.mp.PlanError, "not a `memplan plan"):
                self.mp.load_plan({"steps": []})


class TraceFile(FakeTorchCase):
    def test_trace_round_trip_and_schema(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.json")
            mon = self.monitored(3, trace=path, leak_bytes=4 * MiB)
            doc = self.mp.read_trace(path)
            self.assertEqual(doc["schema"], "memplan-trace")
            self.assertEqual(doc["version"], 1)
            self.assertEqual(doc["steps"], mon.steps)
            self.assertEqual(doc["device"]["total_bytes"], 16 << 30)
            self.assertEqual(doc["sample_columns"],
                             ["seconds", "phase", "peak_allocated", "allocated", "reserved"])
            s = doc["steps"][1]
            self.assertGreater(len(s["samples"]), 10)
            self.assertEqual(max(x[2] for x in s["samples"]), s["peak_allocated"])
            self.assertEqual(os.listdir(d), ["run.json"])  # no temporary left behind

    def test_bad_traces_are_refused_with_the_reason(self):
        tr = self.mp.trace
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "t.json")
            cases = [
                ("[]", "not a JSON object"),
                ('{"schema": "x"}', "schema"),
                ('{"schema": "memplan-trace", "version": 2, "steps": [{}]}', "version"),
                ('{"schema": "memplan-trace", "version": 1, "steps": []}', "non-empty"),
                ('{"schema": "memplan-trace", "version": 1, "steps": [{"peak_allocated": -5,'
                 ' "peak_reserved": 0}]}', "peak_allocated"),
                ('{"schema": "memplan-trace", "version": 1, "steps": [{"peak_allocated": 5,'
                 ' "peak_reserved": 6, "phases": {"sideways": {}}}]}', "unknown phase"),
                ("{", "not JSON"),
            ]
            for text, msg in cases:
                with open(p, "w") as f:
                    f.write(text)
                with self.assertRaisesRegex(tr.TraceError, msg):
                    tr.read(p)


class Inference(FakeTorchCase):
    def test_forward_only_loop(self):
        model = fake_torch.Net()
        with self.mp.Monitor(model) as mon:
            for _ in range(2):
                with self.torch.no_grad():
                    out = model(fake_torch.Tensor(MiB))
                del out
                mon.step()
        self.assertEqual(len(mon.steps), 2)
        self.assertEqual(list(mon.steps[1]["phases"]), ["forward"])
        self.assertNotIn("backward", mon.steps[1]["modules"]["head"])


if __name__ == "__main__":
    unittest.main()
