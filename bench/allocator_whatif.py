#!/usr/bin/env python3
"""Ground truth for `memplan plan --allocator-advice`: one training run in this
fresh process under the allocator configuration PYTORCH_CUDA_ALLOC_CONF names
(the driver, bench/allocator_whatif.sh, sets it per process: the setting cannot
change inside a process).

  python3 bench/allocator_whatif.py MODEL BATCH PRECISION CONFIG

MODEL: a model of bench/families.py, or gpt2 / resnet50 as the calibration
exports (bench/ckpt_validate.py builds them). PRECISION: fp32 | amp_bf16.
CONFIG: a label written into the output (the driver's name for the setting).

Protocol (calibration protocol for the steps: AdamW, autocast for amp_*,
zero_grad(set_to_none=True), peaks reset at each step's start):
  steps 1-3                  training steps
  empty_cache "epoch_end"    torch.cuda.empty_cache() after step 3: bytes it
                             returns, milliseconds it takes
  steps 4-5                  step 4 re-creates the segments (its time against
                             step 5's is what the release costs)
  eval no_grad               model.eval(), one forward under torch.no_grad()
  eval inference_mode        the same under torch.inference_mode()
  forward train mode         model.train(), one forward with autograd on (an
                             evaluation that forgot no_grad and eval()): the
                             activations are kept until the output is dropped
  empty_cache "after_eval"   after the three forward passes
  step 6                     training again
Every phase records max_memory_allocated / max_memory_reserved (reset at its
start), memory_allocated / memory_reserved at its end, cudaMalloc and cudaFree
counts (num_device_alloc / num_device_free) and its synchronised wall time.
Prints one JSON line.

WHATIF_TRACE=FILE in the environment also records the caching allocator's
trace (torch.cuda.memory._record_memory_history) from before the model is
built until the "epoch_end" empty_cache(), and writes it to FILE as
bench/families.py trace does (the JSON line's fields, then "events": action,
address, size, frames), plus "kept": after that empty_cache, every segment
still reserved with its live blocks (size, frames): what pins it. The
events replay through memplan's allocator model (build/bench/trace_replay).
"""
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import families  # noqa: E402  (model builders and losses)


def build(name, batch):
    """(model, inputs, loss kind) for one of the families or a calibration model."""
    if name in ("gpt2", "resnet50"):
        import ckpt_validate
        model, spec = ckpt_validate.build(name)
        return model, (ckpt_validate.make_input(spec, batch),), "cls" if name == "resnet50" else "tokens"
    spec = families.MODELS[name]
    return spec[0](), spec[1](batch, "cuda"), spec[4]


def frame_summary(frames):
    """The innermost frames that name a module, a model file or a torch function."""
    keep = []
    for f in frames:
        fn = f.get("filename", "")
        if any(s in fn for s in ("torch/nn", "torchvision", "transformers", "torch/optim",
                                  "torch/autograd", "torch/_tensor", "torch/functional",
                                  "families.py", "ckpt_validate.py", "allocator_whatif.py")):
            keep.append(f"{fn.split('/')[-1]}:{f.get('line')}:{f.get('name')}")
        if len(keep) >= 4:
            break
    return "|".join(keep)


def write_trace(path, rec):
    """The recorded trace and the blocks that keep each segment reserved."""
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    events = [[e["action"], e["addr"], e["size"], frame_summary(e.get("frames", []))]
              for e in snap["device_traces"][0]
              if e["action"] in ("alloc", "free_completed", "segment_alloc", "segment_free")]
    kept = [dict(address=s["address"], total_size=s["total_size"], pool=s.get("segment_type"),
                 live=[[b["size"], frame_summary(b.get("frames", []))] for b in s["blocks"]
                       if b["state"] == "active_allocated"])
            for s in snap["segments"]]
    with open(path, "w") as f:
        json.dump(dict(rec, events=events, kept=kept), f)


def counters():
    s = torch.cuda.memory_stats()
    return s.get("num_device_alloc", 0), s.get("num_device_free", 0)


def phase(fn):
    """Runs fn between peak resets; returns the phase's figures."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    a0, f0 = counters()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    a1, f1 = counters()
    return dict(max_allocated=torch.cuda.max_memory_allocated(),
                max_reserved=torch.cuda.max_memory_reserved(),
                allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved(),
                device_allocs=a1 - a0, device_frees=f1 - f0, ms=round(ms, 3))


def main():
    name, batch, prec, config = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    trace = os.environ.get("WHATIF_TRACE")
    if trace:
        torch.cuda.memory._record_memory_history(max_entries=3_000_000, stacks="python")
    model, xs, loss_kind = build(name, batch)
    model = model.cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    amp = {"amp_bf16": torch.bfloat16}.get(prec)
    rec = dict(model=name, batch=batch, precision=prec, config=config,
               alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
               torch=torch.__version__, device=torch.cuda.get_device_name(),
               params=sum(p.numel() for p in model.parameters() if p.requires_grad))
    phases = []

    def autocast():
        return torch.autocast("cuda", dtype=amp or torch.float32, enabled=amp is not None)

    def train_step():
        with autocast():
            out = model(*xs)
            loss = families.loss_of(out, loss_kind)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def evaluate(ctx, train_mode=False):
        def run():
            model.train(train_mode)
            with ctx(), autocast():
                out = model(*xs)
            del out
            model.train()
        return run

    def empty_cache():
        torch.cuda.empty_cache()

    plan = [("step1", train_step), ("step2", train_step), ("step3", train_step),
            ("empty_cache_epoch_end", empty_cache), ("step4", train_step), ("step5", train_step),
            ("eval_no_grad", evaluate(torch.no_grad)),
            ("eval_inference_mode", evaluate(torch.inference_mode)),
            ("forward_train_mode", evaluate(torch.enable_grad, True)),
            ("empty_cache_after_eval", empty_cache), ("step6", train_step)]
    try:
        for label, fn in plan:
            reserved_before = torch.cuda.memory_reserved()
            r = phase(fn)
            r.update(phase=label, reserved_before=reserved_before)
            phases.append(r)
            if trace and label == "empty_cache_epoch_end":
                write_trace(trace, dict(rec, mode="train", phases=list(phases)))
                trace = None
    except torch.cuda.OutOfMemoryError as e:
        rec["error"] = "oom: " + str(e)[:600]
    rec["phases"] = phases
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
