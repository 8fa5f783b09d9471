#!/usr/bin/env python3
"""Fits cuDNN's RNN workspace sizes measured by bench/cudnn_rnn_probe.py and
checks the reserve-space rule of planner/rnn.cc against every measured call.

Usage: python3 bench/cudnn_rnn_fit.py [bench/results/cudnn_rnn_probe_h200.jsonl]

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


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "results", "cudnn_rnn_probe_h200.jsonl")
    lines = [json.loads(l) for l in open(path)]
    print(lines[0])
    rows = []
    for r in lines[1:]:
        if "error" in r:
            continue
        allocs = [e for e in r["fwd"] if e[0] == "alloc"]
        freed = {e[2] for e in r["fwd"] if e[0] == "free"}
        r["ws"] = max(e[1] for e in allocs if e[2] in freed)
        r["ws_inf"] = max(e[1] for e in r["inf"] if e[0] == "alloc")
        r["reserve"] = allocs[-1][1]
        rows.append(r)
        # The same shape under autocast (amp_fwd): a bf16 call, the flat
        # bf16 weight copy allocated before it.
        if r.get("amp_fwd") and r["dtype"] == "fp32":
            a = dict(r, dtype="bf16", ws_inf=None)
            al = [e for e in r["amp_fwd"] if e[0] == "alloc"]
            fr = {e[2] for e in r["amp_fwd"] if e[0] == "free"}
            a["ws"] = max(e[1] for e in al if e[2] in fr)
            a["reserve"] = al[-1][1]
            rows.append(a)
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
