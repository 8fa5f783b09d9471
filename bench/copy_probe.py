#!/usr/bin/env python3
"""Which ATen call makes each block of two small cases the plan does not
account for, by the allocator's C++ stacks (memory history, stacks="all"):

  linear_t   an nn.Linear with bias under autocast bf16 on a bf16 input that
             is a transposed view ([B, T, H] of a [T, B, H] tensor, as a
             batch-first nn.LSTM returns it), forward and backward;
  sdpa_bias  scaled_dot_product_attention under autocast bf16 on q, k, v
             made by view + transpose (T5's layout) with a float mask that
             requires grad (T5's position bias: the math kernel), forward
             and backward.

Prints, per case, each allocation and free of 256 KiB or more in order with
the innermost at:: / c10:: frames that name the op.

Usage (GPU machine): python3 bench/copy_probe.py [CASE ...]
"""
import sys

import torch
import torch.nn.functional as F

MIB = 2**20


def frames_of(entry):
    names = []
    for f in entry.get("frames", []):
        name = f.get("name", "")
        if any(k in name for k in ("at::native", "at::_ops", "at::cuda", "at::autocast",
                                   "torch::autograd", "at::meta", "at::functionalization")):
            names.append(name.split("(")[0][-70:])
        if len(names) >= 4:
            break
    if not names:  # no ATen frame resolved: the innermost frames as they are
        names = [f.get("name", "")[-70:] for f in entry.get("frames", [])[:4]]
    return names


def run(label, fn):
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=100000, stacks="all")
    fn()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    print(f"== {label}")
    for e in snap["device_traces"][0]:
        if e["action"] not in ("alloc", "free_completed") or e["size"] < MIB // 4:
            continue
        print(f"  {e['action']:15s} {e['size'] / MIB:8.2f} MiB  {frames_of(e)}")


def linear_t():
    t, b, h, v = 192, 48, 896, 24000
    lin = torch.nn.Linear(h, v).cuda()
    x = torch.randn(t, b, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = lin(x.transpose(0, 1))
        y.float().sum().backward()

    run("linear on a transposed bf16 input, autocast bf16", step)


def sdpa_bias():
    bsz, s, heads, d = 4, 512, 8, 64
    q0, k0, v0 = (torch.randn(bsz, s, heads * d, device="cuda") for _ in range(3))
    # a permuted view, as T5's position bias reaches attention ([1, H, S, S]
    # from a [S, S, H] lookup): its last dim is not unit-stride
    table = torch.randn(s, s, heads, device="cuda", requires_grad=True)
    wq = torch.nn.Linear(heads * d, heads * d).cuda()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            q = wq(q0).view(bsz, -1, heads, d).transpose(1, 2)
            k = wq(k0).view(bsz, -1, heads, d).transpose(1, 2)
            val = wq(v0).view(bsz, -1, heads, d).transpose(1, 2)
            bias = table.permute(2, 0, 1).unsqueeze(0)
            out = F.scaled_dot_product_attention(q, k, val, attn_mask=bias, scale=1.0)
        out.float().sum().backward()

    run("sdpa with a float mask requiring grad, autocast bf16", step)


CASES = {"linear_t": linear_t, "sdpa_bias": sdpa_bias}

if __name__ == "__main__":
    for name in sys.argv[1:] or list(CASES):
        CASES[name]()
