"""Converts PyTorch's memory snapshot (torch.cuda.memory._dump_snapshot pickle) into a trace.

The snapshot (torch/cuda/memory.py, `_snapshot()`) holds `segments` (the allocator's segments at
snapshot time, each with its `blocks` and their `state`: active_allocated, active_pending_free /
active_awaiting_free, inactive) and, when history was recorded (_record_memory_history()),
`device_traces`: per device, the allocator's actions in order: alloc, free_requested,
free_completed, segment_alloc, segment_free, segment_map / segment_unmap (expandable segments),
snapshot, oom; each with addr, size, stream, frames (filename, line, name) and, in recent
versions, time_us.

memory_allocated() falls at free_requested (the tensor is gone; the block may still wait for
other streams before free_completed makes it reusable); memory_reserved() follows the segment
actions. The levels at the snapshot are known from `segments`, so the level before each action
follows by walking the history back, even when the history ring buffer dropped older actions.
The result is one step (the recorded window), without phases or modules: the snapshot does not
know them.
"""

import pickle

from . import trace as trace_mod
from .monitor import __version__

_ALLOC_UP = ("alloc",)
_SEG_UP = ("segment_alloc", "segment_map")
_SEG_DOWN = ("segment_free", "segment_unmap")


class SnapshotError(ValueError):
    """Not a memory snapshot this converter understands."""


def _site(frames):
    for f in frames or []:
        fn = str(f.get("filename", ""))
        if "/torch/" in fn or fn.startswith("??") or not fn:
            continue
        return f"{fn.rsplit('/', 1)[-1]}:{f.get('line')}:{f.get('name')}"
    if frames:
        f = frames[0]
        return f"{str(f.get('filename', '')).rsplit('/', 1)[-1]}:{f.get('line')}:{f.get('name')}"
    return "?"


def _load(snapshot):
    if isinstance(snapshot, dict):
        return snapshot
    try:
        with open(snapshot, "rb") as f:
            snap = pickle.load(f)  # the user's own file; PyTorch writes it with pickle
    except (pickle.UnpicklingError, EOFError, ValueError) as e:
        raise SnapshotError(f"{snapshot}: not a pickled memory snapshot ({e})") from None
    if not isinstance(snap, dict):
        raise SnapshotError(f"{snapshot}: not a memory snapshot (a {type(snap).__name__})")
    return snap


def snapshot_to_trace(snapshot, device=0, max_samples=5000, device_total=0, top_sites=8):
    """A trace document from a snapshot (a path to the pickle, or the dict _snapshot() returns)."""
    snap = _load(snapshot)
    segs = snap.get("segments")
    traces = snap.get("device_traces")
    if not isinstance(segs, list) or not isinstance(traces, list):
        raise SnapshotError("not a memory snapshot: expected 'segments' and 'device_traces' lists")
    if device >= len(traces) or not traces[device]:
        raise SnapshotError(f"device {device}: no recorded history (call "
                            f"torch.cuda.memory._record_memory_history() before the run)")
    events = traces[device]
    reserved_end = 0
    allocated_end = 0
    for s in segs:
        if s.get("device", device) != device:
            continue
        reserved_end += int(s.get("total_size", 0))
        for b in s.get("blocks", []):
            if b.get("state") == "active_allocated":
                allocated_end += int(b.get("size", 0))
    has_requested = any(e.get("action") == "free_requested" for e in events)
    alloc_down = ("free_requested",) if has_requested else ("free_completed",)

    def deltas(e):
        a = e.get("action")
        n = int(e.get("size", 0))
        return (n if a in _ALLOC_UP else -n if a in alloc_down else 0,
                n if a in _SEG_UP else -n if a in _SEG_DOWN else 0)

    da = dr = 0
    for e in events:
        x, y = deltas(e)
        da += x
        dr += y
    allocated = allocated_start = allocated_end - da
    reserved = reserved_start = reserved_end - dr
    t0 = events[0].get("time_us")
    raw = []
    peak_a, peak_r = allocated, reserved
    peak_at = -1
    live = {}  # addr -> (size, site) of blocks allocated inside the window
    peak_live = {}
    ooms = []
    for i, e in enumerate(events):
        a = e.get("action")
        x, y = deltas(e)
        allocated += x
        reserved += y
        if a == "alloc":
            live[e.get("addr")] = (int(e.get("size", 0)), _site(e.get("frames")))
        elif a in alloc_down:
            live.pop(e.get("addr"), None)
        elif a == "oom":
            ooms.append({"step": 0, "phase": None, "kind": "oom",
                         "message": f"out of memory asking for {int(e.get('size', 0))} bytes "
                                    f"at {_site(e.get('frames'))}"})
        if allocated > peak_a:
            peak_a = allocated
            peak_at = i
            peak_live = dict(live)
        peak_r = max(peak_r, reserved)
        t = e.get("time_us")
        secs = (t - t0) / 1e6 if isinstance(t, (int, float)) and isinstance(t0, (int, float)) else i
        raw.append([secs, "forward", max(allocated, 0), max(allocated, 0), max(reserved, 0)])
    # Down to max_samples points, keeping each bucket's highest sample.
    samples = raw
    if len(raw) > max_samples > 0:
        per = (len(raw) + max_samples - 1) // max_samples
        samples = [max(raw[k:k + per], key=lambda r: r[2]) for k in range(0, len(raw), per)]
    for s in samples:
        s[1] = None  # phases are unknown in a snapshot
    sites = {}
    for size, site in peak_live.values():
        sites[site] = sites.get(site, 0) + size
    top = sorted(sites.items(), key=lambda kv: -kv[1])[:top_sites]
    doc = trace_mod.new_trace(
        f"memplan_torch {__version__} (from torch.cuda.memory._snapshot)",
        {"index": device, "name": "", "total_bytes": int(device_total)},
        "",
        str(snap.get("allocator_settings", "")) if snap.get("allocator_settings") else "",
    )
    doc["steps"].append({
        "step": 0,
        "allocated_start": max(allocated_start, 0),
        "reserved_start": max(reserved_start, 0),
        "peak_allocated": max(peak_a, 0),
        "peak_reserved": max(peak_r, 0),
        "allocated_end": allocated_end,
        "reserved_end": reserved_end,
        "fragmentation_end": reserved_end - allocated_end,
        "phases": {},
        "modules": {},
        "samples": samples,
    })
    doc["snapshot"] = {
        "actions": len(events),
        "segments": sum(1 for s in segs if s.get("device", device) == device),
        "peak_action": peak_at,
        "peak_sites": [{"site": s, "bytes": b} for s, b in top],
    }
    doc["warnings"].extend(ooms)
    return trace_mod.validate(doc)
