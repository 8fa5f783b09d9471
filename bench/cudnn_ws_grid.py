#!/usr/bin/env python3
"""Measures the cuDNN workspace PyTorch takes from the caching allocator for
each pass of a convolution (forward, input gradient, weight gradient) over a
grid of shapes, with torch.backends.cudnn.benchmark off (PyTorch's default,
heuristic engine choice). One JSON line per (shape, dtype).

The workspace of a pass is the largest block allocated and freed inside the
pass: the allocation history is recorded, and the pass's own outputs (which
outlive it) are not counted.

Usage (GPU machine): python3 bench/cudnn_ws_grid.py OUT.jsonl
"""
import itertools
import json
import sys

import torch

torch.backends.cudnn.benchmark = False


def transient_blocks(fn):
    """Sizes of the blocks that fn allocates and frees again."""
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")
    out = fn()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    live = {}
    freed = []
    for e in snap["device_traces"][0]:
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
        elif e["action"] == "free_completed" and e["addr"] in live:
            freed.append(live.pop(e["addr"]))
    del out
    return freed


def conv_passes(n, c, k, hw, ks, stride, groups, dtype, dilation=1):
    """The transient blocks of each pass of one convolution ("same" padding
    for stride 1) and its tensors' sizes."""
    dev = "cuda"
    pad = dilation * (ks // 2)
    x = torch.randn(n, c, hw, hw, device=dev, dtype=dtype)
    w = torch.randn(k, c // groups, ks, ks, device=dev, dtype=dtype)
    args = ([stride, stride], [pad, pad], [dilation, dilation], False, [0, 0], groups)
    y = torch.nn.functional.conv2d(x, w, None, stride, pad, dilation, groups)
    gy = torch.randn_like(y)
    conv_bwd = torch.ops.aten.convolution_backward
    fwd = transient_blocks(
        lambda: torch.nn.functional.conv2d(x, w, None, stride, pad, dilation, groups))
    dgrad = transient_blocks(lambda: conv_bwd(gy, x, w, None, *args, [True, False, False]))
    wgrad = transient_blocks(lambda: conv_bwd(gy, x, w, None, *args, [False, True, False]))
    es = x.element_size()
    rec = dict(dtype=str(dtype).replace("torch.", ""), in_bytes=x.numel() * es,
               out_bytes=y.numel() * es, w_bytes=w.numel() * es,
               fwd=fwd, dgrad=dgrad, wgrad=wgrad)
    del x, w, y, gy
    torch.cuda.empty_cache()
    return rec


def measure(n, c, k, hw, ks, stride, groups, dtype):
    rec = dict(n=n, c=c, k=k, hw=hw, kernel=ks, stride=stride, groups=groups)
    rec.update(conv_passes(n, c, k, hw, ks, stride, groups, dtype))
    return rec


def write_grid(path, grid, measure_fn):
    """One JSON line per (shape, dtype) of `grid`, fp32 then bf16, to `path`;
    a shape that fails is recorded with its error and the grid goes on."""
    with open(path, "w") as out:
        for g in grid:
            for dt in (torch.float32, torch.bfloat16):
                try:
                    out.write(json.dumps(measure_fn(*g, dt)) + "\n")
                except Exception as e:  # noqa: BLE001 - record and go on
                    out.write(json.dumps(dict(shape=g, dtype=str(dt), error=repr(e)[:200])) + "\n")
                out.flush()


def main():
    grid = []
    for n, c, k, hw, ks, stride in itertools.product(
            [8, 32], [3, 16, 64, 256], [16, 64, 256, 512], [14, 56, 112], [1, 3, 7], [1, 2]):
        if c * hw * hw * n > 64 * 112 * 112 * 32 or (c == 3 and ks == 1):
            continue
        grid.append((n, c, k, hw, ks, stride, 1))
    for n, c, hw in itertools.product([8, 32], [32, 96, 384], [14, 56, 112]):
        grid.append((n, c, c, hw, 3, 1, c))  # depthwise
    write_grid(sys.argv[1], grid, measure)


if __name__ == "__main__":
    main()
