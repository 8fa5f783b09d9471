#!/usr/bin/env python3
"""GPU check of memplan's activation-checkpointing plans.

Builds resnet50 (torchvision, weights=None) or gpt2 (transformers
GPT2LMHeadModel, GPT2Config(use_cache=False), SDPA attention, wrapped so its
modules are named "m.transformer.h.N" as in models/gpt2_train.onnx), wraps the
modules memplan names in torch.utils.checkpoint.checkpoint(use_reentrant=False),
runs the calibration protocol (3 training steps, AdamW, autocast) in this fresh
process and prints one JSON line per step with the absolute peaks, which is what
`memplan plan` predicts (max_memory_allocated, max_memory_reserved; device_used
is total - free, nvidia-smi's view).

Usage:
  python3 bench/ckpt_validate.py MODEL BATCH [--precision amp_bf16|amp_fp16|fp32]
                                 [--checkpoint JSON_LIST | --advice FILE.json]
  MODEL: resnet50 | gpt2.  JSON_LIST: '["layer1.0", "layer1.1"]' ('[]' = none).
  --advice takes `memplan advise --format json` output and uses its
  recommendation's checkpoint list (and its batch when BATCH is 0);
  --placement none|sqrt|all|optimal picks that candidate (first of the
  recommendation and the alternatives with it) instead.
"""
import argparse
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class LMWrap(nn.Module):
    """The wrapper the ONNX export was made from: logits of an HF causal LM."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids):
        return self.m(input_ids=input_ids).logits


def build(name):
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(weights=None), ("image", (3, 224, 224), 1000)
    if name == "gpt2":
        import transformers
        cfg = transformers.GPT2Config(use_cache=False)
        cfg._attn_implementation = "sdpa"
        return LMWrap(transformers.GPT2LMHeadModel(cfg)), ("tokens", (512,), 50257)
    raise SystemExit(f"unknown model {name!r} (resnet50, gpt2)")


def recompute_in_backward(module):
    forward = module.forward

    def wrapped(*args, **kwargs):
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)

    module.forward = wrapped


def make_input(spec, batch):
    kind, shape, vocab = spec
    if kind == "image":
        return torch.randn(batch, *shape, device="cuda")
    return torch.randint(0, vocab, (batch, *shape), device="cuda")


def loss_fn(out):
    if out.dim() == 2:
        y = torch.randint(0, out.shape[1], (out.shape[0],), device=out.device)
        return F.cross_entropy(out, y)
    v = out.shape[-1]
    y = torch.randint(0, v, out.shape[:-1], device=out.device)
    return F.cross_entropy(out.reshape(-1, v), y.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("batch", type=int)
    ap.add_argument("--precision", default="amp_bf16", choices=["fp32", "amp_bf16", "amp_fp16"])
    ap.add_argument("--checkpoint", default="[]", help="JSON list of module names")
    ap.add_argument("--advice", help="memplan advise --format json output")
    ap.add_argument("--placement", choices=["none", "sqrt", "all", "optimal"],
                    help="with --advice: the candidate with this placement")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()

    modules = json.loads(a.checkpoint)
    batch = a.batch
    if a.advice:
        with open(a.advice) as f:
            doc = json.load(f)
        rec = doc["recommendation"]
        if a.placement:
            found = [c for c in [rec] + doc["alternatives"] if c["placement"] == a.placement]
            if not found:
                raise SystemExit(f"no {a.placement} candidate in {a.advice}")
            rec = found[0]
        modules = rec["checkpoint"]
        if batch <= 0:
            batch = rec["batch"]
    if not isinstance(modules, list) or batch <= 0:
        raise SystemExit("need a JSON list of module names and a positive batch")

    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    model, spec = build(a.model)
    for name in modules:
        recompute_in_backward(model.get_submodule(name))  # KeyError-like if memplan's name is wrong
    model = model.cuda().train()
    x = make_input(spec, batch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    dtype = {"fp32": None, "amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}[a.precision]
    scaler = torch.amp.GradScaler("cuda") if a.precision == "amp_fp16" else None
    print(json.dumps({"kind": "config", "model": a.model, "batch": batch,
                      "precision": a.precision, "optimizer": "adamw",
                      "checkpoint": modules, "torch": torch.__version__,
                      "device": torch.cuda.get_device_name(),
                      "param_bytes": sum(p.numel() * p.element_size()
                                         for p in model.parameters())}), flush=True)
    worst = {"max_memory_allocated": 0, "max_memory_reserved": 0, "device_used": 0}
    for step in range(a.steps):
        torch.cuda.reset_peak_memory_stats()
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            out = model(x)
            loss = loss_fn(out)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        del out, loss
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        rec = {"kind": "step", "step": step,
               "max_memory_allocated": torch.cuda.max_memory_allocated(),
               "max_memory_reserved": torch.cuda.max_memory_reserved(),
               "memory_allocated_after": torch.cuda.memory_allocated(),
               "device_used": total - free}
        for k in worst:
            worst[k] = max(worst[k], rec[k])
        print(json.dumps(rec), flush=True)
    print(json.dumps({"kind": "summary", **worst}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
