#!/usr/bin/env python3
"""The cuDNN workspaces of the convolutions of real models: every Conv1d /
Conv2d call of a bench/families.py model at a batch (found with forward
hooks, so the shapes, strides, padding, dilation and groups are PyTorch's
own), each measured alone like bench/cudnn_ws_grid.py does (cudnn.benchmark
off, PyTorch's default): the blocks allocated and freed inside the forward,
the input-gradient and the weight-gradient pass, in float32 and bfloat16.
One JSON line per (convolution, dtype).

Usage (GPU machine):
  python3 bench/cudnn_ws_models.py OUT.jsonl MODEL:BATCH [MODEL:BATCH ...]
  e.g. unet_ldm:8 unet_ldm:32 wav2vec2_cls:16 deeplab_mnv3:16
"""
import json
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402
from cudnn_ws_grid import transient_blocks  # noqa: E402

torch.backends.cudnn.benchmark = False


def conv_calls(name, batch):
    """(input shape, weight shape, stride, padding, dilation, groups) of every
    convolution the model's forward runs, in call order, without repeats."""
    build, inputs, *_ = families.MODELS[name]
    torch.manual_seed(0)
    model = build().cuda().train()
    seen = []
    hooks = []

    def hook(mod, args):
        key = (tuple(args[0].shape), tuple(mod.weight.shape), tuple(mod.stride),
               tuple(mod.padding) if not isinstance(mod.padding, str) else mod.padding,
               tuple(mod.dilation), mod.groups)
        if key not in seen:
            seen.append(key)

    for m in model.modules():
        if isinstance(m, (nn.Conv1d, nn.Conv2d)):
            hooks.append(m.register_forward_pre_hook(hook))
    with torch.no_grad():
        model(*inputs(batch, "cuda"))
    for h in hooks:
        h.remove()
    del model
    torch.cuda.empty_cache()
    return seen


def measure(xs, ws, stride, padding, dilation, groups, dtype):
    x = torch.randn(*xs, device="cuda", dtype=dtype)
    w = torch.randn(*ws, device="cuda", dtype=dtype)
    if isinstance(padding, str):  # "same" / "valid": what nn.Conv computes
        padding = tuple(0 if padding == "valid" else d * (k - 1) // 2
                        for d, k in zip(dilation, ws[2:]))
    args = (list(stride), list(padding), list(dilation), False, [0] * len(stride), groups)
    y = torch.ops.aten.convolution(x, w, None, *args)
    gy = torch.randn_like(y)
    bwd = torch.ops.aten.convolution_backward
    fwd = transient_blocks(lambda: torch.ops.aten.convolution(x, w, None, *args))
    dgrad = transient_blocks(lambda: bwd(gy, x, w, None, *args, [True, False, False]))
    wgrad = transient_blocks(lambda: bwd(gy, x, w, None, *args, [False, True, False]))
    es = x.element_size()
    rec = dict(x=list(xs), w=list(ws), stride=list(stride), padding=list(padding),
               dilation=list(dilation), groups=groups, dtype=str(dtype).replace("torch.", ""),
               in_bytes=x.numel() * es, w_bytes=w.numel() * es, out_bytes=y.numel() * es,
               fwd=fwd, dgrad=dgrad, wgrad=wgrad)
    del x, w, y, gy
    torch.cuda.empty_cache()
    return rec


def main():
    out = open(sys.argv[1], "w")
    for spec in sys.argv[2:]:
        name, batch = spec.split(":")
        for call in conv_calls(name, int(batch)):
            for dt in (torch.float32, torch.bfloat16):
                try:
                    rec = measure(*call, dt)
                except Exception as e:  # noqa: BLE001 - record and go on
                    rec = dict(x=list(call[0]), w=list(call[1]), dtype=str(dt), error=repr(e)[:200])
                rec.update(model=name, batch=int(batch))
                out.write(json.dumps(rec) + "\n")
                out.flush()


if __name__ == "__main__":
    main()
