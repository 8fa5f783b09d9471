#!/usr/bin/env python3
"""Per-op memory of one training step, for finding which aten op takes a
block the plan lacks (GPU machine).

Builds a model as bench/ckpt_validate.py does (same checkpoint wrapping),
runs the calibration protocol's first steps, and in the last one logs every
aten op that runs (forward, checkpoint recomputation and backward alike,
through a TorchDispatchMode, which autograd's threads inherit): its phase,
its name, its outputs (dtype and shape), the allocated bytes before it, after
it and at its highest while it ran (torch.cuda.max_memory_allocated reset
before each op). Prints one JSON line per op whose transient or output is at
least MIN_MIB (default 16).

Usage:
  python3 bench/op_memlog.py MODEL BATCH [--precision amp_bf16|fp32]
                             [--checkpoint JSON_LIST] [--min-mib 16]
"""
import argparse
import contextlib
import json
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import ckpt_validate as cv

MIB = 2**20


class OpLog(TorchDispatchMode):
    def __init__(self, min_bytes):
        super().__init__()
        self.min_bytes = min_bytes
        self.phase = "forward"
        self.index = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = func(*args, **(kwargs or {}))
        high = torch.cuda.max_memory_allocated()
        after = torch.cuda.memory_allocated()
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        biggest = max((t.numel() * t.element_size() for t in outs), default=0)
        self.index += 1
        if high - before >= self.min_bytes or biggest >= self.min_bytes:
            print(json.dumps({
                "i": self.index, "phase": self.phase, "op": str(func),
                "outs": [[str(t.dtype).replace("torch.", ""), list(t.shape)] for t in outs],
                "before_mib": round(before / MIB, 1),
                "transient_mib": round((high - after) / MIB, 1),
                "kept_mib": round((after - before) / MIB, 1)}), flush=True)
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("batch", type=int)
    ap.add_argument("--precision", default="amp_bf16", choices=["fp32", "amp_bf16"])
    ap.add_argument("--checkpoint", default="[]")
    ap.add_argument("--min-mib", type=float, default=16)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    model, spec = cv.build(a.model)
    for name in json.loads(a.checkpoint):
        cv.recompute_in_backward(model.get_submodule(name))
    model = model.cuda().train()
    x = cv.make_input(spec, a.batch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    dtype = torch.bfloat16 if a.precision == "amp_bf16" else None
    log = OpLog(int(a.min_mib * MIB))
    for step in range(2):  # the first step makes the optimizer state; the second is logged
        logged = log if step == 1 else contextlib.nullcontext()
        log.phase = "forward"
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            with logged:
                out = model(x)
                loss = cv.loss_fn(out)
        log.phase = "backward"
        with logged:
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del out, loss
    torch.cuda.synchronize()


if __name__ == "__main__":
    sys.exit(main())
