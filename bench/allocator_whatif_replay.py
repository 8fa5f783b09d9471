#!/usr/bin/env python3
"""memplan's allocator model on PyTorch's own events, against the what-if measurements.

  python3 bench/allocator_whatif_replay.py TRACE_REPLAY ROWS.jsonl TRACE.json.gz|DIR ... [--check PERCENT]

Each trace (a DIR gives its *.json.gz; bench/allocator_whatif.py with WHATIF_TRACE, or bench/families.py
trace: three training steps under the default allocator) is replayed by
build/bench/trace_replay through the allocator model under the default
allocator, expandable_segments:True and max_split_size_mb 128 / 512, each as
recorded, then torch.cuda.empty_cache(), then the events of its last step once
more (the allocations made in that step, with new ids): the steps' reserved
peak, what empty_cache() keeps, and the reserved peak of the step after it.
These are set against the same configuration's rows of ROWS.jsonl
(bench/allocator_whatif.py: step 3's max_reserved, the epoch-end empty_cache's
reserved, step 4's max_reserved). A setting changes where blocks go, not what
the program asks for, so the one recorded event order serves every setting.

Where these agree and memplan's advice (bench/allocator_whatif_compare.py)
does not, the allocator model is right and the planned events (their order,
their sizes) are what differs from PyTorch's.

With --check, exits 1 when a figure is off by more than PERCENT; --except
A,B,... shows but does not check the figures whose label contains one of
those texts (known gaps, each said in the README).
"""
import glob
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

SETTINGS = [("default", []), ("expandable", ["--expandable_segments"]),
            ("split128", ["--max_split_size_mb", "128"]),
            ("split512", ["--max_split_size_mb", "512"])]


def last_step_start(events):
    """Index of the first allocation of the last training step: the first one
    after the optimizer's events (frames in adam.py) of the step before it."""
    runs = []  # (first, last) index of each stretch of optimizer events
    for i, e in enumerate(events):
        if "adam.py" in e[3]:
            if runs and i - runs[-1][1] < 200:
                runs[-1][1] = i
            else:
                runs.append([i, i])
    if len(runs) < 2:
        raise SystemExit("trace: fewer than two optimizer steps (frames in adam.py)")
    end = runs[-2][1]
    for i in range(end + 1, len(events)):
        if events[i][0] == "alloc" and "adam.py" not in events[i][3]:
            return i
    raise SystemExit("trace: no step after the second optimizer step")


def with_next_step(trace):
    """The trace's events, an empty_cache(), then its last step once more."""
    events = [e for e in trace["events"] if e[0] in ("alloc", "free_completed")]
    start = last_step_start(events)
    copy, mine, shift = [], set(), 1 << 56
    for e in events[start:]:
        if e[0] == "alloc":
            mine.add(e[1])
            copy.append(["alloc", e[1] + shift, e[2], ""])
        elif e[1] in mine:
            mine.discard(e[1])
            copy.append(["free_completed", e[1] + shift, e[2], ""])
    return dict(trace, events=events + [["empty_cache", 0, 0, ""]] + copy)


def replay(tool, path, flags):
    out = subprocess.run([tool] + flags, stdin=open(path), capture_output=True, text=True,
                         check=True).stdout
    m = re.search(r"reserved peak ([\d.]+) MiB, after empty_cache ([\d.]+) MiB .*"
                  r"peak after it ([\d.]+) MiB", out)
    if not m:
        raise SystemExit(f"trace_replay said: {out.strip()}")
    return [float(x) * 2**20 for x in m.groups()]


def main():
    args = sys.argv[1:]
    check = None
    if "--check" in args:
        k = args.index("--check")
        check = float(args[k + 1])
        del args[k:k + 2]
    known = []
    if "--except" in args:
        k = args.index("--except")
        known = args[k + 1].split(",")
        del args[k:k + 2]
    tool, rows_path = args[0], args[1]
    traces = []
    for a in args[2:]:
        traces += sorted(glob.glob(os.path.join(a, "*.json.gz"))) if os.path.isdir(a) else [a]
    rows = {}
    for line in open(rows_path):
        r = json.loads(line)
        if "error" not in r and r.get("phases"):
            rows[(r["model"], r["batch"], r["precision"], r["config"])] = {
                p["phase"]: p for p in r["phases"]}
    worst, over, n = 0.0, [], 0
    for path in traces:
        trace = json.load(gzip.open(path))
        key = (trace["model"], trace["batch"], trace["precision"])
        if not any(key + (config,) in rows for config, _ in SETTINGS):
            continue  # no measurement of this configuration
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(with_next_step(trace), f)
            f.flush()
            for config, flags in SETTINGS:
                meas = rows.get(key + (config,))
                if not meas:
                    continue
                model = replay(tool, f.name, flags)
                real = [meas["step3"]["max_reserved"], meas["empty_cache_epoch_end"]["reserved"],
                        meas["step4"]["max_reserved"]]
                for what, p, m in zip(("reserved", "empty_cache: kept", "next step reserved"),
                                      model, real):
                    err = 100.0 * (p - m) / m
                    worst = max(worst, abs(err))
                    n += 1
                    label = f"{key[0]} b{key[1]} {key[2]} {config} {what}"
                    mark = ""
                    if any(t and t in label for t in known):
                        mark = "  (known gap, not checked)"
                    elif check is not None and abs(err) > check:
                        over.append(label)
                        mark = "  OVER"
                    print(f"{label:60s} {p / 2**20:10.0f} {m / 2**20:10.0f} MiB {err:+6.1f} %{mark}")
    print(f"{n} figures, worst {worst:.1f} %")
    if n == 0:
        print("no trace matched a measured configuration")
        return 1
    if over:
        print(f"{len(over)} figure(s) off by more than {check} %")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
