#!/usr/bin/env python3
"""Where a plan's allocator events first part from PyTorch's, and what each
keeps reserved after a final torch.cuda.empty_cache().

  MEMPLAN_PLACEMENTS=1 build/bench/plan_events MODEL BATCH PRECISION > plan.txt
  python3 bench/plan_trace_diff.py plan.txt TRACE.json.gz [MIN_MIB] [SHOW]

TRACE is a bench/families.py or bench/allocator_whatif.py (WHATIF_TRACE)
trace of the same configuration. The allocations of MIN_MIB (default 1) or
more of both are aligned by size (difflib); for the aligned pairs the place
each took is compared as (segment of 100 MiB or more, by creation order;
offset in MiB), and the first SHOW (default 5) differences are printed with
the events before them. Then, for both, the segments that still hold a live
block at the end (what empty_cache() cannot return) with their largest live
blocks: the recorded addresses for PyTorch, the allocator model's placements
for the plan.
"""
import difflib
import gzip
import json
import sys

MIB = 2**20
BIG = 100 * MIB


def plan_events(path):
    """[(index, 'alloc'|'free', id, bytes, what, (segment, offset) or None)], segments."""
    events, segments = [], {}
    for line in open(path):
        f = line.split()
        if line.startswith("segment "):
            segments[int(f[1])] = int(f[2])
            continue
        if not f or not f[0].isdigit() or f[1] == "empty_cache":
            continue
        k = next((i for i, x in enumerate(f) if x.startswith("#")), None)
        if k is None:
            raise SystemExit(f"{path}: no ids: run plan_events with MEMPLAN_PLACEMENTS=1")
        b = int(f[k - 3])
        at = None
        if k + 1 < len(f):
            seg, rest = f[k + 1][1:].split(":")
            at = (int(seg), int(rest.split("/")[0]), int(rest.split("/")[1]))
        events.append((int(f[0]), "alloc" if f[k - 3][0] == "+" else "free", f[k], abs(b),
                       " ".join(f[1:k - 3]), at))
    return events, segments


def trace_events(path):
    """The same for a recorded trace; placements from the recorded addresses."""
    t = json.load(gzip.open(path))
    events, segments, order = [], {}, []
    for i, (action, addr, size, frames) in enumerate(t["events"]):
        if action == "segment_alloc":
            segments[addr] = size
            order.append(addr)
        elif action in ("alloc", "free_completed"):
            at = None
            if action == "alloc":
                for s in reversed(order):
                    if s <= addr < s + segments[s]:
                        at = (s, addr - s, size)
                        break
            events.append((i, "alloc" if action == "alloc" else "free", addr, size,
                           frames.split("|")[0], at))
    return events, segments, order


def kept(events):
    """Live blocks at the end: segment -> [(bytes, index, what)]."""
    live = {}
    for i, kind, ident, size, what, at in events:
        if kind == "alloc" and at:
            live[ident] = (at[0], at[2], i, what)
        elif kind == "free":
            live.pop(ident, None)
    by = {}
    for seg, size, i, what in live.values():
        by.setdefault(seg, []).append((size, i, what))
    return by


def show_kept(title, by, sizes, name):
    total = sum(sizes[s] for s in by)
    print(f"{title}: {len(by)} segments hold a live block, {total / MIB:.0f} MiB")
    for s in sorted(by, key=lambda s: -sizes[s]):
        if sizes[s] <= 20 * MIB:
            continue
        blocks = sorted(by[s], reverse=True)
        print(f"  {name(s)} {sizes[s] / MIB:.0f} MiB: "
              + "; ".join(f"{b / MIB:.1f} MiB @{i} {w[:40]}" for b, i, w in blocks[:3]))


def main():
    plan_path, trace_path = sys.argv[1], sys.argv[2]
    min_bytes = float(sys.argv[3]) * MIB if len(sys.argv) > 3 else MIB
    show = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    p, psegs = plan_events(plan_path)
    r, rsegs, rorder = trace_events(trace_path)
    prank = {s: k for k, s in enumerate(sorted(s for s in psegs if psegs[s] >= BIG))}
    rbig = [s for s in rorder if rsegs[s] >= BIG]
    rrank = {s: k for k, s in enumerate(rbig)}

    def where(at, rank):
        if not at or at[0] not in rank:
            return None
        return rank[at[0]], at[1] // MIB

    pa = [e for e in p if e[1] == "alloc" and e[3] >= min_bytes]
    ra = [e for e in r if e[1] == "alloc" and e[3] >= min_bytes]
    key = lambda e: round(((e[3] + 511) // 512 * 512) / MIB, 1)  # noqa: E731
    sm = difflib.SequenceMatcher(None, [key(e) for e in ra], [key(e) for e in pa], autojunk=False)
    shown = 0
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op != "equal" or shown >= show:
            continue
        for re_, pe in zip(ra[i1:i2], pa[j1:j2]):
            if where(re_[5], rrank) != where(pe[5], prank) and shown < show:
                shown += 1
                print(f"differs: {key(re_)} MiB: PyTorch event {re_[0]} at {where(re_[5], rrank)} "
                      f"({re_[4][:50]}), plan event {pe[0]} at {where(pe[5], prank)} ({pe[4][:50]})")
    if shown == 0:
        print("the aligned allocations take the same places")
    print(f"aligned {sum(b.size for b in sm.get_matching_blocks())} of {len(ra)} PyTorch and "
          f"{len(pa)} planned allocations of {min_bytes / MIB:g} MiB or more")
    show_kept("PyTorch", kept(r), rsegs, lambda s: f"segment {rorder.index(s)}")
    show_kept("plan", kept(p), psegs, lambda s: f"segment {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
