"""The README's five-line training-loop example runs (on the fake torch) and writes its trace."""

import json
import os
import re
import sys
import tempfile
import unittest
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import fake_torch  # noqa: E402

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")


class ReadmeExample(unittest.TestCase):
    def test_five_line_loop(self):
        text = open(README).read()
        blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "Monitor(" in b]
        self.assertEqual(len(blocks), 1)
        code = blocks[0]
        self.assertEqual(len(code.strip().splitlines()), 5)
        saved = sys.modules.get("torch")
        sys.modules["torch"] = fake_torch.make_module()
        cwd = os.getcwd()
        try:
            with tempfile.TemporaryDirectory() as d:
                os.chdir(d)
                big = 10 << 30
                peak = {"allocated_bytes": big, "reserved_bytes": big}
                with open("plan.json", "w") as f:
                    json.dump({"model": "x.onnx", "config": {}, "peak": peak}, f)
                model = fake_torch.Net()
                env = {"model": model, "optimizer": fake_torch.Optimizer(model.parameters()),
                       "loader": [fake_torch.Tensor(1 << 20) for _ in range(3)],
                       "loss_fn": fake_torch.loss_of}
                with warnings.catch_warnings():
                    warnings.simplefilter("error")  # within the plan: no warning
                    exec(compile(code, "README.md", "exec"), env)
                import memplan_torch

                doc = memplan_torch.read_trace("run.json")
                self.assertEqual(len(doc["steps"]), 3)
                self.assertIn("blocks.b0.fc1", doc["steps"][2]["modules"])
        finally:
            os.chdir(cwd)
            if saved is None:
                sys.modules.pop("torch", None)
            else:
                sys.modules["torch"] = saved


if __name__ == "__main__":
    unittest.main()
