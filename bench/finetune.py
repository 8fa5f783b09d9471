#!/usr/bin/env python3
"""Fine-tuning as people do it, measured with the calibration protocol in fresh
processes: frozen modules, LoRA (PEFT), QLoRA (bitsandbytes 4-bit NF4 base with
LoRA on top), on the family models of bench/families.py and a LLaMA-style model
of about 1.1 B parameters.

  python3 bench/finetune.py export NAME OUTDIR
  python3 bench/finetune.py measure NAME BATCH PRECISION MODE
      PRECISION fp32 | amp_bf16 | bf16 (model.to(bfloat16) before the mode is
      applied). MODE:
        full                      every parameter trains
        freeze:REGEX              parameters whose name matches REGEX are frozen
        train-only:REGEX          only parameters whose name matches REGEX train
        lora:R:TARGETS            PEFT LoRA, rank R, alpha 2R, dropout 0.05 on the
                                  Linear modules whose names end in one of
                                  TARGETS (comma-separated); base frozen
        qlora:R:TARGETS           the same on a bitsandbytes NF4 base (double
                                  quantization, bf16 compute): every Linear of
                                  the decoder layers becomes Linear4bit
      Prints one JSON line: trainable and total parameters, bytes after load,
      per step fwd/bwd/step peaks (absolute max_memory_allocated), reserved.
  python3 bench/finetune.py measure NAME BATCH PRECISION MODE CAP_GIB
      the same under torch.cuda.set_per_process_memory_fraction(CAP_GIB GiB /
      the device's total): an out-of-memory error is the row's `error`.
"""
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402  (the models, inputs and losses)

families.MODELS["llama_1b"] = (
    families.P(families.llama, vocab=32000, hidden=2048, ffn=5632, layers=20, heads=16,
               kv_heads=8), families.tokens(32000, 1024), ["input_ids"], [0], "tokens", [], [])


def to_4bit(model):
    """Every nn.Linear below a decoder layer becomes a bitsandbytes NF4 Linear4bit."""
    import bitsandbytes as bnb
    for name, mod in list(model.named_modules()):
        for cname, child in list(mod.named_children()):
            full = f"{name}.{cname}" if name else cname
            if isinstance(child, torch.nn.Linear) and ".layers." in f".{full}":
                q = bnb.nn.Linear4bit(child.in_features, child.out_features,
                                      bias=child.bias is not None, compute_dtype=torch.bfloat16,
                                      compress_statistics=True, quant_type="nf4")
                q.weight = bnb.nn.Params4bit(child.weight.data, requires_grad=False,
                                             quant_type="nf4", compress_statistics=True)
                if child.bias is not None:
                    q.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
                setattr(mod, cname, q)
    return model


def apply_mode(model, mode):
    kind, _, arg = mode.partition(":")
    if kind == "full":
        return model
    if kind in ("freeze", "train-only"):
        pat = re.compile(arg)
        for n, p in model.named_parameters():
            hit = bool(pat.search(n))
            p.requires_grad_(not hit if kind == "freeze" else hit)
        return model
    if kind in ("lora", "qlora"):
        import peft
        r, targets = arg.split(":")
        cfg = peft.LoraConfig(r=int(r), lora_alpha=2 * int(r), lora_dropout=0.05,
                              target_modules=targets.split(","), bias="none")
        return peft.get_peft_model(model, cfg)
    raise SystemExit(f"unknown mode {mode}")


def export(name, outdir):
    families.export(name, outdir)


def measure(name, batch, prec, mode, cap_gib=None):
    build, inputs, _, _, loss_kind, *_ = families.MODELS[name]
    if cap_gib is not None:
        total = torch.cuda.mem_get_info()[1]
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_gib * (1 << 30) / total))
    torch.manual_seed(0)
    model = build()
    if prec == "bf16" or mode.startswith("qlora"):
        model = model.to(torch.bfloat16)
    if mode.startswith("qlora"):
        model = to_4bit(model).cuda()  # moving Params4bit to the GPU quantizes them
    model = apply_mode(model, mode).cuda()
    xs = inputs(batch, "cuda")
    if prec == "bf16":
        xs = tuple(x.to(torch.bfloat16) if x.is_floating_point() else x for x in xs)
    trainable = [p for p in model.parameters() if p.requires_grad]
    rec = dict(model=name, batch=batch, precision=prec, mode=mode, cap_gib=cap_gib,
               trainable=sum(p.numel() for p in trainable),
               total=sum(p.numel() for p in model.parameters()),
               param_bytes=torch.cuda.memory_allocated())
    model.train()
    opt = torch.optim.AdamW(trainable, lr=1e-4)
    amp = {"amp_bf16": torch.bfloat16}.get(prec)
    total = torch.cuda.mem_get_info()[1]
    steps = []
    for _ in range(3):
        torch.cuda.reset_peak_memory_stats()
        with torch.autocast("cuda", dtype=amp or torch.float32, enabled=amp is not None):
            out = model(*xs)
            loss = families.loss_of(out, loss_kind)
        fwd = torch.cuda.max_memory_allocated()
        loss.backward()
        bwd = torch.cuda.max_memory_allocated()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del out, loss
        torch.cuda.synchronize()
        steps.append(dict(fwd_peak=fwd, fwd_bwd_peak=bwd, step_peak=torch.cuda.max_memory_allocated(),
                          reserved_peak=torch.cuda.max_memory_reserved(),
                          after=torch.cuda.memory_allocated(),
                          device_used=total - torch.cuda.mem_get_info()[0]))
    rec["steps"] = steps
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(sys.argv[2], sys.argv[3])
    else:
        name, batch, prec, mode = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
        cap = float(sys.argv[6]) if len(sys.argv) > 6 else None
        try:
            measure(name, batch, prec, mode, cap)
        except Exception as e:  # noqa: BLE001 - one row says what failed
            print(json.dumps(dict(model=name, batch=batch, precision=prec, mode=mode, cap_gib=cap,
                                  error=f"{type(e).__name__}: {str(e)[:300]}")), flush=True)
