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

from cudnn_ws_grid import conv_passes, write_grid

torch.backends.cudnn.benchmark = False


def measure(n, c, k, hw, dilation, dtype):
    rec = dict(n=n, c=c, k=k, hw=hw, kernel=3, stride=1, groups=1, dilation=dilation)
    rec.update(conv_passes(n, c, k, hw, 3, 1, 1, dtype, dilation))
    return rec


def main():
    grid = [(n, c, k, hw, d) for n, (c, k), hw, d in itertools.product(
        [2, 6, 16], [(256, 256), (512, 512), (1024, 256), (2048, 256)], [16, 32, 48],
        [1, 2, 4, 12, 24, 36])]
    write_grid(sys.argv[1], grid, measure)


if __name__ == "__main__":
    main()
