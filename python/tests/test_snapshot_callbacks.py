"""Snapshot conversion and the framework callbacks (fake lightning and transformers)."""

import os
import pickle
import sys
import tempfile
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import fake_torch  # noqa: E402
from fake_torch import MiB  # noqa: E402

import memplan_torch  # noqa: E402


def frames(name, line):
    return [{"filename": "/usr/lib/python3/site-packages/torch/nn/functional.py", "line": 1,
             "name": "linear"}, {"filename": "/home/u/train.py", "line": line, "name": name}]


def sample_snapshot():
    """A history as _record_memory_history() records it: 1 MiB allocated before the window,
    a 20 MiB segment, two tensors, one freed (requested, then completed), an OOM."""
    seg = 20 * MiB
    trace = [
        {"action": "segment_alloc", "addr": 0x1000, "size": seg, "stream": 0, "time_us": 100},
        {"action": "alloc", "addr": 0x1000, "size": 8 * MiB, "stream": 0, "time_us": 110,
         "frames": frames("forward", 10)},
        {"action": "alloc", "addr": 0x1000 + 8 * MiB, "size": 6 * MiB, "stream": 0,
         "time_us": 120, "frames": frames("loss", 20)},
        {"action": "free_requested", "addr": 0x1000 + 8 * MiB, "size": 6 * MiB, "stream": 0,
         "time_us": 130},
        {"action": "free_completed", "addr": 0x1000 + 8 * MiB, "size": 6 * MiB, "stream": 0,
         "time_us": 131},
        {"action": "oom", "size": 80 << 30, "stream": 0, "time_us": 140,
         "frames": frames("huge", 30)},
    ]
    segments = [
        {"device": 0, "address": 0, "total_size": 2 * MiB, "stream": 0, "segment_type": "small",
         "allocated_size": MiB, "active_size": MiB,
         "blocks": [{"size": MiB, "state": "active_allocated", "address": 0},
                    {"size": MiB, "state": "inactive", "address": MiB}]},
        {"device": 0, "address": 0x1000, "total_size": seg, "stream": 0, "segment_type": "large",
         "allocated_size": 8 * MiB, "active_size": 8 * MiB,
         "blocks": [{"size": 8 * MiB, "state": "active_allocated", "address": 0x1000},
                    {"size": 12 * MiB, "state": "inactive", "address": 0x1000 + 8 * MiB}]},
    ]
    return {"segments": segments, "device_traces": [trace]}


class Snapshot(unittest.TestCase):
    def test_levels_peaks_and_sites(self):
        doc = memplan_torch.snapshot_to_trace(sample_snapshot())
        s = doc["steps"][0]
        self.assertEqual(s["allocated_start"], MiB)
        self.assertEqual(s["reserved_start"], 2 * MiB)
        self.assertEqual(s["peak_allocated"], 15 * MiB)
        self.assertEqual(s["peak_reserved"], 22 * MiB)
        self.assertEqual(s["allocated_end"], 9 * MiB)
        self.assertEqual(s["reserved_end"], 22 * MiB)
        self.assertEqual(s["fragmentation_end"], 13 * MiB)
        self.assertEqual([x[2] for x in s["samples"]],
                         [MiB, 9 * MiB, 15 * MiB, 9 * MiB, 9 * MiB, 9 * MiB])
        self.assertAlmostEqual(s["samples"][2][0], 20e-6)
        sites = doc["snapshot"]["peak_sites"]
        self.assertEqual(sites, [{"site": "train.py:10:forward", "bytes": 8 * MiB},
                                 {"site": "train.py:20:loss", "bytes": 6 * MiB}])
        self.assertEqual([w["kind"] for w in doc["warnings"]], ["oom"])
        self.assertIn("train.py:30:huge", doc["warnings"][0]["message"])

    def test_pickle_file_and_downsampling(self):
        snap = sample_snapshot()
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "snap.pickle")
            with open(p, "wb") as f:
                pickle.dump(snap, f)
            doc = memplan_torch.snapshot_to_trace(p, max_samples=2)
            self.assertEqual(len(doc["steps"][0]["samples"]), 2)
            # The highest sample survives.
            self.assertEqual(max(x[2] for x in doc["steps"][0]["samples"]), 15 * MiB)
            out = os.path.join(d, "t.json")
            memplan_torch.write_trace(doc, out)
            self.assertEqual(memplan_torch.read_trace(out)["steps"][0]["peak_allocated"], 15 * MiB)
            with open(p, "wb") as f:
                f.write(b"not a pickle")
            with self.assertRaises(memplan_torch.SnapshotError):
                memplan_torch.snapshot_to_trace(p)

    def test_without_history_says_how_to_record_it(self):
        with self.assertRaisesRegex(memplan_torch.SnapshotError, "_record_memory_history"):
            memplan_torch.snapshot_to_trace({"segments": [], "device_traces": [[]]})
        with self.assertRaisesRegex(memplan_torch.SnapshotError, "segments"):
            memplan_torch.snapshot_to_trace({"blocks": []})


class Callbacks(unittest.TestCase):
    def setUp(self):
        self.saved = {k: sys.modules.get(k) for k in
                      ("torch", "lightning", "lightning.pytorch", "pytorch_lightning",
                       "transformers")}
        self.torch = fake_torch.make_module()
        sys.modules["torch"] = self.torch

    def tearDown(self):
        for k, v in self.saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v

    def test_lightning_callback_steps_per_optimizer_step(self):
        lp = types.ModuleType("lightning.pytorch")

        class Callback:
            pass

        lp.Callback = Callback
        sys.modules["lightning"] = types.ModuleType("lightning")
        sys.modules["lightning.pytorch"] = lp
        cb = memplan_torch.lightning_callback(leak_steps=2)
        self.assertIsInstance(cb, Callback)
        model = fake_torch.Net()
        opt = fake_torch.Optimizer(model.parameters())
        trainer = types.SimpleNamespace(optimizers=[types.SimpleNamespace(optimizer=opt)],
                                        accumulate_grad_batches=1)
        cb.on_train_start(trainer, model)
        for i in range(3):
            fake_torch.train_step(model, opt)
            cb.on_train_batch_end(trainer, model, None, None, i)
        cb.on_train_end(trainer, model)
        self.assertEqual(len(cb.monitor.steps), 3)
        self.assertIn("optimizer", cb.monitor.steps[2]["phases"])
        self.assertIn("blocks.b0.fc1", cb.monitor.steps[2]["modules"])

    def test_hf_callback(self):
        tf = types.ModuleType("transformers")

        class TrainerCallback:
            pass

        tf.TrainerCallback = TrainerCallback
        sys.modules["transformers"] = tf
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "hf.json")
            cb = memplan_torch.hf_callback(trace=path)
            self.assertIsInstance(cb, TrainerCallback)
            model = fake_torch.Net()
            opt = fake_torch.Optimizer(model.parameters())
            cb.on_train_begin(None, None, None, model=model, optimizer=opt)
            for _ in range(2):
                fake_torch.train_step(model, opt)
                cb.on_step_end(None, None, None)
            cb.on_train_end(None, None, None)
            self.assertEqual(len(memplan_torch.read_trace(path)["steps"]), 2)

    def test_missing_framework_is_a_clear_import_error(self):
        sys.modules["transformers"] = None
        with self.assertRaisesRegex(ImportError, "needs transformers"):
            memplan_torch.hf_callback()
        sys.modules["lightning.pytorch"] = None
        sys.modules["pytorch_lightning"] = None
        with self.assertRaisesRegex(ImportError, "needs lightning"):
            memplan_torch.lightning_callback()


class NoTorch(unittest.TestCase):
    def test_package_imports_without_torch(self):
        import subprocess

        code = ("import sys; sys.modules['torch'] = None; import memplan_torch; "
                "print(memplan_torch.__version__)")
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        out = subprocess.run([sys.executable, "-c", code], cwd=here, capture_output=True,
                             text=True, check=True)
        self.assertEqual(out.stdout.strip(), memplan_torch.__version__)


if __name__ == "__main__":
    unittest.main()
