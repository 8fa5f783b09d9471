#!/usr/bin/env python3
"""GPU validation of memplan_torch (needs CUDA, torch, torchvision, transformers).

Checks, each a line of results in $OUT/gpu_validate.json (and a summary on stdout):

  peaks   The monitor's per-step peaks equal torch's own. For resnet50 (fp32, b32) and gpt2
          (amp_bf16, b4; the calibration models, built as bench/ckpt_validate.py builds them),
          AdamW, 4 steps: the same loop runs unmonitored (reset_peak_memory_stats() at each
          step's start, max_memory_allocated() / max_memory_reserved() read at its end) and then
          monitored (hooks on every module), each on a fresh model after a warm-up run, and
          every step's figures must be equal. Also records the monitor's time per step.
  leak    One tensor kept per step (resnet50: 16 MiB; gpt2: the step's logits, detached) is
          reported within 3 steps, with that tensor's size per step.
  cache   What empty_cache() at the end of a steady step frees (measured), and the threshold
          policy's releases and their cost in step time.
  traces  Fresh processes (the calibration protocol) record traces for `memplan plan
          --compare`: resnet50 and gpt2 as planned, with torch.utils.checkpoint on some
          blocks, and gpt2 with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.
          With --memplan BIN (or build/memplan present) the comparisons run here too.

Usage: OUT=dir python3 python/tests/gpu_validate.py [--quick] [--memplan BIN] [--out DIR]
(the repository root as working directory). --quick: resnet50 only, no child processes.
"""
import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

MiB = 1 << 20
CONFIGS = {
    # name: (batch, precision, checkpointed modules for the trace run)
    "resnet50": (32, "fp32", ["layer1.0", "layer1.1", "layer1.2", "layer2.0", "layer2.1",
                              "layer2.2", "layer2.3"]),
    "gpt2": (4, "amp_bf16", [f"m.transformer.h.{i}" for i in range(6)]),
}


def settle(torch):
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def run_loop(name, steps, monitor=None, leak=None, checkpoint=(), seed=0):
    """Trains `name` for `steps` steps; returns (per-step (peak alloc, peak reserved, alloc
    after), per-step seconds, the Monitor or None, the leaked tensor's bytes)."""
    import torch
    import memplan_torch
    from ckpt_validate import build, loss_fn, make_input, recompute_in_backward

    batch, precision, _ = CONFIGS[name]
    torch.manual_seed(seed)
    model, spec = build(name)
    for m in checkpoint:
        recompute_in_backward(model.get_submodule(m))
    model = model.cuda().train()
    x = make_input(spec, batch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    dtype = torch.bfloat16 if precision == "amp_bf16" else None
    mon = memplan_torch.Monitor(model, opt, **monitor).start() if monitor is not None else None
    kept = []
    leak_bytes = 0
    figures, seconds = [], []
    for _ in range(steps):
        t = time.perf_counter()
        if mon is None:
            torch.cuda.reset_peak_memory_stats()
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            out = model(x)
            loss = loss_fn(out)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if leak == "tensor":
            kept.append(torch.empty(16 * MiB, dtype=torch.uint8, device="cuda"))
            leak_bytes = 16 * MiB
        elif leak == "logits":
            kept.append(out.detach())
            leak_bytes = (out.untyped_storage().nbytes() + 511) // 512 * 512
        del out, loss
        if mon is None:
            torch.cuda.synchronize()
            figures.append((torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved(),
                            torch.cuda.memory_allocated()))
        else:
            mon.step()
        seconds.append(time.perf_counter() - t)
    if mon is not None:
        mon.close()
        figures = [(s["peak_allocated"], s["peak_reserved"], s["allocated_end"])
                   for s in mon.steps]
    del model, opt, x, kept
    settle(torch)
    return figures, seconds, mon, leak_bytes


def check_peaks(name, steps, results):
    import torch

    run_loop(name, 1)  # warm-up: libraries' workspaces exist before both measured runs
    plain, t_plain, _, _ = run_loop(name, steps)
    watched, t_watched, mon, _ = run_loop(name, steps, monitor={"samples": False})
    ok = plain == watched
    mods = mon.steps[-1]["modules"]
    results.append({
        "check": "peaks", "model": name, "ok": ok,
        "unmonitored": plain, "monitored": watched,
        "step_seconds_unmonitored": round(statistics.median(t_plain[1:]), 4),
        "step_seconds_monitored": round(statistics.median(t_watched[1:]), 4),
        "modules_recorded": len(mods),
        "phases_last_step": {p: v["peak_allocated"] for p, v in mon.steps[-1]["phases"].items()},
        "torch": torch.__version__, "device": torch.cuda.get_device_name(),
    })


def check_leak(name, results):
    kind = "logits" if name == "gpt2" else "tensor"
    warnings_seen = []
    _, _, mon, size = run_loop(name, 5, monitor={"samples": False, "leak_steps": 2,
                                                 "on_warning": warnings_seen.append}, leak=kind)
    leaks = mon.leaks
    first_warning = next((w["step"] for w in warnings_seen if w["kind"] == "leak"), None)
    # The allocator may hand out a block up to 1 MiB larger than asked when the rest of the
    # free block is too small to split off (CUDACachingAllocator: large blocks split only when
    # more than 1 MiB remains); memory_allocated() counts the whole block.
    ok = (len(leaks) == 1 and first_warning is not None and first_warning <= 2
          and size <= leaks[0]["bytes_per_step"] <= size + MiB)
    results.append({"check": "leak", "model": name, "ok": ok, "kept_bytes_per_step": size,
                    "reported": leaks, "reported_at_step": first_warning,
                    "allocated_after_steps": [s["allocated_end"] for s in mon.steps]})


def check_cache(name, results):
    import memplan_torch
    import torch

    _, t_probe, mon, _ = run_loop(name, 4, monitor={"samples": False,
                                                    "probe_empty_cache": "step_end"})
    probes = mon.trace["empty_cache"]
    frag = [s["fragmentation_end"] for s in mon.steps]
    total = torch.cuda.mem_get_info()[1]
    # A share just under the run's reserved peak, so the policy acts.
    share = max(0.001, 0.9 * mon.steps[-1]["peak_reserved"] / total)
    _, t_pol, mon2, _ = run_loop(name, 4, monitor={"samples": False,
                                                   "policy": memplan_torch.EmptyCachePolicy(share)})
    _, t_none, _, _ = run_loop(name, 4, monitor={"samples": False})
    rel = mon2.trace["empty_cache"]
    # The probe frees what is cached at the step's end: reserved - allocated, less what the
    # allocator cannot return (segments with a live block).
    ok = all(p["freed_bytes"] <= f for p, f in zip(probes, frag)) and all(
        p["freed_bytes"] == p["reserved_before"] - p["reserved_after"] for p in probes)
    results.append({
        "check": "cache", "model": name, "ok": ok,
        "fragmentation_end": frag,
        "probe_freed": [p["freed_bytes"] for p in probes],
        "probe_seconds": [p["seconds"] for p in probes],
        "policy_share": round(share, 5), "policy_releases": len(rel),
        "policy_freed": sum(r["freed_bytes"] for r in rel),
        "policy_seconds_in_empty_cache": round(sum(r["seconds"] for r in rel), 5),
        "step_seconds_median_with_policy": round(statistics.median(t_pol[1:]), 4),
        "step_seconds_median_without": round(statistics.median(t_none[1:]), 4),
        "step_seconds_median_with_probe": round(statistics.median(t_probe[1:]), 4),
    })


def child(name, trace, checkpoint, steps):
    """One fresh-process run writing a trace (the calibration protocol: model, input, steps)."""
    import torch

    torch.backends.cudnn.benchmark = False
    run_loop(name, steps, monitor={"trace": trace}, checkpoint=checkpoint)


def run_children(out, results, memplan):
    tdir = os.path.join(out, "traces")
    os.makedirs(tdir, exist_ok=True)
    runs = []
    for name, (batch, prec, ckpt) in CONFIGS.items():
        base = f"{name}_b{batch}_{prec}"
        runs.append((name, f"{base}_h200.json", [], {}))
        runs.append((name, f"{base}_ckpt{len(ckpt)}_h200.json", ckpt, {}))
    runs.append(("gpt2", "gpt2_b4_amp_bf16_expandable_h200.json", [],
                 {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}))
    for name, fname, ckpt, env in runs:
        path = os.path.join(tdir, fname)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--trace", path,
               "--checkpoint", json.dumps(ckpt)]
        t = time.time()
        p = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True)
        rec = {"check": "trace", "model": name, "file": f"traces/{fname}", "checkpoint": ckpt,
               "env": env, "ok": p.returncode == 0, "seconds": round(time.time() - t, 1)}
        if p.returncode != 0:
            rec["stderr"] = p.stderr[-2000:]
        else:
            doc = json.load(open(path))
            rec["peaks"] = [(s["peak_allocated"], s["peak_reserved"]) for s in doc["steps"]]
            batch, prec, _ = CONFIGS[name]
            model = {"resnet50": "models/resnet50_train.onnx",
                     "gpt2": "models/gpt2_train.onnx"}[name]
            rec["compare_command"] = (f"memplan plan {model} --batch {batch} --precision {prec}"
                                      f" --compare {fname}")
            if memplan:
                c = subprocess.run([memplan, "plan", os.path.join(ROOT, model), "--batch",
                                    str(batch), "--precision", prec, "--compare", path,
                                    "--compare-rows", "12"], capture_output=True, text=True)
                rec["compare_output"] = c.stdout[-6000:] + c.stderr[-500:]
        results.append(rec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu_validate_out"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--memplan", default=None)
    ap.add_argument("--child", default=None)
    ap.add_argument("--trace", default=None)
    ap.add_argument("--checkpoint", default="[]")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.trace, json.loads(a.checkpoint), a.steps)
        return 0
    import torch

    if not torch.cuda.is_available():
        print("gpu_validate: no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = False
    os.makedirs(a.out, exist_ok=True)
    memplan = a.memplan
    if memplan is None and os.path.exists(os.path.join(ROOT, "build", "memplan")):
        memplan = os.path.join(ROOT, "build", "memplan")
    results = []
    t0 = time.time()
    models = ["resnet50"] if a.quick else ["resnet50", "gpt2"]
    for name in models:
        for check in (lambda: check_peaks(name, 4, results), lambda: check_leak(name, results)):
            try:
                check()
            except Exception as e:  # a failed check is a result, not the end of the run
                results.append({"check": "error", "model": name, "ok": False, "error": repr(e)})
            print(json.dumps(results[-1])[:400], flush=True)
    try:
        check_cache("resnet50", results)
    except Exception as e:
        results.append({"check": "error", "model": "resnet50", "ok": False, "error": repr(e)})
    print(json.dumps(results[-1])[:400], flush=True)
    if not a.quick:
        run_children(a.out, results, memplan)
    doc = {"seconds": round(time.time() - t0, 1), "results": results,
           "all_ok": all(r["ok"] for r in results)}
    with open(os.path.join(a.out, "gpu_validate.json"), "w") as f:
        json.dump(doc, f, indent=1)
    for r in results:
        print(f"{'ok  ' if r['ok'] else 'FAIL'} {r['check']:<6} {r['model']:<9} "
              f"{r.get('file', '')}")
    print(f"{doc['seconds']} s; results in {os.path.join(a.out, 'gpu_validate.json')}")
    return 0 if doc["all_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
