#!/usr/bin/env python3
"""The cuDNN workspaces of 3x3 convolutions with the channel counts of U-Net
decoders (inputs that are concatenations: 96 to 1280 channels into 64 to 640),
at 8 to 64 pixels square, batches 8 to 96, fp32 and bf16, benchmark off
(PyTorch's default). One JSON line per (shape, dtype), as
bench/cudnn_ws_grid.py writes them (forward, input gradient and weight
gradient blocks).

Usage (GPU machine): python3 bench/cudnn_unet_ws.py OUT.jsonl
"""
import itertools
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cudnn_ws_grid import measure, write_grid  # noqa: E402


def main():
    grid = []
    for n, (c, k), hw in itertools.product(
            [8, 32, 96], [(96, 64), (192, 64), (128, 128), (256, 128), (384, 128), (384, 256),
                          (512, 256), (640, 256), (768, 256), (640, 320), (960, 320),
                          (1280, 640)], [8, 16, 32, 64]):
        if n * c * hw * hw <= 96 * 384 * 64 * 64:
            grid.append((n, c, k, hw, 3, 1, 1))
    write_grid(sys.argv[1], grid, measure)


if __name__ == "__main__":
    main()
