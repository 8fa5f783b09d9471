#!/usr/bin/env python3
"""The split-K partial sums cuDNN's heuristics (torch.backends.cudnn.benchmark
off) add to a 16-bit 3x3 convolution's weight-gradient workspace beyond the
input gradient's NHWC copies, measured as the workspace PyTorch takes from
the caching allocator (bench/cudnn_ws_grid.py's measure). The plan adds one
4 MiB median (kConvWeightGradExtraBytes); unet_ldm_b bf16 b24's trace shows
1.1 to 7.0 MiB conv by conv, and cudnn_ws_grid_h200.jsonl integer multiples
of the fp32 weight (K x Cin x 9 x 4 bytes) that depend on K, Cin and N x H x W
(none below about 8192 output positions). This grid crosses the U-Nets'
shapes (48x48 maps, 96-288 channels) in each factor.

Usage (GPU machine, about a minute):
  python3 bench/cudnn_splitk_probe.py bench/results/cudnn_splitk_h200.jsonl
One JSON line per shape, the fields of cudnn_ws_grid.py.
"""
import itertools
import json
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cudnn_ws_grid import measure  # noqa: E402


def main():
    out = open(sys.argv[1], "w")
    grid = []
    for n, c, k, hw in itertools.product([8, 24, 96], [96, 128, 192, 256, 288, 384],
                                         [96, 128, 192, 256, 384], [16, 32, 48]):
        if n * c * hw * hw > 96 * 384 * 32 * 32:
            continue
        grid.append((n, c, k, hw, 3, 1, 1))
    for g in grid:
        try:
            out.write(json.dumps(measure(*g, torch.bfloat16)) + "\n")
        except Exception as e:  # noqa: BLE001 - record and go on
            out.write(json.dumps(dict(shape=g, dtype="bfloat16", error=repr(e)[:200])) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
