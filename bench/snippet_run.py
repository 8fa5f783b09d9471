#!/usr/bin/env python3
"""Runs the PyTorch snippet `memplan advise` printed, as printed, on a family
model (bench/families.py), and prints what the caching allocator saw.

  torchrun --nproc_per_node=N bench/snippet_run.py NAME SNIPPET.py STEPS

The snippet expects `model` (the module that was exported: the family
wrapper), `dataset` (pairs of input, target) and `loss_fn`; the dataset
holds BATCH_SIZE x STEPS x world samples, so its loop runs STEPS
iterations. Prints one JSON line per rank: the peaks of max_memory_allocated
and max_memory_reserved over the run, and the device memory in use.
"""
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402
import finetune  # noqa: E402,F401  (registers llama_1b)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, vocab, seq):
        self.n, self.vocab, self.seq = n, vocab, seq

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randint(0, self.vocab, (self.seq,), generator=g)
        return x, torch.randint(0, self.vocab, (self.seq,), generator=g)


def main():
    name, path, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    code = open(path).read()
    batch = int(re.search(r"^BATCH_SIZE = (\d+)", code, re.M).group(1))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    build, inputs, *_ = families.MODELS[name]
    torch.manual_seed(0)
    model = build()
    x = inputs(1, "cpu")[0]
    vocab = int(model.m.config.vocab_size)
    dataset = Tokens(batch * steps * world, vocab, x.shape[1])

    def loss_fn(out, y):
        return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))

    scope = dict(model=model, dataset=dataset, loss_fn=loss_fn)
    exec(compile(code, path, "exec"), scope)  # noqa: S102 - the advised code, as printed
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    print(json.dumps(dict(model=name, snippet=os.path.basename(path), batch=batch, world=world,
                          rank=int(os.environ.get("RANK", "0")), steps=steps,
                          allocated_peak=torch.cuda.max_memory_allocated(),
                          reserved_peak=torch.cuda.max_memory_reserved(),
                          device_used=total - free)), flush=True)
    if world > 1 or "init_process_group" in code:
        import torch.distributed as dist
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
