#!/usr/bin/env python3
"""Include rules of the architecture, checked on the sources.

planner/ is a pure function of the graph and the options: it includes only
the C++ standard library and itself (GoogleTest in its tests). Inside it the
stages build on each other in this order, and a file may include only files
of its own or earlier stages:

  ir          the graph, dtypes, status, checked arithmetic, the options
  ops         per-op rules (ops/, op_registry) and shape inference
  schedule    the graph as PyTorch runs it: views, fusion, attention, module calls
  simulation  the step replayed through the allocator model; the entry point
  advice      checkpoint placement, device presets, the advisor

onnx_import/ and gpu_probe/ build on planner/ only; nothing but cli/ (and
the benchmarks and tests) includes cli/.

Usage: include_rules.py REPO_ROOT
"""
import os
import re
import sys

STAGES = ["ir", "ops", "schedule", "simulation", "advice"]
# planner/ file stem -> stage (a .h and its .cc share it); ops/ is "ops".
STAGE_OF = {
    "status": "ir", "text": "ir", "checked": "ir", "dtype": "ir", "graph": "ir", "options": "ir",
    "op_registry": "ops", "shape_inference": "ops", "evidence": "ops",
    "schedule": "schedule", "fusion": "schedule", "attention": "schedule",
    "module_calls": "schedule", "python_locals": "schedule", "params": "schedule",
    "sdpa": "schedule", "layout": "schedule",
    "rnn": "schedule", "reduce_kernel": "schedule", "rules": "schedule", "finetune": "schedule",
    "export_mode": "schedule", "loss_target": "schedule", "schedule_test_util": "schedule",
    "allocator_sim": "simulation", "arena": "simulation", "plan": "simulation",
    "plan_model": "simulation", "simulator": "simulation", "peaks": "simulation",
    "timeline": "simulation", "kernels": "simulation", "plan_step": "simulation",
    "distributed": "simulation", "batch_model": "simulation",
    "checkpoint": "schedule", "devices": "advice", "advisor": "advice", "whatif": "advice",
}
# Headers outside the standard library that a folder may not include.
FOREIGN = re.compile(r"^(google/|onnx|cuda|cublas|cudnn|CLI/|nlohmann/|gtest/|gmock/)")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def sources(root, folder):
    for base, _, files in os.walk(os.path.join(root, folder)):
        for f in sorted(files):
            if f.endswith((".h", ".cc", ".cu")):
                path = os.path.join(base, f)
                yield os.path.relpath(path, root), open(path, encoding="utf-8").read()


def is_test(rel):
    name = os.path.basename(rel)
    return name.endswith("_test.cc") or name in ("test_graph.h", "xml_test_util.h", "schedule_test_util.h")


def stage(rel):
    """The stage of a planner/ path, or None when it has none."""
    inner = rel[len("planner/"):]
    if inner.startswith("ops/"):
        return "ops"
    return STAGE_OF.get(os.path.splitext(inner)[0])


def main(root):
    errors = []
    for rel, text in sources(root, "planner"):
        own = None if is_test(rel) else stage(rel)
        if own is None and not is_test(rel):
            errors.append(f"{rel}: no stage: add it to STAGE_OF in tests/include_rules.py")
            continue
        for kind, inc in INCLUDE.findall(text):
            if kind == '"' and inc.startswith("planner/"):
                theirs = stage(inc)
                if theirs is None:
                    errors.append(f"{rel}: includes {inc}, which has no stage")
                elif own is not None and STAGES.index(theirs) > STAGES.index(own):
                    errors.append(f"{rel} ({own}) includes {inc} ({theirs}), a later stage")
            elif kind == '"':
                errors.append(f"{rel}: includes {inc}: planner/ includes only planner/")
            elif FOREIGN.match(inc) and not (is_test(rel) and inc.startswith("gtest/")):
                errors.append(f"{rel}: includes <{inc}>: planner/ uses only the standard library")
    for folder, allowed in (("onnx_import", ("planner/", "onnx_import/", "onnx/")),
                            ("gpu_probe", ("planner/", "gpu_probe/"))):
        for rel, text in sources(root, folder):
            for kind, inc in INCLUDE.findall(text):
                if kind == '"' and not inc.startswith(allowed):
                    errors.append(f"{rel}: includes {inc} ({folder}/ builds on planner/ only)")
                if kind == "<" and re.match(r"^(CLI/|nlohmann/)", inc):
                    errors.append(f"{rel}: includes <{inc}>: {folder}/ uses no CLI11 or JSON")
                if folder == "gpu_probe" and re.match(r"^(google/|onnx)", inc):
                    errors.append(f"{rel}: includes {inc}: gpu_probe/ uses no protobuf or ONNX")
    for e in errors:
        print("FAIL:", e)
    if errors:
        print(f"{len(errors)} include rule violation(s)")
        return 1
    print("all include rules hold")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
