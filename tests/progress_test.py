#!/usr/bin/env python3
"""Progress on stderr: drawn when stderr is a terminal, never when it is a pipe.

Usage: progress_test.py MEMPLAN_BINARY MODELS_DIR

`advise` and `check` run once with stderr piped (no progress line, no
carriage return, in text or JSON) and once with stderr on a pseudo-terminal
(pty module) and stdout piped: the progress line is drawn and erased on the
terminal, and stdout (JSON) stays clean. MEMPLAN_PROGRESS_DELAY_MS=0 draws
from the first plan, so that a small model shows it too.
"""

import json
import os
import re
import pty
import select
import subprocess
import sys

BIN, MODELS = sys.argv[1], sys.argv[2]
MODEL = os.path.join(MODELS, "resnet18_train.onnx")
ENV = dict(os.environ, MEMPLAN_PROGRESS_DELAY_MS="0")
failures = 0


def check(name, ok, detail=""):
    global failures
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    failures += 0 if ok else 1


def piped(args):
    return subprocess.run([BIN] + args, capture_output=True, text=True, env=ENV, timeout=300)


def on_terminal(args):
    """Runs with stderr on a pty; returns (exit code, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([BIN] + args, stdout=subprocess.PIPE, stderr=slave, env=ENV)
    os.close(slave)
    got = b""
    out = b""
    while True:
        r, _, _ = select.select([master, p.stdout], [], [], 300)
        if not r:
            break
        if master in r:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                chunk = b""
            got += chunk
        if p.stdout in r:
            chunk = p.stdout.read1(65536)
            if not chunk and p.poll() is not None:
                break
            out += chunk
    p.wait(timeout=300)
    os.close(master)
    return p.returncode, out.decode(), got.decode(errors="replace")


ADVISE = ["advise", MODEL, "--budget", "24GiB", "--precision", "amp_bf16"]
CHECK = ["check", MODEL, "--batch", "8", "--budget", "24GiB"]

for fmt in ([], ["--format", "json"]):
    r = piped(ADVISE + fmt)
    label = "advise " + (" ".join(fmt) or "table")
    check(label + " piped: exit 0", r.returncode == 0, r.stderr)
    check(label + " piped: no progress on stderr", "\r" not in r.stderr and "plans;" not in r.stderr,
          repr(r.stderr[:200]))
    check(label + " piped: none on stdout", "\r" not in r.stdout and "plans;" not in r.stdout)

r = piped(CHECK)
check("check piped: no progress", "\r" not in r.stderr and "[1/1]" not in r.stderr, repr(r.stderr))

code, out, term = on_terminal(ADVISE + ["--format", "json"])
check("advise on a terminal: exit 0", code == 0, term[-300:])
# The line is redrawn at most every so often: a fast search may draw it once ("1 plan").
check("advise on a terminal: progress drawn",
      re.search(r"advise: \d+ plans?; amp_bf16", term) is not None, repr(term[:300]))
check("advise on a terminal: the line is erased", term.endswith("\r\033[K") or "\r\033[K" in term,
      repr(term[-100:]))
try:
    doc = json.loads(out)
    check("advise on a terminal: stdout is clean JSON", doc["recommendation"]["batch"] > 0)
except (ValueError, KeyError, TypeError) as e:
    check("advise on a terminal: stdout is clean JSON", False, str(e) + repr(out[:200]))

code, out, term = on_terminal(CHECK)
check("check on a terminal: progress drawn", "[1/1] resnet18_train.onnx batch 8" in term,
      repr(term[:300]))
check("check on a terminal: stdout has no progress", "\r" not in out, repr(out[:200]))

sys.exit(1 if failures else 0)
