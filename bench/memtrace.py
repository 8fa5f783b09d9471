#!/usr/bin/env python3
"""Records the caching allocator's event trace (allocations, frees, segment
creations, with the Python frames that made them) for one calibration-style
run, so a memplan plan can be compared with PyTorch event by event.

The run follows the calibration protocol (warm libraries, settle, a fresh
model, train: 3 steps of forward + cross entropy + backward + optimizer +
zero_grad; infer: eval, two forwards under inference_mode).

Usage (on the GPU machine):
  python3 bench/memtrace.py OUT.json MODEL MODE BATCH [PRECISION] [OPTIMIZER] [CHECKPOINT]
MODEL is a torchvision name, bert_base or gpt2 (transformers, SDPA, built as
the calibration models were); MODE is train or infer; PRECISION for infer may be
fp16 (model.half()), for train fp32, amp_bf16 or bf16 (MEMTRACE_ATTN=eager: the
transformers models with eager attention) (the model cast to bf16 on
the GPU, the cache emptied, as the calibration protocol does); CHECKPOINT a JSON list of
module names run under torch.utils.checkpoint (as bench/ckpt_validate.py does).
MEMTRACE_FRAMES=0 records no Python frames.
"""
import copy
import gc
import json
import os
import sys

import torch
import torch.nn.functional as F
import torchvision

torch.backends.cudnn.benchmark = False
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # ckpt_validate


def settle():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def warm_libraries():
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        a = torch.randn(256, 256, device="cuda", dtype=dt)
        (a @ a).sum().item()
    c = torch.nn.Conv2d(3, 8, 3).cuda()
    c(torch.randn(2, 3, 32, 32, device="cuda")).sum().backward()
    del a, c
    settle()


def frame_summary(frames):
    """The innermost frames that name a module or a torch function."""
    keep = []
    for f in frames:
        fn = f.get("filename", "")
        if "memtrace.py" in fn and f.get("name") != "main":
            continue
        if any(s in fn for s in ("torch/nn", "torchvision", "torch/optim", "torch/autograd",
                                  "torch/_tensor", "torch/functional", "memtrace")):
            short = fn.split("/")[-1]
            keep.append(f"{short}:{f.get('line')}:{f.get('name')}")
        if len(keep) >= 4:
            break
    return "|".join(keep)


def build(name):
    """The CPU model and its input's (shape, vocab); vocab 0 for images."""
    if name in ("bert_base", "gpt2"):
        import transformers as T
        if name == "bert_base":
            cfg, cls, shape = T.BertConfig(num_labels=2), T.BertForSequenceClassification, (128,)
        else:
            cfg, cls, shape = T.GPT2Config(use_cache=False), T.GPT2LMHeadModel, (512,)
        cfg._attn_implementation = os.environ.get("MEMTRACE_ATTN", "sdpa")  # or eager
        from ckpt_validate import LMWrap  # logits, as the calibration exports were made
        return LMWrap(cls(cfg)), shape, cfg.vocab_size
    return getattr(torchvision.models, name)(weights=None), (3, 224, 224), 0


def main():
    out_path, name, mode, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    prec = sys.argv[5] if len(sys.argv) > 5 else "fp32"
    opt_name = sys.argv[6] if len(sys.argv) > 6 else "adamw"
    ckpt = json.loads(sys.argv[7]) if len(sys.argv) > 7 else []
    warm_libraries()
    cpu_model, shape, vocab = build(name)
    settle()
    base = torch.cuda.memory_allocated()
    if os.environ.get("MEMTRACE_FRAMES", "1") == "0":
        # Without frames: recording Python frames fails inside a checkpointed
        # gpt2's backward (run_backward returned NULL, torch 2.11).
        torch.cuda.memory._record_memory_history(max_entries=2_000_000, context=None)
    else:
        torch.cuda.memory._record_memory_history(max_entries=2_000_000, stacks="python")
    model = copy.deepcopy(cpu_model).cuda()
    if ckpt:
        from ckpt_validate import recompute_in_backward
        for mod_name in ckpt:
            recompute_in_backward(model.get_submodule(mod_name))
    if mode == "infer" and prec == "fp16":
        model = model.half()
    x = (torch.randint(0, vocab, (batch, *shape), device="cuda") if vocab else
         torch.randn(batch, *shape, device="cuda"))
    if mode == "train" and prec == "bf16":
        # The calibration protocol's pure bf16: cast on the GPU, cache emptied.
        model = model.to(torch.bfloat16)
        if x.is_floating_point():
            x = x.to(torch.bfloat16)
        torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    marks = []

    def mark(what):
        torch.cuda.synchronize()
        marks.append(dict(what=what, allocated=torch.cuda.memory_allocated() - base,
                          peak=torch.cuda.max_memory_allocated() - base,
                          reserved=torch.cuda.memory_reserved()))

    if mode == "infer":
        model.eval()
        with torch.inference_mode():
            for i in range(2):
                out = model(x)
                del out
                mark(f"forward {i}")
    else:
        model.train()
        opt = (torch.optim.AdamW(model.parameters(), lr=1e-4) if opt_name == "adamw" else
               torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9))
        dtype = {"fp32": None, "bf16": None, "amp_bf16": torch.bfloat16}[prec]
        for i in range(3):
            with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
                out = model(x)
                y = torch.randint(0, out.shape[-1], out.shape[:-1], device="cuda")
                loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            mark(f"forward {i}")
            loss.backward()
            mark(f"backward {i}")
            opt.step()
            mark(f"optimizer {i}")
            opt.zero_grad(set_to_none=True)
            del out, loss
            mark(f"step {i}")
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    events = []
    for e in snap["device_traces"][0]:
        if e["action"] in ("alloc", "free_completed", "segment_alloc", "segment_free"):
            events.append([e["action"], e["addr"], e["size"], frame_summary(e.get("frames", []))])
    json.dump(dict(model=name, mode=mode, batch=batch, precision=prec, optimizer=opt_name,
                   base=base, max_allocated=torch.cuda.max_memory_allocated() - base,
                   max_reserved=torch.cuda.max_memory_reserved(), marks=marks,
                   events=events), open(out_path, "w"))
    print(name, mode, batch, "peak", torch.cuda.max_memory_allocated() - base,
          "reserved", torch.cuda.max_memory_reserved(), "events", len(events))


if __name__ == "__main__":
    main()
