#!/usr/bin/env python3
"""Fits cuDNN's RNN workspace sizes measured by bench/cudnn_rnn_probe.py and
checks the reserve-space rule of planner/rnn.cc against every measured call.

Usage: python3 bench/cudnn_rnn_fit.py [PROBE.jsonl] [--derived]
(default bench/results/cudnn_rnn_probe_h200.jsonl; also reads the records of
cudnn_rnn_probe.py --grid mechanism, bench/results/cudnn_rnn_mechanism_h200.jsonl)

--derived instead checks planner/rnn.cc's derivation of the standard
algorithm's workspace (derived_workspace below, the same terms) against every
measured call PyTorch runs with that algorithm: per mode (inference,
training forward, backward), how many calls it gives exactly, and the others
with their error, marked when the C++ rule hands them to the fit.

Per call the probe's events give: the workspace (the largest allocation the
training forward frees inside the call; backward data and weights take the
same size), the inference workspace (eval forward), and the reserve space
(the last allocation of the training forward, kept for backward); each
fp32 call's autocast run (amp_fwd) is a bf16 sample of the training
workspace as well. The
workspace holds a copy of the weights (in the input dtype) plus terms in the
sizes; the coefficients are a least-squares fit per mode over all measured shapes
(residuals weighted by 1/sqrt(size)), printed with the errors they leave.
"""
import json
import os
import sys

import numpy as np

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
RESERVE_PER_UNIT = {"LSTM": 6, "GRU": 7, "RNN": 2}
FEATURES = ["const", "gates", "units_layers", "units_dirs", "states"]


def sizes(r):
    T, B, H, I, L, d = r["seq"], r["batch"], r["hidden"], r["input"], r["layers"], r["dirs"]
    g = GATES[r["mode"]]
    e = 4 if r["dtype"] == "fp32" else 2
    weights = (g * H * (I + H + 2) * d + (L - 1) * g * H * (d * H + H + 2) * d) * e
    feats = dict(const=1, gates=min(T, 256) * B * g * H * d * d * 4,
                 units_layers=T * B * H * d * L * e, units_dirs=T * B * H * d * d * e,
                 states=B * H * d * L * 4)
    return weights, [feats[k] for k in FEATURES]


def reserve(r):
    T, B, H, L, d = r["seq"], r["batch"], r["hidden"], r["layers"], r["dirs"]
    e = 4 if r["dtype"] == "fp32" else 2
    unit = T * B * H
    out = (RESERVE_PER_UNIT[r["mode"]] * L - 1) * d * unit * e + 256
    if r["dropout"] > 0 and L > 1:
        chunk = (d * unit + 7) // 8
        out += (L - 1) * d * ((chunk + 31) // 32 * 32)
    return out


PER_LAYER = {"LSTM": (10, 8), "GRU": (5, 6), "RNN": (3, 2)}
MIB = 1 << 20


def algo(r, forward):
    """PyTorch's get_algo for an unpacked input on the H200 (planner/rnn.cc RnnAlgoOf)."""
    h, mode = r["hidden"], r["mode"]
    rnn = mode == "RNN"
    if h <= ((384 if rnn else 192) if forward else (256 if rnn else 128)):
        return "PERSIST_STATIC_SMALL_H"
    if (r["dtype"] == "fp16" and r["layers"] == 1 and r["dirs"] == 1 and h <= 1024 and
            h % 128 == 0 and r["input"] % 128 == 0 and mode != "GRU" and r["batch"] % 8 == 0 and
            r["batch"] <= 128 and (not rnn or r["batch"] < 96 or h < 896)):
        return "PERSIST_STATIC"
    return "STANDARD"


def covered(r, train):
    """Whether planner/rnn.cc uses the derivation (else the fit) for the call."""
    if not train:
        return True
    return (r["mode"] != "RNN" and r["input"] <= r["hidden"] and
            not (r["dirs"] == 1 and r["seq"] > 256) and
            not (r["layers"] == 1 and r["dirs"] == 1 and r["dtype"] != "fp32"))


def derived_workspace(r, train):
    """planner/rnn.cc's standard-algorithm workspace, term by term."""
    T, B, H, I, L, d = r["seq"], r["batch"], r["hidden"], r["input"], r["layers"], r["dirs"]
    e = 4 if r["dtype"] == "fp32" else 2
    g = GATES[r["mode"]]
    a, b = PER_LAYER[r["mode"]]
    weights = (g * H * (I + H + 2) * d + (L - 1) * g * H * (d * H + H + 2) * d) * e
    tc = min(T, 256) if d == 1 else T
    ws = weights + 8 * MIB * L * d + T * B * I * e
    ws += d * (g * tc + T) * B * H * e + (d - 1) * 4 * T * B * H * e
    ws += L * (d * (a * B - b) + (d - 1) * 4 * B) * H * e
    ws += 2 * ((4 * B + 15) // 16 * 16) + 256
    if train:
        if d == 1:
            drop = T * B * H * e if r["dropout"] > 0 else 0
            ws += max(drop, T * B * I * e if r["mode"] == "GRU" and L == 1 else 0)
        if d == 2 and L >= 2 and r["mode"] == "GRU":
            ws += T * B * I * e
    return ws


def check_derived(rows):
    for phase, key, train, forward in (("inference", "ws_inf", False, True),
                                       ("training forward", "ws", True, True),
                                       ("backward", "ws_bwd", True, False)):
        sel = [r for r in rows if r.get(key) is not None and algo(r, forward) == "STANDARD"]
        exact = [r for r in sel if derived_workspace(r, train) == r[key]]
        cov = [r for r in sel if covered(r, train)]
        cov_exact = [r for r in exact if covered(r, train)]
        print(f"{phase}: {len(exact)} of {len(sel)} standard-algorithm calls exact; "
              f"of the {len(cov)} the C++ rule derives, {len(cov_exact)} exact")
        for r in sel:
            p, m = derived_workspace(r, train), r[key]
            if p == m:
                continue
            print(f"  {r['mode']:4} L{r['layers']} d{r['dirs']} T{r['seq']:4} B{r['batch']:5} "
                  f"H{r['hidden']:5} I{r['input']:5} {r['dtype']:5} drop {r['dropout']:.2f}: "
                  f"measured {m:12,d} derived {p:12,d} ({(p - m) / m * 100:+.2f} %)"
                  f"{'' if covered(r, train) else '  [fitted in planner/rnn.cc]'}")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    path = args[0] if args else os.path.join(
        os.path.dirname(__file__), "results", "cudnn_rnn_probe_h200.jsonl")
    lines = [json.loads(l) for l in open(path)]
    print(lines[0])
    rows = []
    for r in lines[1:]:
        if "error" in r or "fwd" not in r:
            continue
        allocs = [e for e in r["fwd"] if e[0] == "alloc"]
        freed = {e[2] for e in r["fwd"] if e[0] == "free"}
        r["ws"] = max(e[1] for e in allocs if e[2] in freed)
        r["ws_inf"] = max(e[1] for e in r["inf"] if e[0] == "alloc")
        r["reserve"] = allocs[-1][1]
        # Both backward calls allocate a workspace of one size: the largest
        # size the backward allocates twice and frees.
        bsizes = [e[1] for e in r["bwd"] if e[0] == "alloc"]
        twice = [x for x in set(bsizes) if bsizes.count(x) >= 2 and x >= 1 << 20]
        r["ws_bwd"] = max(twice) if twice else None
        rows.append(r)
        # The same shape under autocast (amp_fwd): a bf16 call, the flat
        # bf16 weight copy allocated before it.
        if r.get("amp_fwd") and r["dtype"] == "fp32":
            a = dict(r, dtype="bf16", ws_inf=None)
            al = [e for e in r["amp_fwd"] if e[0] == "alloc"]
            fr = {e[2] for e in r["amp_fwd"] if e[0] == "free"}
            a["ws"] = max(e[1] for e in al if e[2] in fr)
            a["reserve"] = al[-1][1]
            bs = [e[1] for e in r["amp_bwd"] if e[0] == "alloc"]
            tw = [x for x in set(bs) if bs.count(x) >= 2 and x >= 1 << 20]
            a["ws_bwd"] = max(tw) if tw else None
            rows.append(a)
    if "--derived" in sys.argv:
        check_derived(rows)
        return
    bad = [r for r in rows if reserve(r) != r["reserve"]]
    print(f"reserve rule: {len(rows) - len(bad)} of {len(rows)} calls exact")
    for mode in GATES:
        for target in ("ws", "ws_inf"):
            sel = [r for r in rows if r["mode"] == mode and r[target] is not None]
            w = np.array([sizes(r)[0] for r in sel], float)
            x = np.array([sizes(r)[1] for r in sel], float)
            y = np.array([r[target] for r in sel], float)
            # Residuals weighted by 1/sqrt(size): relative for small calls,
            # closer to absolute bytes for the large ones that decide peaks.
            wt = 1 / np.sqrt(y)
            coef = np.linalg.lstsq(x * wt[:, None], (y - w) * wt, rcond=None)[0]
            err = np.abs((w + x @ coef - y) / y) * 100
            big = y > 1e8
            print(f"{mode:5} {target:6} n={len(sel)} " +
                  " ".join(f"{k}={c:.4g}" for k, c in zip(FEATURES, coef)) +
                  f"  error median {np.median(err):.1f}% worst {err.max():.1f}%;"
                  f" over 100 MB (n={big.sum()}) median {np.median(err[big]):.1f}%"
                  f" worst {err[big].max():.1f}%")


if __name__ == "__main__":
    main()
