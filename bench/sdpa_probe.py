#!/usr/bin/env python3
"""Which scaled_dot_product_attention kernel PyTorch picks, and what it keeps
and allocates, over dtype, GQA, mask kind and layout, dropout and head dim.

  python3 bench/sdpa_probe.py > $OUT/sdpa_probe2.jsonl

One JSON line per configuration: the backends that accept it (each tried
alone under sdpa_kernel), the one PyTorch chooses (torch._fused_sdp_choice),
and, with the chosen kernel, the forward peak, what stays allocated after the
forward, and the forward+backward peak (bytes above the inputs).

Masks: bool (no grad), float (no grad), float_grad ([1, H, S, S], requires
grad, contiguous), float_grad_perm (the same values with the head dim
innermost, as T5's position bias `values.permute(2, 0, 1).unsqueeze(0)`:
last-dim stride H), float_grad_full ([B, H, S, S]).
"""
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

B, S = 2, 512
BACKENDS = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
            SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH)


def make_mask(kind, h, dt):
    if kind in (None, "causal"):
        return None
    if kind == "bool":
        return torch.ones(S, S, device="cuda", dtype=torch.bool).tril()
    if kind == "float":
        return torch.randn(1, h, S, S, device="cuda", dtype=dt)
    if kind == "float_grad":
        return torch.randn(1, h, S, S, device="cuda", dtype=dt, requires_grad=True)
    if kind == "float_grad_perm":
        w = torch.randn(S, S, h, device="cuda", dtype=dt, requires_grad=True)
        return w.permute(2, 0, 1).unsqueeze(0)
    if kind == "float_grad_full":
        return torch.randn(B, h, S, S, device="cuda", dtype=dt, requires_grad=True)
    raise ValueError(kind)


def run(dt, h, kvh, d, mask, p):
    torch.cuda.empty_cache()
    q = torch.randn(B, h, S, d, device="cuda", dtype=dt, requires_grad=True)
    k = torch.randn(B, kvh, S, d, device="cuda", dtype=dt, requires_grad=True)
    v = torch.randn(B, kvh, S, d, device="cuda", dtype=dt, requires_grad=True)
    am = make_mask(mask, h, dt)
    kw = dict(attn_mask=am, dropout_p=p, is_causal=mask == "causal", enable_gqa=kvh != h)
    ok = {}
    for be in BACKENDS:
        try:
            with sdpa_kernel([be]):
                o = F.scaled_dot_product_attention(q, k, v, **kw)
                o.sum().backward()
            ok[be.name] = True
            del o
        except Exception:  # noqa: BLE001 - a backend that refuses raises
            ok[be.name] = False
        q.grad = k.grad = v.grad = None
    choice = torch._fused_sdp_choice(q, k, v, am, p, mask == "causal", scale=None, enable_gqa=kvh != h)
    names = {int(b.value) if hasattr(b, "value") else int(b): b.name for b in BACKENDS}
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    o = F.scaled_dot_product_attention(q, k, v, **kw)
    fwd = torch.cuda.max_memory_allocated() - base
    kept = torch.cuda.memory_allocated() - base
    o.sum().backward()
    peak = torch.cuda.max_memory_allocated() - base
    rec = dict(dtype=str(dt).replace("torch.", ""), batch=B, seq=S, heads=h, kv_heads=kvh,
               head_dim=d, mask=mask, dropout=p, eligible=ok,
               chosen=names.get(int(choice), str(int(choice))), fwd_peak=fwd, kept_after_fwd=kept,
               fwd_bwd_peak=peak)
    print(json.dumps(rec), flush=True)


def main():
    print(json.dumps(dict(torch=torch.__version__, cudnn=torch.backends.cudnn.version(),
                          device=torch.cuda.get_device_name())), flush=True)
    for dt in (torch.float32, torch.bfloat16):
        for h, kvh in ((8, 8), (8, 2)):
            for d in (64, 128):
                for mask in (None, "causal", "bool", "float", "float_grad", "float_grad_perm",
                             "float_grad_full"):
                    for p in (0.0, 0.1):
                        run(dt, h, kvh, d, mask, p)


if __name__ == "__main__":
    main()
