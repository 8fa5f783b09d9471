#!/usr/bin/env python3
"""The cuDNN workspaces of patch-embedding convolutions (kernel = stride, no
padding, over an RGB image: the stems of ViT, CLIP, MLP-Mixer and Swin) with
torch.backends.cudnn.benchmark off, PyTorch's default. The image needs no
gradient, so the backward is the weight gradient alone, as autograd calls it
(convolution_backward with output_mask [False, True, False]). One JSON line
per (shape, dtype): the blocks the forward and the weight gradient allocate
and free again (bench/cudnn_ws_grid.py's transient_blocks), with the tensor
sizes.

Usage (GPU machine): python3 bench/cudnn_patch_ws.py OUT.jsonl
"""
import itertools
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cudnn_ws_grid import transient_blocks, write_grid  # noqa: E402

torch.backends.cudnn.benchmark = False


def measure(n, k, patch, image, dtype):
    x = torch.randn(n, 3, image, image, device="cuda", dtype=dtype)
    w = torch.randn(k, 3, patch, patch, device="cuda", dtype=dtype)
    y = torch.nn.functional.conv2d(x, w, None, patch)
    gy = torch.randn_like(y)
    args = ([patch, patch], [0, 0], [1, 1], False, [0, 0], 1)
    fwd = transient_blocks(lambda: torch.nn.functional.conv2d(x, w, None, patch))
    wgrad = transient_blocks(lambda: torch.ops.aten.convolution_backward(
        gy, x, w, None, *args, [False, True, False]))
    es = x.element_size()
    rec = dict(n=n, c=3, k=k, hw=image, kernel=patch, stride=patch,
               dtype=str(dtype).replace("torch.", ""), in_bytes=x.numel() * es,
               out_bytes=y.numel() * es, w_bytes=w.numel() * es, fwd=fwd, wgrad=wgrad)
    del x, w, y, gy
    torch.cuda.empty_cache()
    return rec


def main():
    grid = []
    for n, k, (patch, image) in itertools.product(
            [1, 8, 16, 32, 48, 64, 96, 128, 192, 256], [96, 192, 384, 512, 768],
            [(16, 224), (14, 224), (32, 224), (4, 224), (8, 128), (16, 384)]):
        grid.append((n, k, patch, image))
    write_grid(sys.argv[1], grid, measure)


if __name__ == "__main__":
    main()
