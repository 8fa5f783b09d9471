#!/usr/bin/env python3
"""Per-rank peaks of data-parallel training against the measured rows.

Runs the real binary on models/gpt2_train.onnx for every row of
bench/calibration/dist_x2_h200.jsonl (GPT-2 on 2 x H200, DDP and FSDP2,
fp32 and amp_bf16, AdamW, batch 8 per rank; one row per rank) and fails
when a rank's steady-step allocated peak is off by more than 3 % or its
reserved peak by more than 8 %. With --table it prints the comparison as
the README's Markdown table instead.

Usage: dist_rows_test.py MEMPLAN REPO_ROOT [--table]
"""
import json
import subprocess
import sys

ALLOCATED_BOUND = 0.03
RESERVED_BOUND = 0.08
STRATEGY = {"ddp": "ddp", "fsdp2": "fsdp"}


def plan(memplan, root, strategy, precision, batch, world):
    cmd = [memplan, "plan", f"{root}/models/gpt2_train.onnx", "--batch", str(batch),
           "--precision", precision, "--optimizer", "adamw", "--world-size", str(world),
           "--strategy", strategy, "--format", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


BAD_FLAGS = [
    (["--world-size", "0", "--strategy", "ddp"], "--world-size 0: must be from 1 to 65536"),
    (["--world-size", "8", "--strategy", "single"], "--world-size 8: --strategy single plans one GPU"),
    # (advise searches every strategy when --strategy is left out)
    (["--world-size", "8"], "--world-size 8: needs --strategy ddp, fsdp", "plan"),
    (["--world-size", "2", "--strategy", "fsdp", "--fsdp-units", "no.such.block"],
     "--fsdp-units no.such.block: matches no module"),
    (["--world-size", "2", "--strategy", "ddp", "--reshard-after-forward", "off"],
     "--reshard-after-forward: applies to --strategy fsdp or zero3, not ddp"),
]


def bad_flags(memplan, root):
    """Each bad combination: exit 2 and one line `memplan: error: ... <what>`."""
    failures = 0
    for flags, want, *only in BAD_FLAGS:
        for cmd in (["plan", f"{root}/models/gpt2_train.onnx", "--batch", "8"],
                    ["advise", f"{root}/models/gpt2_train.onnx", "--device", "a100-80gb"]):
            if only and cmd[0] not in only:
                continue
            p = subprocess.run([memplan] + cmd + flags, capture_output=True, text=True)
            lines = p.stderr.strip().splitlines()
            ok = (p.returncode == 2 and len(lines) == 1 and lines[0].startswith("memplan: error: ")
                  and want in lines[0] and not p.stdout)
            failures += not ok
            if not ok:
                print(f"FAIL {' '.join(cmd[:1] + flags)}: exit {p.returncode}, stderr {p.stderr!r}")
    return failures


def main():
    memplan, root = sys.argv[1], sys.argv[2]
    table = "--table" in sys.argv[3:]
    rows = [json.loads(l) for l in open(f"{root}/bench/calibration/dist_x2_h200.jsonl")]
    if len(rows) != 8:
        print(f"expected 8 measured rows, found {len(rows)}")
        return 1
    cache = {}
    failures = 0
    gib = float(1 << 30)
    if table:
        print("| strategy | precision | rank | allocated pred / meas | error | "
              "reserved pred / meas | error | device pred / meas |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        key = (STRATEGY[r["strategy"]], r["precision"], r["batch_per_rank"], r["world"])
        if key not in cache:
            cache[key] = plan(memplan, root, *key)
        p = cache[key]["steady"]
        m = r["steps"][2]
        ea = p["allocated_bytes"] / m["step_peak"] - 1
        er = p["reserved_bytes"] / m["reserved_peak"] - 1
        ok = abs(ea) <= ALLOCATED_BOUND and abs(er) <= RESERVED_BOUND
        failures += not ok
        if table:
            print(f"| {r['strategy']} | {r['precision']} | {r['rank']} | "
                  f"{p['allocated_bytes'] / gib:.2f} / {m['step_peak'] / gib:.2f} GiB | "
                  f"{100 * ea:+.1f} % | {p['reserved_bytes'] / gib:.2f} / "
                  f"{m['reserved_peak'] / gib:.2f} GiB | {100 * er:+.1f} % | "
                  f"{p['device_bytes'] / gib:.2f} / {m['device_used'] / gib:.2f} GiB |")
        else:
            print(f"{'ok  ' if ok else 'FAIL'} {r['strategy']} {r['precision']} rank {r['rank']}: "
                  f"allocated {p['allocated_bytes']} vs {m['step_peak']} ({100 * ea:+.2f} %), "
                  f"reserved {p['reserved_bytes']} vs {m['reserved_peak']} ({100 * er:+.2f} %)")
    if not table:
        failures += bad_flags(memplan, root)
    if failures and not table:
        print(f"{failures} failures (rows outside {ALLOCATED_BOUND:.0%} allocated / "
              f"{RESERVED_BOUND:.0%} reserved, or bad flags not refused)")
    return 1 if failures and not table else 0


if __name__ == "__main__":
    sys.exit(main())
