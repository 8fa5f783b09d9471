#!/usr/bin/env python3
"""The cuDNN workspaces of 3-D convolutions (torch.backends.cudnn.benchmark
off, PyTorch's default), as video networks have them: stems over RGB clips
(3 channels; kernels 3x7x7 with stride 1x2x2 and 3x3x3) and 3x3x3 body
convolutions, over clip lengths, resolutions and batches, fp32 and bf16.
One JSON line per (shape, dtype): the blocks that the forward and the
backward (called as autograd calls it: convolution_backward with the input
gradient where the input needs one, the stem's not) allocate and free again
(bench/cudnn_ws_grid.py's transient_blocks), with the tensor sizes (the
input padded to 8 channels in 16 bits as in_padded_bytes).

Usage (GPU machine): python3 bench/cudnn_3d_ws.py OUT.jsonl [check]

`check`: held-out body convolutions for the 16-bit weight-gradient rule
(Conv3dHalfWeightGradPartialBytes, planner/schedule.cc): channel counts,
clip lengths, resolutions and batches the grid does not have (32 to 192
channels, 3 to 12 frames of 10 to 48 pixels, batches 3 to 32), with as many
filters as channels and, for what the rule leaves to the constant, channel
pairs that differ and stride 2 (R(2+1)D- and downsampling-like).
"""
import itertools
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cudnn_ws_grid import transient_blocks, write_grid  # noqa: E402

torch.backends.cudnn.benchmark = False


def measure(n, c, k, t, hw, kernel, stride, dtype):
    pad = tuple(s // 2 for s in kernel)
    x = torch.randn(n, c, t, hw, hw, device="cuda", dtype=dtype)
    w = torch.randn(k, c, *kernel, device="cuda", dtype=dtype)
    y = torch.nn.functional.conv3d(x, w, stride=stride, padding=pad)
    gy = torch.randn_like(y)
    stem = c < 8
    args = (list(stride), list(pad), [1, 1, 1], False, [0, 0, 0], 1)
    fwd = transient_blocks(lambda: torch.nn.functional.conv3d(x, w, stride=stride, padding=pad))
    bwd = transient_blocks(lambda: torch.ops.aten.convolution_backward(
        gy, x, w, None, *args, [not stem, True, False]))
    es = x.element_size()
    padded = x.numel() // c * ((c + 7) // 8 * 8) * es if es == 2 else x.numel() * es
    rec = dict(n=n, c=c, k=k, t=t, hw=hw, kernel=list(kernel), stride=list(stride),
               dtype=str(dtype).replace("torch.", ""), in_bytes=x.numel() * es,
               in_padded_bytes=padded, out_bytes=y.numel() * es, w_bytes=w.numel() * es,
               input_grad=not stem, fwd=fwd, bwd=bwd)
    del x, w, y, gy
    torch.cuda.empty_cache()
    return rec


def check_grid():
    grid = []
    for n, c, t, hw in itertools.product([3, 12, 32], [32, 48, 96, 160, 192], [3, 6, 12],
                                         [10, 20, 48]):
        grid.append((n, c, c, t, hw, (3, 3, 3), (1, 1, 1)))
    for n, (c, k), (t, hw), stride in itertools.product(
            [4, 16], [(64, 128), (128, 64), (96, 192)], [(4, 28), (8, 40)], [1, 2]):
        grid.append((n, c, k, t, hw, (3, 3, 3), (stride,) * 3))
    return grid


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["check"]):
        print("usage: cudnn_3d_ws.py OUT.jsonl [check]", file=sys.stderr)
        sys.exit(2)
    if sys.argv[2:] == ["check"]:
        write_grid(sys.argv[1], check_grid(), measure)
        return
    grid = []
    for n, k, t, hw, (kernel, stride) in itertools.product(
            [2, 8, 24], [32, 64], [8, 16], [56, 112, 160],
            [((3, 7, 7), (1, 2, 2)), ((3, 3, 3), (1, 1, 1)), ((1, 7, 7), (1, 2, 2))]):
        grid.append((n, 3, k, t, hw, kernel, stride))
    for n, c, t, hw in itertools.product([2, 8, 24], [64, 128, 256, 512], [2, 4, 8, 16],
                                         [7, 14, 28, 56]):
        if n * c * t * hw * hw <= 24 * 64 * 16 * 56 * 56:
            grid.append((n, c, c, t, hw, (3, 3, 3), (1, 1, 1)))
    write_grid(sys.argv[1], grid, measure)


if __name__ == "__main__":
    main()
