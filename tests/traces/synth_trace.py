#!/usr/bin/env python3
"""Writes a memplan trace (docs/trace-schema.md) that equals a plan except where told.

For the end-to-end tests of `memplan plan --compare`: the run's steps, phases and modules are
the plan's own figures (`memplan plan ... --format json`), then each perturbation
MODULE:FIGURE:BYTES (FIGURE forward_rise, forward_kept or backward_rise) adds BYTES (may be
negative) to that module's measured figure. --drop-prefix
removes the first name component of every module (a run recorded on the unwrapped model).

Usage: synth_trace.py PLAN.json OUT.json [--steps N] [--drop-prefix] [MODULE:FIGURE:BYTES ...]
"""
import json
import sys


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    steps_n = 3
    if "--steps" in argv:
        steps_n = int(argv[argv.index("--steps") + 1])
        args.remove(str(steps_n))
    drop = "--drop-prefix" in argv
    plan_path, out_path, perturb = args[0], args[1], args[2:]
    plan = json.load(open(plan_path))
    bump = {}
    for p in perturb:
        mod, phase, b = p.rsplit(":", 2)
        bump[(mod, phase)] = int(b)
    mods = {}
    for m in plan["modules"]:
        name = m["module"].split(".", 1)[1] if drop and "." in m["module"] else m["module"]
        if drop and "." not in m["module"]:
            continue
        mods[name] = {"forward": m["forward_allocated_bytes"],
                      "backward": m["backward_allocated_bytes"]}
        kept = m["forward_kept_bytes"] - m["forward_released_bytes"]
        mods[name]["forward_kept"] = kept + bump.get((name, "forward_kept"), 0)
        for key in ("forward_rise", "backward_rise"):
            mods[name][key] = m[key + "_bytes"] + bump.get((name, key), 0)
    steps = []
    for i in range(steps_n):
        pk = plan["first_step"] if i == 0 else plan["steady"]
        phases = {k: {"peak_allocated": v["allocated_bytes"], "peak_reserved": v["reserved_bytes"]}
                  for k, v in pk["phases"].items()}
        samples = []
        t = 0.0
        for k, v in pk["phases"].items():
            for f in (0.2, 1.0, 0.6):
                t += 0.01
                samples.append([round(t, 3), k, int(v["allocated_bytes"] * f),
                                int(v["allocated_bytes"] * f), v["reserved_bytes"]])
        steps.append({"step": i, "peak_allocated": pk["allocated_bytes"],
                      "peak_reserved": pk["reserved_bytes"], "phases": phases,
                      "modules": mods, "samples": samples})
    doc = {"schema": "memplan-trace", "version": 1, "producer": "synth_trace.py",
           "device": {"index": 0, "name": "none (synthetic)", "total_bytes": 0},
           "sample_columns": ["seconds", "phase", "peak_allocated", "allocated", "reserved"],
           "steps": steps, "leaks": [], "empty_cache": [], "plan": None, "warnings": []}
    json.dump(doc, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
