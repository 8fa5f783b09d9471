#!/usr/bin/env python3
"""Speed benchmark: memplan vs the peer onnx-tool (PyPI `onnx-tool`).

For each calibration model (models/*.onnx) and batch size it measures, per
subprocess, the wall time (median of --runs runs), the CPU time (user+sys) and
the peak RSS (ru_maxrss from os.wait4, i.e. getrusage of that one child) of

  memplan inspect MODEL --batch B --format json
  memplan plan MODEL --batch B --mode inference
  memplan plan MODEL --batch B --mode train --precision fp32
  memplan plan MODEL --batch B --mode train --precision amp_bf16

and, in the same run, of the peer onnx-tool doing its shape inference and
activation-memory estimate on the same model and batch:

  onnx_tool.Model(proto) -> graph.shape_infer({input: shape}) -> graph.profile()
  -> graph.compress_memory()

The models have no weight data (their .onnx.data files were deleted), so
onnx_tool.Model(path) fails in onnx.load_model; the peer is first tried that way
(the error is recorded) and then given the proto loaded with
load_external_data=False in which each external initializer is turned into a
graph input of its declared dims (fed to shape_infer with those dims). Zero-
filling the weights instead also works but onnx-tool then numpy-converts every
weight: 43 s of Graph construction for gpt2 on this machine, 1.3 GB RSS. Failures of the peer (stage + error) are recorded; its time is then the
time to the failure.

Ratios are memplan time / onnx-tool time (< 1: memplan is faster).

Extra section (--gpt2-runs runs each): gpt2_train whole training plan at batch
16 (target < 100 ms) and the whole inference pipeline at batch 1, 8, 64
(target < 50 ms).

Output: a Markdown table on stdout, JSON in --json (bench/speed_results.json).

Usage:
  python3 bench/speed_bench.py [--memplan build-bench/memplan] [--runs 5]
      [--peer-runs 5] [--gpt2-runs 21] [--models a,b] [--batches 1,8,64]
      [--no-peer] [--json bench/speed_results.json]
  python3 bench/speed_bench.py --peer MODEL.onnx BATCH   (one peer run; JSON line)
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

MODELS = [
    "resnet18", "resnet18_train",
    "resnet50", "resnet50_train", "resnet50_train_ts",
    "mobilenet_v2", "mobilenet_v2_train", "mobilenet_v2_train_ts",
    "vit_b_16", "vit_b_16_train",
    "bert_base", "bert_base_train", "bert_base_train_ts",
    "gpt2", "gpt2_train",
]

MEMPLAN_CMDS = {
    "inspect": ["inspect", "{m}", "--batch", "{b}", "--format", "json"],
    "plan_inf": ["plan", "{m}", "--batch", "{b}", "--mode", "inference"],
    "train_fp32": ["plan", "{m}", "--batch", "{b}", "--mode", "train", "--precision", "fp32"],
    "train_bf16": ["plan", "{m}", "--batch", "{b}", "--mode", "train", "--precision", "amp_bf16"],
}


# --------------------------------------------------------------------------
# peer (runs in its own process: python3 speed_bench.py --peer MODEL BATCH)
# --------------------------------------------------------------------------
def peer_main(path, batch):
    res = {"stage": None, "error": None}
    t0 = time.perf_counter()
    import onnx  # noqa: E402
    import onnx_tool  # noqa: E402
    res["import_s"] = time.perf_counter() - t0
    res["version"] = getattr(onnx_tool, "VERSION", None) or getattr(onnx_tool.utils, "VERSION", None)

    # 1. The documented entry point, on the path as is.
    t = time.perf_counter()
    try:
        onnx_tool.Model(path, {"verbose": False})
        res["path_load"] = "ok"
    except Exception as e:  # noqa: BLE001
        res["path_load"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200])
    res["path_load_s"] = time.perf_counter() - t

    # 2. Weightless workaround: proto without external data, weights as inputs.
    stages = []
    t_work = time.perf_counter()
    try:
        res["stage"] = "load"
        t = time.perf_counter()
        m = onnx.load_model(path, load_external_data=False)
        # Weightless: each external initializer becomes a graph input with its
        # declared dims (onnx-tool would otherwise numpy-convert every weight;
        # zero-filling them costs ~40 s of Graph construction on gpt2 here).
        weight_shapes = {}
        keep = []
        for init in m.graph.initializer:
            if init.data_location == onnx.TensorProto.EXTERNAL:
                weight_shapes[init.name] = list(init.dims)
                m.graph.input.append(onnx.helper.make_tensor_value_info(
                    init.name, init.data_type, list(init.dims)))
            else:
                keep.append(init)
        del m.graph.initializer[:]
        m.graph.initializer.extend(keep)
        filled = len(weight_shapes)
        res["weights_as_inputs"] = filled
        stages.append(("load_s", time.perf_counter() - t))

        res["stage"] = "graph"
        t = time.perf_counter()
        g = onnx_tool.Model(m, {"verbose": False}).graph
        stages.append(("graph_s", time.perf_counter() - t))

        res["stage"] = "shape_infer"
        t = time.perf_counter()
        shapes = {}
        for i in m.graph.input:
            if i.name in g.initials:
                continue
            if i.name in weight_shapes:
                shapes[i.name] = weight_shapes[i.name]
                continue
            shapes[i.name] = [batch if d.dim_param else d.dim_value
                              for d in i.type.tensor_type.shape.dim]
        g.shape_infer(shapes)
        stages.append(("shape_s", time.perf_counter() - t))

        res["stage"] = "profile"
        t = time.perf_counter()
        g.profile()
        stages.append(("profile_s", time.perf_counter() - t))
        res["memory_bytes"] = int(g.memory)  # weights + every node output, no reuse

        res["stage"] = "compress_memory"
        t = time.perf_counter()
        _, compressed = g.compress_memory()
        stages.append(("compress_s", time.perf_counter() - t))
        res["compressed_activation_bytes"] = int(compressed)
        res["stage"] = "done"
    except Exception as e:  # noqa: BLE001
        msg = str(e).splitlines()[0] if str(e) else ""
        res["error"] = "%s: %s" % (type(e).__name__, msg[:200])
    res.update(dict(stages))
    # in-process analysis time without python start/import/weight filling
    res["analysis_s"] = sum(v for k, v in stages if k != "load_s") + (
        0.0 if res["stage"] == "done" else
        time.perf_counter() - t)  # time spent in the failing stage
    res["work_s"] = time.perf_counter() - t_work
    print(json.dumps(res))


# --------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------
def run_once(argv):
    """Run argv; return (wall_s, cpu_s, maxrss_kib, rc, stdout, stderr)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, p.returncode,
                out.read().decode(errors="replace"), err.read().decode(errors="replace"))


def measure(argv, runs):
    walls, cpus, rss, rcs = [], [], [], []
    last = None
    for _ in range(runs):
        w, c, r, rc, so, se = run_once(argv)
        walls.append(w)
        cpus.append(c)
        rss.append(r)
        rcs.append(rc)
        last = (so, se)
    d = {
        "runs": runs,
        "wall_ms_median": 1e3 * statistics.median(walls),
        "wall_ms_min": 1e3 * min(walls),
        "wall_ms_max": 1e3 * max(walls),
        "cpu_ms_median": 1e3 * statistics.median(cpus),
        "maxrss_mib": max(rss) / 1024.0,
        "rc": max(rcs, key=abs),
    }
    if d["rc"] != 0:
        d["error"] = (last[1].strip().splitlines() or [""])[-1][:300]
    return d, last


def fmt_ms(x):
    if x is None:
        return "-"
    return "%.0f" % x if x >= 100 else "%.1f" % x


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer", nargs=2, metavar=("MODEL", "BATCH"))
    ap.add_argument("--memplan", default="build-bench/memplan")
    ap.add_argument("--models-dir", default="models")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--peer-runs", type=int, default=5)
    ap.add_argument("--gpt2-runs", type=int, default=21)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--json", default="bench/speed_results.json")
    a = ap.parse_args()
    if a.peer:
        peer_main(a.peer[0], int(a.peer[1]))
        return 0

    memplan = os.path.abspath(a.memplan)
    batches = [int(x) for x in a.batches.split(",")]
    models = [x for x in a.models.split(",") if x]
    uptime_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    t_start = time.time()
    results = []
    for m in models:
        path = os.path.join(a.models_dir, m + ".onnx")
        for b in batches:
            row = {"model": m, "batch": b}
            for key, tmpl in MEMPLAN_CMDS.items():
                argv = [memplan] + [x.format(m=path, b=b) for x in tmpl]
                row[key], _ = measure(argv, a.runs)
            if not a.no_peer:
                argv = [sys.executable, os.path.abspath(__file__), "--peer", path, str(b)]
                d, last = measure(argv, a.peer_runs)
                try:
                    info = json.loads(last[0].strip().splitlines()[-1])
                except Exception:  # noqa: BLE001
                    info = {"error": "peer produced no JSON: " + (last[1].strip().splitlines() or [""])[-1][:200]}
                d.update({k: info.get(k) for k in (
                    "stage", "error", "path_load", "analysis_s", "import_s", "load_s",
                    "graph_s", "shape_s", "profile_s", "compress_s", "memory_bytes",
                    "compressed_activation_bytes", "weights_as_inputs", "version")})
                row["onnx_tool"] = d
                pw = d["wall_ms_median"]
                pa = 1e3 * d["analysis_s"] if d.get("analysis_s") else None
                row["ratio_plan_inf_vs_peer_wall"] = row["plan_inf"]["wall_ms_median"] / pw
                row["ratio_inspect_vs_peer_wall"] = row["inspect"]["wall_ms_median"] / pw
                row["ratio_plan_inf_vs_peer_analysis"] = (
                    row["plan_inf"]["wall_ms_median"] / pa if pa else None)
            results.append(row)
            print("done %s b=%d (%.0fs)" % (m, b, time.time() - t_start), file=sys.stderr, flush=True)

    # gpt2_train: targets
    gpt2 = {}
    gpath = os.path.join(a.models_dir, "gpt2_train.onnx")
    if os.path.exists(gpath) and a.gpt2_runs > 0:
        for prec in ("fp32", "amp_bf16"):
            argv = [memplan, "plan", gpath, "--batch", "16", "--mode", "train", "--precision", prec]
            gpt2["train_b16_" + prec], _ = measure(argv, a.gpt2_runs)
        for b in (1, 8, 64):
            argv = [memplan, "plan", gpath, "--batch", str(b), "--mode", "inference"]
            gpt2["inference_b%d" % b], _ = measure(argv, a.gpt2_runs)
    uptime_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

    meta = {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
        "memplan": memplan, "runs": a.runs, "peer_runs": a.peer_runs, "gpt2_runs": a.gpt2_runs,
        "uptime_before": uptime_before, "uptime_after": uptime_after,
        "duration_s": time.time() - t_start,
        "note": "2-core shared machine; other engineers compile concurrently. "
                "Times are medians of the runs; cpu = user+sys of the child; "
                "maxrss = ru_maxrss of the child (max over runs).",
    }
    with open(a.json, "w") as f:
        json.dump({"meta": meta, "results": results, "gpt2_train": gpt2}, f, indent=1)
        f.write("\n")

    # Markdown
    p = print
    p("Load: before `%s`; after `%s`. Medians of %d runs (onnx-tool: %d)."
      % (uptime_before, uptime_after, a.runs, a.peer_runs))
    p("")
    p("| model | batch | inspect ms | plan inf ms | train fp32 ms | train bf16 ms | memplan RSS MiB "
      "| onnx-tool ms (wall / analysis) | onnx-tool RSS MiB | onnx-tool result | ratio plan-inf/peer wall |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for r in results:
        cells = []
        for k in MEMPLAN_CMDS:
            d = r[k]
            cells.append(fmt_ms(d["wall_ms_median"]) + ("" if d["rc"] == 0 else " (rc %d)" % d["rc"]))
        rss = max(r[k]["maxrss_mib"] for k in MEMPLAN_CMDS)
        if "onnx_tool" in r:
            o = r["onnx_tool"]
            peer = "%s / %s" % (fmt_ms(o["wall_ms_median"]),
                                fmt_ms(1e3 * o["analysis_s"]) if o.get("analysis_s") else "-")
            res = "ok" if o.get("stage") == "done" else "fails in %s: %s" % (o.get("stage"), o.get("error"))
            ratio = "%.3f" % r["ratio_plan_inf_vs_peer_wall"]
            prss = "%.0f" % o["maxrss_mib"]
        else:
            peer, res, ratio, prss = "-", "-", "-", "-"
        p("| %s | %d | %s | %.0f | %s | %s | %s | %s |" % (
            r["model"], r["batch"], " | ".join(cells), rss, peer, prss, res.replace("|", "/"), ratio))
    if gpt2:
        p("")
        p("gpt2_train (%d runs each): wall ms median [min..max], cpu ms median, RSS MiB" % a.gpt2_runs)
        p("")
        p("| run | target | wall median | wall min | wall max | cpu median | RSS MiB |")
        p("|---|---:|---:|---:|---:|---:|---:|")
        for k, d in gpt2.items():
            tgt = "< 100 ms" if k.startswith("train") else "< 50 ms"
            p("| %s | %s | %s | %s | %s | %s | %.0f |" % (
                k, tgt, fmt_ms(d["wall_ms_median"]), fmt_ms(d["wall_ms_min"]),
                fmt_ms(d["wall_ms_max"]), fmt_ms(d["cpu_ms_median"]), d["maxrss_mib"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
