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
        int4lora:R:TARGETS        the same on bitsandbytes FP4 (quant_type fp4,
                                  no double quantization): memplan's int4
        int8lora:R:TARGETS[:T]    the same on bitsandbytes LLM.int8 (Linear8bitLt,
                                  has_fp16_weights=False, outlier threshold T,
                                  default 6.0 as transformers' BitsAndBytesConfig)
        infer:FORMAT              eval(), two forwards under inference_mode with
                                  the decoder Linears in FORMAT: native | nf4 |
                                  int4 | int8 (weight-only quantization)
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


def to_4bit(model, quant_type="nf4", double_quant=True):
    """Every nn.Linear below a decoder layer becomes a bitsandbytes Linear4bit."""
    import bitsandbytes as bnb
    for name, mod in list(model.named_modules()):
        for cname, child in list(mod.named_children()):
            full = f"{name}.{cname}" if name else cname
            if isinstance(child, torch.nn.Linear) and ".layers." in f".{full}":
                q = bnb.nn.Linear4bit(child.in_features, child.out_features,
                                      bias=child.bias is not None, compute_dtype=torch.bfloat16,
                                      compress_statistics=double_quant, quant_type=quant_type)
                q.weight = bnb.nn.Params4bit(child.weight.data, requires_grad=False,
                                             quant_type=quant_type,
                                             compress_statistics=double_quant)
                if child.bias is not None:
                    q.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
                setattr(mod, cname, q)
    return model


def to_8bit(model, threshold):
    """Every nn.Linear below a decoder layer becomes a bitsandbytes Linear8bitLt."""
    import bitsandbytes as bnb
    for name, mod in list(model.named_modules()):
        for cname, child in list(mod.named_children()):
            full = f"{name}.{cname}" if name else cname
            if isinstance(child, torch.nn.Linear) and ".layers." in f".{full}":
                q = bnb.nn.Linear8bitLt(child.in_features, child.out_features,
                                        bias=child.bias is not None, has_fp16_weights=False,
                                        threshold=threshold)
                q.weight = bnb.nn.Int8Params(child.weight.data, requires_grad=False,
                                             has_fp16_weights=False)
                if child.bias is not None:
                    q.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
                setattr(mod, cname, q)
    return model


def quantize(model, fmt, threshold=6.0):
    """The decoder Linears of a bf16 model in FORMAT, moved to the GPU."""
    if fmt == "nf4":
        return to_4bit(model).cuda()
    if fmt == "int4":
        return to_4bit(model, "fp4", double_quant=False).cuda()
    if fmt == "int8":
        return to_8bit(model, threshold).cuda()  # moving Int8Params quantizes them
    return model.cuda()


def measure_infer(name, batch, prec, fmt):
    build, inputs, *_ = families.MODELS[name]
    torch.manual_seed(0)
    model = build()
    if prec == "bf16" or fmt != "native":
        model = model.to(torch.bfloat16)
    model = quantize(model, fmt)
    xs = inputs(batch, "cuda")
    rec = dict(model=name, batch=batch, precision=prec, mode=f"infer:{fmt}", cap_gib=None,
               total=sum(p.numel() for p in model.parameters()),
               param_bytes=torch.cuda.memory_allocated())
    rec.update(families.infer_peaks(model, xs))
    print(json.dumps(rec), flush=True)


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
    if kind in ("lora", "qlora", "int4lora", "int8lora"):
        import peft
        r, targets = arg.split(":")[:2]
        cfg = peft.LoraConfig(r=int(r), lora_alpha=2 * int(r), lora_dropout=0.05,
                              target_modules=targets.split(","), bias="none")
        return peft.get_peft_model(model, cfg)
    raise SystemExit(f"unknown mode {mode}")


def export(name, outdir):
    families.export(name, outdir)


def measure(name, batch, prec, mode, cap_gib=None):
    if mode.startswith("infer:"):
        return measure_infer(name, batch, prec, mode.split(":", 1)[1])
    build, inputs, _, _, loss_kind, *_ = families.MODELS[name]
    if cap_gib is not None:
        total = torch.cuda.mem_get_info()[1]
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_gib * (1 << 30) / total))
    torch.manual_seed(0)
    model = build()
    kind = mode.split(":")[0]
    fmt = {"qlora": "nf4", "int4lora": "int4", "int8lora": "int8"}.get(kind)
    if prec == "bf16" or fmt:
        model = model.to(torch.bfloat16)
    if fmt:  # moving the quantized parameters to the GPU quantizes them
        parts = mode.split(":")
        model = quantize(model, fmt, float(parts[3]) if len(parts) > 3 else 6.0)
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
