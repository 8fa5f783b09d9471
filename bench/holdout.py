#!/usr/bin/env python3
"""Held-out models: torchvision networks the memory model was not built on,
exported and measured the way the calibration data was, for an honest check of
memplan on models it has not seen.

  python3 bench/holdout.py export NAME OUTDIR
      train-mode export (dynamo, optimize=False; TorchScript opset 17 when
      dynamo fails), batch dim symbolic, weights dropped (shape-only ONNX).
  python3 bench/holdout.py measure NAME MODE BATCH PRECISION
      one fresh process: MODE train = 3 steps of forward, cross entropy,
      backward, AdamW step, zero_grad (autocast for amp_*); MODE infer =
      eval(), two forwards under inference_mode. Prints one JSON line with the
      absolute max_memory_allocated / max_memory_reserved (per step for train),
      which is what `memplan plan` predicts for a fresh process.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
import torchvision

torch.backends.cudnn.benchmark = False


def build(name):
    return getattr(torchvision.models, name)(weights=None)


def export(name, outdir):
    import onnx
    os.makedirs(outdir, exist_ok=True)
    model = build(name).train()
    x = torch.randn(2, 3, 224, 224)
    tmp = f"/tmp/{name}.full.onnx"
    rec = dict(model=name)
    try:
        batch = torch.export.Dim("batch", min=1, max=4096)
        torch.onnx.export(model, (x,), tmp, dynamo=True, optimize=False, input_names=["input"],
                          output_names=["output"], dynamic_shapes=({0: batch},),
                          external_data=True)
        rec["exporter"] = "dynamo"
    except Exception as e:  # noqa: BLE001 - fall back like the calibration script
        rec["dynamo_error"] = repr(e)[:300]
        torch.onnx.export(model, (x,), tmp, dynamo=False, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
        rec["exporter"] = "torchscript"
    m = onnx.load(tmp)
    out = os.path.join(outdir, f"{name}_train.onnx")
    onnx.save_model(m, out, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=f"{name}_train.onnx.data", size_threshold=1024)
    data = out + ".data"
    if os.path.exists(data):
        os.remove(data)
    rec.update(nodes=len(m.graph.node), onnx_bytes=os.path.getsize(out),
               params=sum(p.numel() for p in model.parameters() if p.requires_grad))
    print(json.dumps(rec), flush=True)


def measure(name, mode, batch, prec):
    model = build(name).cuda()
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    rec = dict(model=name, mode=mode, batch=batch, precision=prec)
    if mode == "infer":
        model.eval()
        torch.cuda.reset_peak_memory_stats()
        with torch.inference_mode():
            for _ in range(2):
                out = model(x)
                del out
        torch.cuda.synchronize()
        rec.update(peak=torch.cuda.max_memory_allocated(),
                   reserved_peak=torch.cuda.max_memory_reserved())
    else:
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        dtype = {"fp32": None, "amp_bf16": torch.bfloat16}[prec]
        steps = []
        for _ in range(3):
            torch.cuda.reset_peak_memory_stats()
            with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
                out = model(x)
                y = torch.randint(0, out.shape[1], (out.shape[0],), device="cuda")
                loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del out, loss
            torch.cuda.synchronize()
            steps.append(dict(step_peak=torch.cuda.max_memory_allocated(),
                              reserved_peak=torch.cuda.max_memory_reserved()))
        rec["steps"] = steps
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(sys.argv[2], sys.argv[3])
    else:
        measure(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
