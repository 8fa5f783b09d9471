# Launch: torchrun --nproc_per_node=8 train.py   (one process per GPU)
import contextlib
import os
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

# memplan advise: amp_bf16, batch 24, fsdp on 8 GPUs
BATCH_SIZE = 24  # per GPU
ACCUM_STEPS = 1

dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
model = model.cuda().train()
# fully_shard per unit, then the root (the units as the export names them).
FSDP_UNITS = [
    "m.model.layers.0",
    "m.model.layers.1",
    "m.model.layers.2",
    "m.model.layers.3",
    "m.model.layers.4",
    "m.model.layers.5",
    "m.model.layers.6",
    "m.model.layers.7",
    "m.model.layers.8",
    "m.model.layers.9",
    "m.model.layers.10",
    "m.model.layers.11",
    "m.model.layers.12",
    "m.model.layers.13",
    "m.model.layers.14",
    "m.model.layers.15",
    "m.model.layers.16",
    "m.model.layers.17",
    "m.model.layers.18",
    "m.model.layers.19",
]
for name in FSDP_UNITS:
    fully_shard(model.get_submodule(name), reshard_after_forward=True)
fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
sampler = torch.utils.data.distributed.DistributedSampler(dataset, shuffle=True)
loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler, drop_last=True)

for i, (x, y) in enumerate(loader):
    x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y) / ACCUM_STEPS
    loss.backward()
    if (i + 1) % ACCUM_STEPS == 0:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
