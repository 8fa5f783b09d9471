#!/usr/bin/env python3
"""Measures what cuDNN convolutions take from PyTorch's caching allocator
beyond their inputs and outputs (the workspace), for every Conv2d of a few
torchvision CNNs, forward and backward, with torch.backends.cudnn.benchmark
off (PyTorch's default). Runs on a GPU machine; one JSON line per conv.

Usage: python3 bench/cudnn_workspace.py OUT.jsonl [batch ...]
"""
import json
import sys

import torch
import torch.nn.functional as F
import torchvision

torch.backends.cudnn.benchmark = False


def conv_inputs(model, batch):
    """Input shape of every Conv2d, from a forward pass on the meta device."""
    shapes = []
    hooks = [m.register_forward_hook(
        lambda mod, inp, out, name=name: shapes.append((name, mod, tuple(inp[0].shape))))
        for name, m in model.named_modules() if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        model(torch.zeros(batch, 3, 224, 224))
    for h in hooks:
        h.remove()
    return shapes


def nbytes(t):
    return t.numel() * t.element_size()


def measure(mod, shape, dtype):
    dev = "cuda"
    x = torch.randn(shape, device=dev, dtype=dtype, requires_grad=True)
    w = mod.weight.detach().to(dev, dtype).requires_grad_(True)
    args = dict(stride=mod.stride, padding=mod.padding, dilation=mod.dilation, groups=mod.groups)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    y = F.conv2d(x, w, None, **args)
    torch.cuda.synchronize()
    fwd = torch.cuda.max_memory_allocated() - base - nbytes(y)
    gy = torch.randn_like(y)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    gx, gw = torch.autograd.grad(y, (x, w), gy)
    torch.cuda.synchronize()
    bwd = torch.cuda.max_memory_allocated() - base - nbytes(gx) - nbytes(gw)
    out = dict(fwd_ws=fwd, bwd_ws=bwd, in_bytes=nbytes(x), out_bytes=nbytes(y),
               w_bytes=nbytes(w))
    del x, w, y, gy, gx, gw
    return out


def main():
    out = open(sys.argv[1], "w")
    batches = [int(b) for b in sys.argv[2:]] or [32]
    for name in ["resnet18", "resnet50", "mobilenet_v2"]:
        model = getattr(torchvision.models, name)(weights=None)
        for batch in batches:
            seen = set()
            for layer, mod, shape in conv_inputs(model, batch):
                key = (shape, mod.out_channels, mod.kernel_size, mod.stride, mod.groups)
                if key in seen:
                    continue
                seen.add(key)
                for dt in (torch.float32, torch.bfloat16):
                    rec = dict(model=name, layer=layer, batch=batch, shape=list(shape),
                               k=mod.out_channels, kernel=list(mod.kernel_size),
                               stride=list(mod.stride), groups=mod.groups,
                               dtype=str(dt).replace("torch.", ""))
                    rec.update(measure(mod, shape, dt))
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
            torch.cuda.empty_cache()
    print("done", flush=True)


if __name__ == "__main__":
    main()
