#!/usr/bin/env python3
"""When autograd adds two gradients of one tensor in place and when it makes a
third (torch/csrc/autograd/input_buffer.cpp, accumulate): a weight W [V, H]
(or an activation) used twice, one backward, and the allocations of W's size
that backward makes (PyTorch's allocator trace). In place: one per
contribution; out of place: one more, the sum.

Cases: W by two embeddings; W by two linears (its gradient arrives as the
transpose of a product); W by an embedding and a tied linear (a language
model's tied head), fp32 and under bf16 autocast (where the bf16 logits
[N, V] have W's fp32 size too, so they count: bench/amp_order_probe.py gives
the order); W's first gradient through a reshape; the tied pair with the
embedding's gradient first; an activation read by two linears.

Usage (GPU machine): python3 bench/grad_accum_probe.py > OUT.jsonl
"""
import json

import torch
import torch.nn.functional as F

V, H, N = 4096, 1024, 2048


def recorded_events(fn):
    """The caching allocator's events while fn runs (no stack frames)."""
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=100000, context=None)
    fn()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    return snap["device_traces"][0]


def allocs_of(nbytes, fn):
    return sum(1 for e in recorded_events(fn) if e["action"] == "alloc" and e["size"] == nbytes)


def case(name, loss_fn, amp=False):
    w = torch.randn(V, H, device="cuda", requires_grad=True)
    ids = torch.randint(0, V, (N,), device="cuda")
    ids2 = torch.randint(0, V, (N,), device="cuda")
    x = torch.randn(N, H, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
        loss = loss_fn(w, ids, ids2, x)
    n = allocs_of(w.numel() * 4, loss.backward)
    print(json.dumps({"case": name, "amp": amp, "allocs_of_w_size": n,
                      "grad_contiguous": w.grad.is_contiguous()}), flush=True)


def main():
    case("embedding+embedding", lambda w, i, j, x: (F.embedding(i, w) + F.embedding(j, w)).sum())
    case("linear+linear", lambda w, i, j, x: (F.linear(x, w).sum() + F.linear(x * 2, w).sum()))
    case("tied head: embedding then linear",
         lambda w, i, j, x: F.linear(F.embedding(i, w), w).float().logsumexp(-1).sum())
    case("tied head: embedding then linear",
         lambda w, i, j, x: F.linear(F.embedding(i, w), w).float().logsumexp(-1).sum(), amp=True)
    # Autograd runs the later-made node first. W's first gradient through a
    # reshape (ViewBackward: a view of the product's gradient), the second
    # from an embedding made before it.
    case("embedding, then a product with w.reshape",
         lambda w, i, j, x: F.embedding(i, w).sum()
         + (torch.ones(N, V, device="cuda") @ w.reshape(V, H)).sum())
    # The tied pair the other way round: the embedding's gradient (a new
    # tensor) arrives first.
    case("linear, then embedding",
         lambda w, i, j, x: F.linear(x, w).sum() + F.embedding(i, w).sum())
    # An activation read twice: its two gradients [N, V] meet in the producer's buffer.
    w2 = torch.randn(V, H, device="cuda", requires_grad=True)
    x = torch.randn(N, H, device="cuda", requires_grad=True)
    w3 = torch.randn(H, V, device="cuda", requires_grad=True)
    w4 = torch.randn(H, V, device="cuda", requires_grad=True)
    a = F.linear(x, w2)
    loss = (F.linear(a, w3).sum() + F.linear(a, w4).sum())
    n = allocs_of(a.numel() * 4, loss.backward)
    print(json.dumps({"case": "activation read by two linears", "amp": False,
                      "allocs_of_activation_size": n}), flush=True)


if __name__ == "__main__":
    main()
