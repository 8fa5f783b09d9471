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

Usage (GPU machine): python3 bench/cudnn_rnn_probe.py OUT.jsonl [--grid mechanism]
    [--budget-s SECONDS]

--grid mechanism measures one-factor sweeps around the family shapes instead
(batch, sequence, hidden, input, layers, directions, dtype, dropout, the
TF32 switch, the hidden sizes where PyTorch picks cuDNN's persistent
small-hidden algorithm, the fp16 shapes where it picks the persistent static
one), in priority order, stopping after --budget-s seconds. Each record
carries the algorithm PyTorch's get_algo picks (aten/src/ATen/native/cudnn/
RNN.cpp) for the forward and the backward call, so the sizes can be read per
algorithm.
"""
import argparse
import json
import random
import sys
import time

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


def mechanism_grid():
    """One-factor sweeps, most useful first (the family shapes, then the
    structure of each term, then the other algorithms)."""
    out = []
    fam = [
        # lstm_lm, gru_seqfirst, gru_seqfirst_b, lstm_tagger, gru_lm, lstm_lm_b
        (dict(mode="LSTM", layers=2, dirs=1, seq=128, hidden=1024, input=512, dropout=0.2,
              batch_first=True), [1, 3, 8, 9, 16, 33, 128, 512, 2048]),
        (dict(mode="GRU", layers=3, dirs=2, seq=200, hidden=512, input=80, dropout=0.1,
              batch_first=False), [1, 2, 3, 8, 9, 16, 32, 64, 128, 256, 1024]),
        (dict(mode="GRU", layers=2, dirs=2, seq=200, hidden=384, input=40, dropout=0.1,
              batch_first=False), [3, 16, 64, 200]),
        (dict(mode="LSTM", layers=1, dirs=2, seq=96, hidden=384, input=256, dropout=0.0,
              batch_first=True), [1, 16, 64, 256, 1024, 4096, 16384]),
        (dict(mode="GRU", layers=3, dirs=1, seq=64, hidden=768, input=384, dropout=0.15,
              batch_first=True), [4, 16, 64, 256, 1024]),
        (dict(mode="LSTM", layers=3, dirs=1, seq=64, hidden=768, input=256, dropout=0.2,
              batch_first=True), [16, 64, 512]),
    ]
    for base, batches in fam:
        for dt in ("fp32", "bf16"):
            for b in batches:
                out.append(dict(base, batch=b, dtype=dt))
    # Structure: sweeps around a standard-algorithm base, both directions.
    for mode in MODES:
        for dirs in (2, 1):
            base = dict(mode=mode, layers=2, dirs=dirs, seq=64, batch=8, hidden=512,
                        input=256, dtype="fp32", dropout=0.0, batch_first=False)
            out.append(base)
            for k, vals in (("layers", [1, 3, 4]),
                            ("seq", [1, 2, 255, 256, 257, 300, 512, 1000]),
                            ("hidden", [416, 640, 768, 1024, 1536]),
                            ("input", [16, 64, 1024]), ("batch", [1, 2, 5, 64, 512]),
                            ("dtype", ["bf16", "fp16"]), ("dropout", [0.3])):
                for v in vals:
                    out.append(dict(base, **{k: v}))
            out.append(dict(base, layers=3, dropout=0.3))
    # Layers at other batches and sequences, one-layer bf16 (its own sizes in
    # the first probe).
    for mode in ("LSTM", "GRU"):
        for dirs in (2, 1):
            base = dict(mode=mode, layers=2, dirs=dirs, seq=64, batch=8, hidden=512,
                        input=256, dtype="fp32", dropout=0.0, batch_first=False)
            for layers in (1, 2, 3):
                out.append(dict(base, layers=layers, batch=64))
                out.append(dict(base, layers=layers, batch=3))
                out.append(dict(base, layers=layers, seq=512))
            for seq in (257, 512, 1000):
                out.append(dict(base, layers=1, batch=64, seq=seq))
            for dt in ("bf16", "fp16"):
                for kw in (dict(), dict(batch=64), dict(seq=512), dict(hidden=1024)):
                    out.append(dict(base, layers=1, dtype=dt, **kw))
    # The TF32 switch (math type of fp32 calls).
    for mode in ("LSTM", "GRU"):
        for dirs in (1, 2):
            for layers in (1, 2):
                out.append(dict(mode=mode, layers=layers, dirs=dirs, seq=64, batch=8,
                                hidden=512, input=256, dtype="fp32", dropout=0.0,
                                batch_first=False, allow_tf32=False))
    # PyTorch's persistent small-hidden algorithm: forward for LSTM/GRU
    # hidden <= 192 (RNN <= 384), backward for <= 128 (RNN <= 256).
    for mode, hs in (("LSTM", [32, 64, 100, 128, 160, 192, 200]),
                     ("GRU", [64, 128, 160, 192, 200]), ("RNN", [128, 256, 320, 384, 400])):
        for h in hs:
            for dt in ("fp32", "bf16"):
                for layers, dirs in ((1, 1), (2, 2)):
                    for b in (8, 64):
                        out.append(dict(mode=mode, layers=layers, dirs=dirs, seq=64, batch=b,
                                        hidden=h, input=128, dtype=dt, dropout=0.0,
                                        batch_first=False))
    # The persistent static algorithm (fp16, one layer, one direction, hidden
    # and input multiples of 128, batch a multiple of 8 up to 128).
    for mode in ("LSTM", "RNN", "GRU"):
        for b in (8, 16, 128, 136, 12):
            for dt in ("fp16", "bf16"):
                out.append(dict(mode=mode, layers=1, dirs=1, seq=64, batch=b, hidden=512,
                                input=512, dtype=dt, dropout=0.0, batch_first=False))
    return out


def algo_of(c, forward):
    """The cudnnRNNAlgo_t PyTorch's get_algo picks for an unpacked input."""
    h, mode = c["hidden"], c["mode"]
    if c["dtype"] != "fp64":
        limit = (384 if mode == "RNN" else 192) if forward else (256 if mode == "RNN" else 128)
        if h <= limit:
            return "PERSIST_STATIC_SMALL_H"
    if c["dtype"] == "fp16":
        common = (c["layers"] == 1 and h <= 1024 and c["dirs"] == 1 and h % 128 == 0 and
                  c["input"] % 128 == 0)
        b = c["batch"]
        if mode == "LSTM":
            dev = b % 8 == 0 and b <= 128
        elif mode == "RNN":
            dev = b % 8 == 0 and b <= 128 and (b < 96 or h < 896)
        else:
            dev = False
        if common and dev:
            return "PERSIST_STATIC"
    return "STANDARD"


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


def measure(c, amp=True):
    torch.backends.cudnn.allow_tf32 = c.get("allow_tf32", True)
    dt = DTYPES[c["dtype"]]
    m = MODES[c["mode"]](c["input"], c["hidden"], num_layers=c["layers"],
                         bidirectional=c["dirs"] == 2, dropout=c["dropout"],
                         batch_first=c["batch_first"]).cuda().to(dt)
    m.flatten_parameters()
    shape = (c["batch"], c["seq"], c["input"]) if c["batch_first"] else (c["seq"], c["batch"],
                                                                          c["input"])
    x = torch.randn(*shape, device="cuda", dtype=dt)
    rec = dict(c, params=sum(p.numel() for p in m.parameters()), algo_fwd=algo_of(c, True),
               algo_bwd=algo_of(c, False))
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
    if amp and c["dtype"] == "fp32":
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
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--grid", choices=["default", "mechanism"], default="default")
    ap.add_argument("--budget-s", type=float, default=1e9)
    args = ap.parse_args()
    start = time.monotonic()
    out = open(args.out, "w")
    state = torch._cudnn_init_dropout_state(0.2, True, 0, dtype=torch.uint8, device="cuda")
    out.write(json.dumps(dict(torch=torch.__version__, cudnn=torch.backends.cudnn.version(),
                              device=torch.cuda.get_device_name(),
                              dropout_state_bytes=state.numel())) + "\n")
    del state
    configs = grid() if args.grid == "default" else mechanism_grid()
    for c in configs:
        if time.monotonic() - start > args.budget_s:
            out.write(json.dumps(dict(stopped="budget", left=len(configs) - configs.index(c)))
                      + "\n")
            break
        try:
            rec = measure(c, amp=args.grid == "default")
        except torch.cuda.OutOfMemoryError as e:
            rec = dict(c, error="oom: " + str(e)[:120])
            torch.cuda.empty_cache()
        out.write(json.dumps(rec) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
