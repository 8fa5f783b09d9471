#!/usr/bin/env python3
"""Measures the cuDNN workspaces PyTorch takes for convolutions whose input is
channels-last strided (a permuted [N, H, W, C] tensor, as ConvNeXt's and
SegFormer's convolutions see it; the weight a contiguous parameter): forward,
input gradient, weight gradient, and the backward of both gradients in one
call (as autograd runs it), benchmark off. Depthwise (groups = C) and dense
shapes. One JSON line per (shape, dtype), like bench/cudnn_ws_grid.py.

Usage (GPU machine): python3 bench/cudnn_channels_last_ws.py OUT.jsonl
"""
import itertools
import sys

import torch

from cudnn_ws_grid import transient_blocks, write_grid

torch.backends.cudnn.benchmark = False


def measure(n, c, k, hw, ks, stride, groups, dtype):
    dev = "cuda"
    pad = ks // 2 if stride == 1 else 0
    x = torch.randn(n, hw, hw, c, device=dev, dtype=dtype).permute(0, 3, 1, 2)
    w = torch.randn(k, c // groups, ks, ks, device=dev, dtype=dtype)
    conv = torch.nn.functional.conv2d
    y = conv(x, w, None, stride, pad, 1, groups)
    gy = torch.randn(y.shape, device=dev, dtype=dtype).to(memory_format=torch.channels_last)
    args = ([stride, stride], [pad, pad], [1, 1], False, [0, 0], groups)
    conv_bwd = torch.ops.aten.convolution_backward
    fwd = transient_blocks(lambda: conv(x, w, None, stride, pad, 1, groups))
    dgrad = transient_blocks(lambda: conv_bwd(gy, x, w, None, *args, [True, False, False]))
    wgrad = transient_blocks(lambda: conv_bwd(gy, x, w, None, *args, [False, True, False]))
    both = transient_blocks(lambda: conv_bwd(gy, x, w, None, *args, [True, True, False]))
    es = x.element_size()
    rec = dict(n=n, c=c, k=k, hw=hw, kernel=ks, stride=stride, groups=groups,
               dtype=str(dtype).replace("torch.", ""), in_bytes=x.numel() * es,
               out_bytes=y.numel() * es, w_bytes=w.numel() * es,
               out_channels_last=y.is_contiguous(memory_format=torch.channels_last),
               fwd=fwd, dgrad=dgrad, wgrad=wgrad, both=both)
    del x, w, y, gy
    torch.cuda.empty_cache()
    return rec


def main():
    grid = []
    for n, c, hw, ks in itertools.product([8, 32], [32, 48, 64, 96, 128, 192, 256, 384, 512],
                                          [7, 12, 14, 24, 28, 48, 56], [3, 7]):
        if n * c * hw * hw > 32 * 96 * 56 * 56:
            continue
        grid.append((n, c, c, hw, ks, 1, c))  # depthwise
    for n, c, k, hw, ks, stride in itertools.product([8, 32], [64, 256, 768], [64, 192, 512],
                                                     [14, 28, 64], [1, 3, 2], [1]):
        s = 2 if ks == 2 else stride
        grid.append((n, c, k, hw, ks, s, 1))  # dense (ks 2: ConvNeXt's downsampling)
    write_grid(sys.argv[1], grid, measure)


if __name__ == "__main__":
    main()
