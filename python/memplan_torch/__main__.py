"""python -m memplan_torch: convert a PyTorch memory snapshot, or summarize a trace."""

import argparse
import sys

from . import trace as trace_mod
from .monitor import summarize
from .snapshot import SnapshotError, snapshot_to_trace


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m memplan_torch")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert", help="a torch.cuda.memory._dump_snapshot pickle -> a trace")
    c.add_argument("snapshot")
    c.add_argument("-o", "--output", required=True)
    c.add_argument("--device", type=int, default=0)
    s = sub.add_parser("summary", help="print a trace's peaks, leaks and warnings")
    s.add_argument("trace")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "convert":
            doc = snapshot_to_trace(a.snapshot, device=a.device)
            trace_mod.write(doc, a.output)
            print(summarize(doc))
        else:
            print(summarize(trace_mod.read(a.trace)))
    except (SnapshotError, trace_mod.TraceError, OSError) as e:
        name = a.snapshot if a.cmd == "convert" else a.trace
        print(f"memplan_torch: error: {name}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
