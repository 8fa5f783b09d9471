#!/usr/bin/env python3
"""Op names live in planner/ops/ only.

Every fact about an op is a field of its OpDef (planner/op_registry.h), set
where the op is registered (planner/ops/*.cc). Outside planner/ops/ the
planner reads those fields and never compares an op's name: this script
fails on a string literal in planner/ (tests aside) that is the name of a
registered op. The graph pattern matchers (attention.cc, fusion.cc,
rnn.cc) read OpDef fields for the families they walk through and name the
single ops they look for with planner/ops/op_names.h.

Usage: op_names_rule.py REPO_ROOT
"""
import os
import re
import sys

LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
REGISTER = re.compile(r"void Register\w+Ops\(OpTable\* t\) \{(.*?)\n\}\n", re.S)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def registered_names(root):
    names = set()
    ops = os.path.join(root, "planner", "ops")
    for f in sorted(os.listdir(ops)):
        if not f.endswith(".cc") or f.endswith("_test.cc"):
            continue
        text = strip_comments(open(os.path.join(ops, f), encoding="utf-8").read())
        for body in REGISTER.findall(text):
            names.update(n for n in LITERAL.findall(body) if re.fullmatch(r"[A-Z][A-Za-z0-9]*", n))
    return names


def main(root):
    names = registered_names(root)
    if len(names) < 100:
        print(f"FAIL: found only {len(names)} registered op names: the scan is broken")
        return 1
    errors = []
    for base, _, files in os.walk(os.path.join(root, "planner")):
        rel_base = os.path.relpath(base, root)
        if rel_base == os.path.join("planner", "ops"):
            continue
        for f in sorted(files):
            rel = os.path.join(rel_base, f)
            if not f.endswith((".h", ".cc")) or f.endswith("_test.cc"):
                continue
            text = strip_comments(open(os.path.join(root, rel), encoding="utf-8").read())
            for lit in LITERAL.findall(text):
                if lit in names:
                    errors.append(f'{rel}: "{lit}" is a registered op name: read an OpDef field '
                                  "(planner/op_registry.h) or use planner/ops/op_names.h")
    for e in errors:
        print("FAIL:", e)
    if errors:
        print(f"{len(errors)} op name(s) outside planner/ops/")
        return 1
    print(f"no op names outside planner/ops/ ({len(names)} registered ops scanned)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
