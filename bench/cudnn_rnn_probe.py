#!/usr/bin/env python3
"""What cuDNN's RNN (nn.LSTM / nn.GRU / nn.RNN on CUDA) allocates, per call.

For each configuration of a grid (mode, layers, directions, sequence, batch,
hidden, input size, dtype, dropout, batch_first), records the caching
allocator's events inside one training forward, its backward, one eval
forward under inference_mode and, for fp32 modules, an autocast(bf16)
forward and backward. Each phase is written as the ordered list of
[action, bytes] ("alloc" / "free") the phase made, after a warm-up call (so
the cached dropout state and cuBLAS/cuDNN handles exist already), so that
outputs, hy/cy, the reserve space, the workspace, contiguous copies and
weight gradients can be told apart offline (bench/cudnn_rnn_fit.py).

Usage (GPU machine): python3 bench/cudnn_rnn_probe.py OUT.jsonl
"""
import json
import random
import sys

import torch
import torch.nn as nn

torch.backends.cudnn.benchmark = False

MODES = {"LSTM": nn.LSTM, "GRU": nn.GRU, "RNN": nn.RNN}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
BASE = dict(mode="LSTM", layers=2, dirs=1, seq=128, batch=8, hidden=1024, input=512,
            dtype="fp32", dropout=0.2, batch_first=True)


def grid():
    out = []
    for mode in MODES:
        base = dict(BASE, mode=mode)
        out.append(base)
        for k, vals in (("seq", [1, 16, 64, 256, 512]), ("batch", [1, 2, 32, 64, 256]),
                        ("hidden", [64, 128, 256, 512, 2048]), ("input", [16, 80, 1024, 4096]),
                        ("layers", [1, 3, 4]), ("dirs", [2]), ("dtype", ["bf16", "fp16"]),
                        ("dropout", [0.0]), ("batch_first", [False])):
            for v in vals:
                out.append(dict(base, **{k: v}))
    rng = random.Random(12)
    for _ in range(45):
        out.append(dict(mode=rng.choice(list(MODES)), layers=rng.choice([1, 2, 3]),
                        dirs=rng.choice([1, 2]), seq=rng.choice([20, 50, 100, 200, 300]),
                        batch=rng.choice([3, 8, 16, 48, 100]),
                        hidden=rng.choice([96, 200, 320, 512, 768]),
                        input=rng.choice([40, 80, 300, 640]),
                        dtype=rng.choice(["fp32", "bf16"]), dropout=rng.choice([0.0, 0.1]),
                        batch_first=rng.choice([True, False])))
    # The two family models of bench/families.py, at other batches.
    for b in (8, 32, 128):
        out.append(dict(BASE, batch=b))
        out.append(dict(mode="GRU", layers=3, dirs=2, seq=200, batch=b, hidden=512, input=80,
                        dtype="fp32", dropout=0.1, batch_first=False))
    return out


def events_of(fn):
    """Runs fn() with the allocator history on; returns (result, [[action, bytes, addr], ...]),
    the events after a marker allocation made just before fn (the history may keep older
    events across enable/disable)."""
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=200_000, stacks="python")
    marker = torch.empty(37 * 512, dtype=torch.uint8, device="cuda")
    addr = marker.data_ptr()
    result = fn()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    del marker
    trace = snap["device_traces"][0]
    start = 0
    for i, e in enumerate(trace):
        if e["action"] == "alloc" and e["addr"] == addr and e["size"] == 37 * 512:
            start = i + 1
    ev = []
    for e in trace[start:]:
        if e["action"] == "alloc":
            ev.append(["alloc", e["size"], e["addr"]])
        elif e["action"] == "free_completed":
            ev.append(["free", e["size"], e["addr"]])
    return result, ev


def measure(c):
    dt = DTYPES[c["dtype"]]
    m = MODES[c["mode"]](c["input"], c["hidden"], num_layers=c["layers"],
                         bidirectional=c["dirs"] == 2, dropout=c["dropout"],
                         batch_first=c["batch_first"]).cuda().to(dt)
    m.flatten_parameters()
    shape = (c["batch"], c["seq"], c["input"]) if c["batch_first"] else (c["seq"], c["batch"],
                                                                          c["input"])
    x = torch.randn(*shape, device="cuda", dtype=dt)
    rec = dict(c, params=sum(p.numel() for p in m.parameters()))
    m.train()
    y, _ = m(x)  # warm-up: dropout state, handles
    y.float().sum().backward()
    del y
    m.zero_grad(set_to_none=True)
    y, fwd = events_of(lambda: m(x)[0])
    g = torch.ones_like(y)
    _, bwd = events_of(lambda: y.backward(g))
    del y, g
    m.zero_grad(set_to_none=True)
    rec.update(fwd=fwd, bwd=bwd)
    m.eval()
    with torch.inference_mode():
        m(x)
        _, inf = events_of(lambda: m(x)[0])
    rec["inf"] = inf
    if c["dtype"] == "fp32":
        m.train()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = m(x)[0]
        y.float().sum().backward()
        del y
        m.zero_grad(set_to_none=True)

        def amp_fwd():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return m(x)[0]

        y, afwd = events_of(amp_fwd)
        g = torch.ones_like(y)
        _, abwd = events_of(lambda: y.backward(g))
        del y, g
        m.zero_grad(set_to_none=True)
        rec.update(amp_fwd=afwd, amp_bwd=abwd)
    del m, x
    torch.cuda.empty_cache()
    return rec


def main():
    out = open(sys.argv[1], "w")
    state = torch._cudnn_init_dropout_state(0.2, True, 0, dtype=torch.uint8, device="cuda")
    out.write(json.dumps(dict(torch=torch.__version__, cudnn=torch.backends.cudnn.version(),
                              device=torch.cuda.get_device_name(),
                              dropout_state_bytes=state.numel())) + "\n")
    del state
    for c in grid():
        try:
            rec = measure(c)
        except torch.cuda.OutOfMemoryError as e:
            rec = dict(c, error="oom: " + str(e)[:120])
            torch.cuda.empty_cache()
        out.write(json.dumps(rec) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
