#!/usr/bin/env python3
"""Per-rank peaks of data-parallel GPT-2 training, to compare with
`memplan plan --world-size N --strategy ddp|fsdp`.

  torchrun --nproc_per_node=N bench/dist_check.py STRATEGY PRECISION BATCH_PER_RANK

STRATEGY: ddp (DistributedDataParallel, default buckets) or fsdp (FSDP2
fully_shard on every transformer block, then the root). PRECISION: fp32 or
amp_bf16 (autocast, fp32 parameters). GPT-2 (GPT2LMHeadModel, default config,
SDPA attention) on [BATCH, 512] random tokens, cross entropy over every
position, AdamW (foreach), three steps; each step resets the peak counters
first. Prints one JSON line per rank with absolute bytes (nothing
subtracted): max_memory_allocated, max_memory_reserved, memory_allocated
after zero_grad, and the device memory in use (total - free). On one GPU
(N = 1) the same code paths run: DDP's reducer and buckets, FSDP2's
all-gather and reduce-scatter buffers (world size 1).
"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

SEQ = 512


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config()
    return GPT2LMHeadModel(cfg)


def main():
    strategy, precision, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    dist.init_process_group("nccl")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    torch.manual_seed(0)
    model = gpt2().cuda().train()
    loaded = torch.cuda.memory_allocated()
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model, device_ids=[local])
    elif strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard
        for block in model.transformer.h:
            fully_shard(block)
        fully_shard(model)
    else:
        raise SystemExit(f"unknown strategy {strategy!r} (ddp, fsdp)")
    torch.cuda.synchronize()
    wrapped = torch.cuda.memory_allocated()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    amp = precision == "amp_bf16"
    if precision not in ("fp32", "amp_bf16"):
        raise SystemExit(f"unknown precision {precision!r} (fp32, amp_bf16)")
    vocab = 50257
    x = torch.randint(0, vocab, (batch, SEQ), device="cuda")
    y = torch.randint(0, vocab, (batch * SEQ,), device="cuda")
    steps = []
    for _ in range(3):
        torch.cuda.reset_peak_memory_stats()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            logits = model(x).logits
            loss = F.cross_entropy(logits.reshape(-1, vocab), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del logits, loss
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        steps.append({"step_peak": torch.cuda.max_memory_allocated(),
                      "reserved_peak": torch.cuda.max_memory_reserved(),
                      "after": torch.cuda.memory_allocated(),
                      "device_used": total - free})
    print(json.dumps({"kind": "dist_check", "model": "gpt2", "strategy": strategy,
                      "precision": precision, "batch_per_rank": batch,
                      "world": dist.get_world_size(), "rank": dist.get_rank(),
                      "torch": torch.__version__, "loaded": loaded, "after_wrap": wrapped,
                      "steps": steps}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
