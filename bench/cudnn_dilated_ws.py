#!/usr/bin/env python3
"""cuDNN workspaces of dilated 3x3 convolutions (DeepLab's atrous backbone and
ASPP branches), per pass, as bench/cudnn_ws_grid.py measures them: the
blocks each pass allocates and frees again, torch.backends.cudnn.benchmark
off. One JSON line per (shape, dtype), with the dilation.

Usage (GPU machine): python3 bench/cudnn_dilated_ws.py OUT.jsonl
"""
import itertools
import sys

import torch

from cudnn_ws_grid import transient_blocks, write_grid

torch.backends.cudnn.benchmark = False


def measure(n, c, k, hw, dilation, dtype):
    dev = "cuda"
    x = torch.randn(n, c, hw, hw, device=dev, dtype=dtype)
    w = torch.randn(k, c, 3, 3, device=dev, dtype=dtype)
    pad = dilation
    args = ([1, 1], [pad, pad], [dilation, dilation], False, [0, 0], 1)
    y = torch.nn.functional.conv2d(x, w, None, 1, pad, dilation)
    gy = torch.randn_like(y)
    conv_bwd = torch.ops.aten.convolution_backward
    fwd = transient_blocks(lambda: torch.nn.functional.conv2d(x, w, None, 1, pad, dilation))
    dgrad = transient_blocks(lambda: conv_bwd(gy, x, w, None, *args, [True, False, False]))
    wgrad = transient_blocks(lambda: conv_bwd(gy, x, w, None, *args, [False, True, False]))
    es = x.element_size()
    rec = dict(n=n, c=c, k=k, hw=hw, kernel=3, stride=1, groups=1, dilation=dilation,
               dtype=str(dtype).replace("torch.", ""), in_bytes=x.numel() * es,
               out_bytes=y.numel() * es, w_bytes=w.numel() * es,
               fwd=fwd, dgrad=dgrad, wgrad=wgrad)
    del x, w, y, gy
    torch.cuda.empty_cache()
    return rec


def main():
    grid = [(n, c, k, hw, d) for n, (c, k), hw, d in itertools.product(
        [2, 6, 16], [(256, 256), (512, 512), (1024, 256), (2048, 256)], [16, 32, 48],
        [1, 2, 4, 12, 24, 36])]
    write_grid(sys.argv[1], grid, measure)


if __name__ == "__main__":
    main()
