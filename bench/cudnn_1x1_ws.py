#!/usr/bin/env python3
"""The cuDNN workspaces of unstrided 1x1 convolutions (torch.backends.cudnn
.benchmark off, PyTorch's default): the forward, and the backward called as
autograd calls it (input and weight gradient in one convolution_backward),
over the channel pairs of ResNet, ResNeXt, MobileNet and EfficientNet
bottlenecks at their resolutions down to 5x5 and batches 8 to 128, fp32 and
bf16. One JSON line per (shape, dtype): the blocks each call allocates and
frees again (bench/cudnn_ws_grid.py's transient_blocks), with the candidates
x + y (an engine that copies the input and the output) and N*K*C*4 (split-K
over the images).

Usage (GPU machine): python3 bench/cudnn_1x1_ws.py OUT.jsonl
"""
import itertools
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cudnn_ws_grid import transient_blocks, write_grid  # noqa: E402

torch.backends.cudnn.benchmark = False

PAIRS = [  # (C, K)
    (64, 64), (64, 256), (256, 64), (256, 128), (128, 512), (512, 128), (512, 256),
    (256, 1024), (1024, 256), (1024, 512), (512, 2048), (2048, 512), (128, 128),
    (32, 192), (192, 32), (96, 576), (576, 96), (320, 1280), (160, 960), (960, 160),
    (40, 240), (24, 144), (1152, 320), (672, 192), (768, 768), (2048, 2048),
]
SIDES = [5, 7, 10, 14, 20, 28, 40, 56]
BATCHES = [8, 32, 128]


def measure(n, c, k, hw, dtype):
    x = torch.randn(n, c, hw, hw, device="cuda", dtype=dtype)
    w = torch.randn(k, c, 1, 1, device="cuda", dtype=dtype)
    y = torch.nn.functional.conv2d(x, w)
    gy = torch.randn_like(y)
    args = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    fwd = transient_blocks(lambda: torch.nn.functional.conv2d(x, w))
    bwd = transient_blocks(lambda: torch.ops.aten.convolution_backward(
        gy, x, w, None, *args, [True, True, False]))
    es = x.element_size()
    rec = dict(n=n, c=c, k=k, hw=hw, dtype=str(dtype).replace("torch.", ""),
               in_bytes=x.numel() * es, out_bytes=y.numel() * es, w_bytes=w.numel() * es,
               split_k=n * c * k * 4, copies=(x.numel() + y.numel()) * es, fwd=fwd, bwd=bwd)
    del x, w, y, gy
    torch.cuda.empty_cache()
    return rec


def main():
    grid = [(n, c, k, hw) for (c, k), hw, n in itertools.product(PAIRS, SIDES, BATCHES)
            if n * max(c, k) * hw * hw <= 128 * 256 * 56 * 56]
    write_grid(sys.argv[1], grid, measure)


if __name__ == "__main__":
    main()
