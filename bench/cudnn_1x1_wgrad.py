#!/usr/bin/env python3
"""The cuDNN workspace of the weight gradient of unstrided 1x1 convolutions in
16 bits (torch.backends.cudnn.benchmark off, PyTorch's default), over the
channel pairs and resolutions of common CNNs and batches 8 to 128, called as
autograd calls it (input and weight gradient together). One JSON line per
(shape, dtype): the blocks allocated and freed inside the call, with the
candidates: N*K*C*4 (split-K over the images, float32 partial sums) and
x + dy (the engine that copies both).

Usage (GPU machine): python3 bench/cudnn_1x1_wgrad.py OUT.jsonl [wide|check]

`wide`: the inputs of more than 576 channels over larger images (16x16 to
64x64, batches 4 to 16, bf16), as segmentation heads run them (DeepLabV3's
ASPP: 2048 to 256 channels, then 1280 to 256, at 32x32), where the first grid
had only the classifier stages' 7x7 and 14x14.

`check`: a held-out set for the rules fitted on the grids (UnitConvWeightGradBytes,
planner/schedule.cc): channel pairs, resolutions and batches none of the grids
has (ResNeXt, RegNet and EfficientNet-like widths; 9x9 to 38x38; batches 16,
48 and 96), bf16 and fp32.
"""
import itertools
import json
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cudnn_ws_grid import transient_blocks  # noqa: E402  (sets cudnn.benchmark off)

PAIRS = [  # (C, K, H*W side)
    (64, 256, 56), (256, 64, 56), (128, 512, 28), (512, 128, 28), (256, 1024, 14),
    (1024, 256, 14), (512, 2048, 7), (2048, 512, 7), (256, 512, 28), (1024, 2048, 7),
    (320, 1280, 7), (160, 960, 7), (960, 160, 7), (96, 576, 14), (576, 96, 14),
    (32, 192, 28), (192, 32, 28), (24, 144, 56), (144, 24, 56), (16, 96, 112),
    (112, 672, 14), (672, 192, 7), (192, 1152, 7), (1152, 320, 7), (384, 1536, 14),
    (768, 768, 14), (2048, 2048, 7), (64, 64, 56), (128, 128, 28), (40, 240, 28),
]


def measure(n, c, k, hw, dtype, dims):
    shape = (n, c, hw, hw) if dims == 2 else (n, c, hw * hw)
    x = torch.randn(*shape, device="cuda", dtype=dtype)
    w = torch.randn(k, c, *([1] * dims), device="cuda", dtype=dtype)
    y = (torch.nn.functional.conv2d if dims == 2 else torch.nn.functional.conv1d)(x, w)
    gy = torch.randn_like(y)
    args = ([1] * dims, [0] * dims, [1] * dims, False, [0] * dims, 1)
    both = transient_blocks(lambda: torch.ops.aten.convolution_backward(
        gy, x, w, None, *args, [True, True, False]))
    es = x.element_size()
    rec = dict(n=n, c=c, k=k, hw=hw, dims=dims, dtype=str(dtype).replace("torch.", ""),
               in_bytes=x.numel() * es, out_bytes=y.numel() * es, w_bytes=w.numel() * es,
               split_k=n * c * k * 4, copies=(x.numel() + y.numel()) * es, bwd=both)
    del x, w, y, gy
    torch.cuda.empty_cache()
    return rec


WIDE_C = [640, 768, 960, 1024, 1280, 1536, 2048]
WIDE_K = [128, 256, 512]
# Held out: channel pairs, sides and batches none of the other grids has.
CHECK_PAIRS = [(96, 384), (384, 96), (176, 704), (704, 176), (448, 1792), (1792, 448),
               (112, 448), (368, 1472), (1536, 384), (640, 160), (72, 288), (1008, 252)]


def shapes(mode):
    """(n, c, k, hw, dtype, dims) of each measurement of a mode."""
    if mode == "wide":
        for c, k, hw, n in itertools.product(WIDE_C, WIDE_K, [16, 24, 32, 48, 64], [4, 8, 16]):
            yield n, c, k, hw, torch.bfloat16, 2
    elif mode == "check":
        for (c, k), hw, n, dt in itertools.product(CHECK_PAIRS, [9, 11, 12, 16, 19, 24, 38],
                                                   [16, 48, 96], [torch.bfloat16, torch.float32]):
            yield n, c, k, hw, dt, 2
    else:
        for (c, k, hw), n, dt, dims in itertools.product(
                PAIRS, [8, 32, 64, 128], [torch.bfloat16, torch.float16], [2, 1]):
            if not (dims == 1 and (dt == torch.float16 or n == 128)):
                yield n, c, k, hw, dt, dims


def main():
    mode = sys.argv[2] if len(sys.argv) == 3 else ""
    if len(sys.argv) not in (2, 3) or mode not in ("", "wide", "check"):
        print("usage: cudnn_1x1_wgrad.py OUT.jsonl [wide|check]", file=sys.stderr)
        sys.exit(2)
    with open(sys.argv[1], "w") as out:
        for n, c, k, hw, dt, dims in shapes(mode):
            try:
                out.write(json.dumps(measure(n, c, k, hw, dt, dims)) + "\n")
            except Exception as e:  # noqa: BLE001 - record and go on
                out.write(json.dumps(dict(shape=[n, c, k, hw, dims], dtype=str(dt),
                                          error=repr(e)[:200])) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
