#!/usr/bin/env python3
"""How autograd adds a tensor's second gradient when the first is an Add's
pass-through (a residual connection), on the GPU machine. An activation
x [N, H] (x0 * 1.5, so its gradients meet in MulBackward's input buffer) is
read by a residual add and a branch, whose result is multiplied by a random
tensor before the sum (so that the add's incoming gradient is a dense
tensor, as in a network, not the expanded gradient of a sum); the
allocations of x's size that one backward makes (bench/grad_accum_probe.py's
recorded_events) are counted against `in_place`, the count when the two
gradients are added in place (one more: the sum is a new tensor). One JSON
line per case.

Usage (GPU machine): python3 bench/residual_accum_probe.py > OUT.jsonl
"""
import json

import torch
import torch.nn.functional as F

from grad_accum_probe import allocs_of

N, H = 4096, 512


def case(name, fn, in_place, dtype=torch.float32, amp=False):
    torch.manual_seed(0)
    w = torch.randn(H, H, device="cuda", dtype=dtype, requires_grad=True)
    x0 = torch.randn(N, H, device="cuda", dtype=dtype, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
        x = x0 * 1.5
        r = torch.rand(N, H, device="cuda", dtype=dtype)
        loss = (fn(x, w) * r).float().sum()
    n = allocs_of(x0.numel() * x0.element_size(), loss.backward)
    print(json.dumps({"case": name, "dtype": str(dtype).replace("torch.", ""), "amp": amp,
                      "allocs_of_x_size": n, "in_place": in_place}), flush=True)


def main():
    # The residual's pass-through arrives first (the add runs last in forward).
    # In place: r's product, the branch's input gradient, x0's.
    case("x + linear(x)", lambda x, w: x + F.linear(x, w), 3)
    case("x + layer_norm(x)", lambda x, w: x + F.layer_norm(x, (H,)), 3)
    case("x + linear(layer_norm(x))", lambda x, w: x + F.linear(F.layer_norm(x, (H,)), w), 4)
    case("x + linear(x), bf16", lambda x, w: x + F.linear(x, w), 3, torch.bfloat16)
    # Under autocast the branch's fp32 gradient is the cast back of the linear's bf16 one.
    case("x + linear(layer_norm(x)), amp", lambda x, w: x + F.linear(F.layer_norm(x, (H,)), w),
         4, amp=True)
    # Two products, no pass-through: the two input gradients, then x0's.
    case("linear(x) + linear(x) with w.t()",
         lambda x, w: F.linear(x, w) + F.linear(x, w.t()), 4)


if __name__ == "__main__":
    main()
