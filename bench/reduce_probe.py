#!/usr/bin/env python3
"""The staging buffer of PyTorch's CUDA column reduction, measured: for each
[rows, cols] shape and dtype, `t.sum(0)` on a contiguous tensor with the
caching allocator's history recorded; prints one JSON line per shape with
every allocation the call made (the output, then the staging buffer and the
semaphores when the kernel splits the rows across blocks). Checked against
planner/reduce_kernel.h by planner/reduce_kernel_test.cc.

  python3 bench/reduce_probe.py > bench/results/reduce_probe_h200.jsonl
"""
import json

import torch

SHAPES = [(64, 1000), (512, 768), (1000, 768), (1024, 768), (1576, 768), (1576, 3072),
          (2048, 2304), (4096, 12000), (1024, 20000), (8192, 768), (8192, 3072), (16384, 512),
          (16384, 1024), (3000, 50257), (4096, 1001), (4096, 1002), (777, 4096), (20000, 64),
          (100000, 16), (256, 100000), (8192, 1000000 // 8), (32768, 256), (2560, 6000),
          (4096, 151936 // 8)]

torch.cuda.init()
print(json.dumps(dict(torch=torch.__version__, device=torch.cuda.get_device_name(),
                      sms=torch.cuda.get_device_properties(0).multi_processor_count)))
for dtype in (torch.float32, torch.bfloat16):
    for rows, cols in SHAPES:
        t = torch.randn(rows, cols, device="cuda", dtype=dtype)
        torch.cuda.synchronize()
        torch.cuda.memory._record_memory_history(max_entries=100000)
        out = t.sum(0)
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        allocs = [e["size"] for e in snap["device_traces"][0] if e["action"] == "alloc"]
        print(json.dumps(dict(rows=rows, cols=cols, dtype=str(dtype).split(".")[-1],
                              allocs=allocs, out_bytes=out.numel() * out.element_size())),
              flush=True)
        del t, out
