#!/usr/bin/env python3
"""The order of a tied head's weight-sized allocations and frees in one
backward (PyTorch's allocator trace), fp32 and under bf16 autocast: W [V, H]
read by an embedding and, transposed, by the head. Blocks of W's fp32 size
print as f32, of half of it as b16 (under autocast the bf16 logits [N, V]
have W's fp32 size too); t<k> names the k-th event's block.

Usage (GPU machine): python3 bench/amp_order_probe.py
"""
import torch, torch.nn.functional as F
V,H,N=4096,1024,2048
for amp in (False, True):
    w=torch.randn(V,H,device="cuda",requires_grad=True)
    ids=torch.randint(0,V,(N,),device="cuda")
    with torch.autocast("cuda",dtype=torch.bfloat16,enabled=amp):
        loss=F.linear(F.embedding(ids,w),w).float().logsumexp(-1).sum()
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=100000, context=None)
    loss.backward()
    torch.cuda.synchronize()
    snap=torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    names={}
    seq=[]
    for e in snap["device_traces"][0]:
        if e["action"] in ("alloc","free_completed") and e["size"] in (V*H*4, V*H*2):
            if e["action"]=="alloc":
                names[e["addr"]]="t%d"%len(seq)
            k=names.get(e["addr"],"?")
            seq.append(("+" if e["action"]=="alloc" else "-")+k+("f32" if e["size"]==V*H*4 else "b16"))
    print("amp" if amp else "fp32", " ".join(seq), "grad strides", w.grad.stride())
