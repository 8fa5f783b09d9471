#!/usr/bin/env python3
"""memplan against fresh-process measurements of whole models on the H200:
the families (bench/families.py measure: bench/results/families_h200.jsonl,
families_check_h200.jsonl, families_new_h200.jsonl) and the held-out CNNs (bench/holdout.py:
bench/results/holdout_h200.jsonl).

Usage: python3 bench/rows_compare.py MEMPLAN ONNX_DIR MEASUREMENTS.jsonl [--by-mode]
ONNX_DIR holds NAME_train.onnx or NAME_train.onnx.gz (`bench/families.py export`,
`bench/holdout.py export`; any machine with torch, no GPU needed). Prints one row per
measurement (train: steady and first step) and the median / worst absolute
error per model and mode, or per mode only with --by-mode.
"""
import json
import os
import statistics
import subprocess
import sys

MIB = 1 << 20
# the loss bench/families.py trains each model with (cross entropy otherwise)
LOSS = {"unet_ldm": "mse"}
# models whose batch is not dim 0 of the first input: bound by the symbol's name
BATCH_SYMBOL = {"gru_seqfirst": "batch"}


def loss_of(name):
    """The family's loss: other sizes (`_b`, `_c`) train as the family does."""
    return next((v for k, v in LOSS.items() if name == k or name.startswith(k + "_")),
                "cross_entropy")


def model_name(onnx):
    """NAME of ONNX_DIR/NAME_train.onnx or NAME_train.onnx.gz."""
    base = os.path.basename(onnx)
    return base[:base.index("_train.onnx")]


def export_path(onnx_dir, model):
    """The model's export in ONNX_DIR, gzipped where only that is there."""
    onnx = os.path.join(onnx_dir, model + "_train.onnx")
    return onnx if os.path.exists(onnx) or not os.path.exists(onnx + ".gz") else onnx + ".gz"


def plan(memplan, onnx, mode, batch, prec, step, load="cast"):
    name = model_name(onnx)
    bind = (["--dim", f"{BATCH_SYMBOL[name]}={batch}"] if name in BATCH_SYMBOL else
            ["--batch", str(batch)])
    cmd = [memplan, "plan", onnx, "--mode", mode, *bind, "--format", "json"]
    if mode == "train":
        cmd += ["--precision", prec, "--optimizer", "adamw", "--step", step,
                "--loss", loss_of(name)]
        if prec in ("bf16", "fp16"):
            cmd += ["--model-load", load]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip()
    p = json.loads(out.stdout)["peak"]
    return (p["allocated_bytes"], p["reserved_bytes"]), None


def main():
    args = [a for a in sys.argv[1:] if a != "--by-mode"]
    by_mode = "--by-mode" in sys.argv[1:]
    if len(args) != 3:
        sys.exit(__doc__)
    memplan, onnx_dir, meas = args
    errs = {}
    print(f"{'model':16} {'mode':5} {'prec':8} {'step':6} {'B':>3} {'meas MiB':>9} {'pred':>9}"
          f" {'err%':>6} {'resv meas':>9} {'pred':>9} {'err%':>6}")
    for line in open(meas):
        r = json.loads(line)
        onnx = export_path(onnx_dir, r["model"])
        cases = ([("infer", r["peak"], r["reserved_peak"])] if r["mode"] == "infer" else
                 [("steady", r["steps"][2]["step_peak"], r["steps"][2]["reserved_peak"]),
                  ("first", r["steps"][0]["step_peak"], r["steps"][0]["reserved_peak"])])
        for step, m_alloc, m_res in cases:
            mode = "inference" if r["mode"] == "infer" else "train"
            pred, err = plan(memplan, onnx, mode, r["batch"], r["precision"],
                             step if step != "infer" else "steady", r.get("load", "cast"))
            if pred is None:
                print(f"{r['model']:16} {step:6} {err}")
                continue
            ea = 100.0 * (pred[0] - m_alloc) / m_alloc
            er = 100.0 * (pred[1] - m_res) / m_res
            kind = "inference" if r["mode"] == "infer" else "training"
            fam = kind if by_mode else f"{r['model']} {kind}"
            errs.setdefault(fam, ([], []))
            errs[fam][0].append(abs(ea))
            errs[fam][1].append(abs(er))
            print(f"{r['model']:16} {r['mode']:5} {r['precision']:8} {step:6} {r['batch']:3}"
                  f" {m_alloc / MIB:9.0f} {pred[0] / MIB:9.0f} {ea:+6.1f}"
                  f" {m_res / MIB:9.0f} {pred[1] / MIB:9.0f} {er:+6.1f}")
    print("\nabsolute error (median / worst)")
    for fam, (a, r) in sorted(errs.items()):
        print(f"  {fam:24} n={len(a):2}  allocated {statistics.median(a):4.1f} % / {max(a):4.1f} %"
              f"   reserved {statistics.median(r):4.1f} % / {max(r):4.1f} %")


if __name__ == "__main__":
    main()
