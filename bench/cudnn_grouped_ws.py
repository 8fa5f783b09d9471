#!/usr/bin/env python3
"""Measures the cuDNN workspaces of grouped convolutions that are not
depthwise (ResNeXt's and RegNet's 3x3 ones, wav2vec2's positional Conv1d),
forward, input gradient and weight gradient, the way bench/cudnn_ws_grid.py
measures dense ones (benchmark off; the blocks a pass allocates and frees).
One JSON line per (shape, dtype); `dims` is 1 or 2.

Usage (GPU machine): python3 bench/cudnn_grouped_ws.py OUT.jsonl
"""
import itertools
import sys

import torch

from cudnn_ws_grid import transient_blocks, write_grid

torch.backends.cudnn.benchmark = False


def measure(n, c, k, hw, ks, stride, groups, dims, dtype):
    dev = "cuda"
    pad = ks // 2
    conv = torch.nn.functional.conv2d if dims == 2 else torch.nn.functional.conv1d
    spatial = (hw, hw) if dims == 2 else (hw,)
    x = torch.randn(n, c, *spatial, device=dev, dtype=dtype)
    w = torch.randn(k, c // groups, *([ks] * dims), device=dev, dtype=dtype)
    y = conv(x, w, None, stride, pad, 1, groups)
    gy = torch.randn_like(y)
    args = ([stride] * dims, [pad] * dims, [1] * dims, False, [0] * dims, groups)
    conv_bwd = torch.ops.aten.convolution_backward
    fwd = transient_blocks(lambda: conv(x, w, None, stride, pad, 1, groups))
    dgrad = transient_blocks(lambda: conv_bwd(gy, x, w, None, *args, [True, False, False]))
    wgrad = transient_blocks(lambda: conv_bwd(gy, x, w, None, *args, [False, True, False]))
    es = x.element_size()
    rec = dict(n=n, c=c, k=k, hw=hw, kernel=ks, stride=stride, groups=groups, dims=dims,
               dtype=str(dtype).replace("torch.", ""), in_bytes=x.numel() * es,
               out_bytes=y.numel() * es, w_bytes=w.numel() * es, fwd=fwd, dgrad=dgrad,
               wgrad=wgrad)
    del x, w, y, gy
    torch.cuda.empty_cache()
    return rec


def main():
    grid = []
    for n, c, hw, ks, stride, g in itertools.product(
            [8, 32], [64, 128, 256, 512], [14, 28, 56], [3, 1], [1, 2], [2, 4, 8, 16, 32]):
        if c // g < 2 or (ks == 1 and stride == 2):
            continue
        grid.append((n, c, c, hw, ks, stride, g, 2))
    for n, c, t, ks, g in itertools.product([16, 128], [256, 384, 768], [49, 199],
                                            [128, 32], [16]):
        grid.append((n, c, c, t, ks, 1, g, 1))
    write_grid(sys.argv[1], grid, measure)


if __name__ == "__main__":
    main()
