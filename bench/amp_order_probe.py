#!/usr/bin/env python3
"""The order of a tied head's weight-sized allocations and frees in one
backward (PyTorch's allocator trace), fp32 and under bf16 autocast: W [V, H]
read by an embedding and, transposed, by the head. Blocks of W's fp32 size
print as f32, of half of it as b16 (under autocast the bf16 logits [N, V]
have W's fp32 size too); t<k> names the k-th event's block.

Usage (GPU machine): python3 bench/amp_order_probe.py
"""
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from grad_accum_probe import H, N, V, recorded_events  # noqa: E402


def main():
    for amp in (False, True):
        w = torch.randn(V, H, device="cuda", requires_grad=True)
        ids = torch.randint(0, V, (N,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = F.linear(F.embedding(ids, w), w).float().logsumexp(-1).sum()
        names, seq = {}, []
        for e in recorded_events(loss.backward):
            if e["action"] not in ("alloc", "free_completed") or e["size"] not in (V * H * 4,
                                                                                   V * H * 2):
                continue
            if e["action"] == "alloc":
                names[e["addr"]] = "t%d" % len(seq)
            sign = "+" if e["action"] == "alloc" else "-"
            seq.append(sign + names.get(e["addr"], "?") + ("f32" if e["size"] == V * H * 4 else "b16"))
        print("amp" if amp else "fp32", " ".join(seq), "grad strides", w.grad.stride())


if __name__ == "__main__":
    main()
