#!/usr/bin/env python3
"""memplan against the fine-tuning measurements (bench/finetune.py).

Usage: python3 bench/finetune_compare.py MEMPLAN ONNX_DIR [MEASUREMENTS.jsonl] [--check]

ONNX_DIR holds NAME_train.onnx (models/ has them). Each measured row (the
steady step: the third step's peak, torch.cuda.max_memory_allocated) is
planned with the flags its mode means:
  freeze:REGEX      --freeze REGEX
  train-only:REGEX  --train-only REGEX
  lora:R:TARGETS    --lora r=R,alpha=2R,dropout=0.05,targets=TARGETS
  qlora:R:TARGETS   the same with --weights nf4
  int4lora:R:TARGETS, int8lora:R:TARGETS[:T]
                    the same with --weights int4 / int8
  infer:FORMAT      --mode inference --precision bf16 [--weights FORMAT]
                    (the forward's max_memory_allocated)
Prints one row per measurement, then the worst error per kind. With --check
exits 1 when an error is over its bound (3 % for frozen and LoRA rows, 5 %
for QLoRA), or when a row memplan refuses. Rows that errored on the GPU
(an `error` key) are skipped.
"""
import json
import os
import subprocess
import sys

MIB = 1 << 20
LOSS = {"unet_ldm": "mse"}
BOUND = {"freeze": 3.0, "train-only": 3.0, "lora": 3.0, "qlora": 5.0, "int4lora": 5.0,
         "int8lora": 5.0, "infer": 5.0, "full": 3.0}
WEIGHTS = {"qlora": "nf4", "int4lora": "int4", "int8lora": "int8"}
# Rows whose error is not the fine-tuning mechanisms', with their own bound
# and the reason (README, Fine-tuning).
KNOWN = {
    ("t5_encdec", "freeze:encoder"): (7.0, "full training of this configuration is +4.8 %"),
    ("t5_encdec", "lora:16:q,v"): (8.5, "full training of this configuration is +4.8 %"),
    ("wav2vec2_cls", "freeze:feature_extractor"): (
        35.0, "HF's feature encoder sets requires_grad on its input unless "
        "freeze_feature_encoder() ran: its frozen convolutions keep their inputs"),
    ("llama_1b", "full"): (3.0, "full training, not fine-tuning: the reference row"),
}


def flags(mode, row=None):
    kind, _, arg = mode.partition(":")
    if row is not None and kind in ("freeze", "train-only") and row["trainable"] == row["total"]:
        return []  # the regex froze nothing in PyTorch either (memplan refuses it)
    if kind == "full":
        return []
    if kind == "freeze":
        return ["--freeze", arg]
    if kind == "train-only":
        return ["--train-only", arg]
    if kind == "infer":
        return ["--mode", "inference"] + ([] if arg == "native" else ["--weights", arg])
    r, targets = arg.split(":")[:2]
    out = ["--lora", f"r={r},alpha={2 * int(r)},dropout=0.05,targets={targets}"]
    return out + (["--weights", WEIGHTS[kind]] if kind in WEIGHTS else [])


def plan(memplan, onnx, row):
    name = row["model"]
    cmd = [memplan, "plan", onnx, "--batch", str(row["batch"]), "--precision", row["precision"],
           "--optimizer", "adamw", "--loss", LOSS.get(name, "cross_entropy"), "--format", "json",
           *flags(row["mode"], row)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip()
    return json.loads(out.stdout), None


def main():
    args = [a for a in sys.argv[1:] if a != "--check"]
    check = "--check" in sys.argv[1:]
    memplan, onnx_dir = args[0], args[1]
    meas = args[2] if len(args) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "finetune_h200.jsonl")
    worst = {}
    failed = []
    print(f"{'model':13} {'B':>2} {'prec':8} {'mode':38} {'trainable':>11} {'meas MiB':>9}"
          f" {'pred':>8} {'err%':>6}")
    for line in open(meas):
        r = json.loads(line)
        if "error" in r:
            continue
        kind = r["mode"].partition(":")[0]
        onnx = os.path.join(onnx_dir, r["model"] + "_train.onnx")
        p, err = plan(memplan, onnx, r)
        if p is None:
            print(f"{r['model']:13} {r['batch']:2} {r['precision']:8} {r['mode']:38} {err}")
            failed.append(f"{r['model']} {r['mode']}: {err}")
            continue
        m = r["peak"] if kind == "infer" else r["steps"][2]["step_peak"]
        pred = p["peak"]["allocated_bytes"]
        e = 100.0 * (pred - m) / m
        trainable = p["parameters"]["count"]
        note = ("" if trainable == r.get("trainable", trainable) else
                f"  (trainable {trainable} vs {r['trainable']})")
        print(f"{r['model']:13} {r['batch']:2} {r['precision']:8} {r['mode']:38} {trainable:11d}"
              f" {m / MIB:9.0f} {pred / MIB:8.0f} {e:+6.1f}{note}")
        bound, why = KNOWN.get((r["model"], r["mode"], r["batch"], r["precision"]),
                               KNOWN.get((r["model"], r["mode"]), (BOUND[kind], "")))
        if why:
            print(f"{'':13}    ({why}; bound {bound:.0f} %)")
        else:
            worst[kind] = max(worst.get(kind, 0.0), abs(e))
        if abs(e) > bound:
            failed.append(f"{r['model']} b{r['batch']} {r['precision']} {r['mode']}: {e:+.1f} %")
    print("\nworst absolute error of the allocated peak (rows without a note)")
    for kind, w in sorted(worst.items()):
        print(f"  {kind:11} {w:4.1f} %  (bound {BOUND[kind]:.0f} %)")
    if check and failed:
        print("\nover the bound:\n  " + "\n  ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
