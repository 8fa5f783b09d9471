#!/usr/bin/env python3
"""16-bit weight-gradient workspaces between 9 k and 63 k output positions,
where the earlier grids have none: resnet's strided downsamples and 3x3
convolutions at batches 48-80, and unet_ldm_b's 192-channel convolution
(bench/cudnn_ws_grid.py's measure, cudnn.benchmark off).

Usage (GPU machine): python3 bench/cudnn_ws_extra.py OUT.jsonl
"""
import json
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cudnn_ws_grid import measure  # noqa: E402


def main():
    out = open(sys.argv[1], "w")
    shapes = [(n, c, k, hw, ks, st)
              for (c, k, hw, ks, st) in [(64, 128, 56, 1, 2), (128, 256, 28, 1, 2),
                                         (128, 256, 28, 3, 2), (256, 256, 14, 3, 1)]
              for n in (48, 64, 80)]
    shapes += [(16, 192, 192, 24, 3, 1), (20, 192, 192, 24, 3, 1)]
    for g in shapes:
        out.write(json.dumps(measure(*g, 1, torch.bfloat16)) + "\n")


if __name__ == "__main__":
    main()
