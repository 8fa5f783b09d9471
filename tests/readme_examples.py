#!/usr/bin/env python3
"""The README's examples are the tool's real output.

Every ```text block of README.md whose first line is `$ memplan ...` (a
command that needs no GPU) is run from the repository root with the built
binary, and the rest of the block must equal what it prints. With --update
the blocks are rewritten from the output instead (then review the diff).

Usage: readme_examples.py MEMPLAN_BINARY REPO_ROOT [--update]
"""
import re
import shlex
import subprocess
import sys

GPU_COMMANDS = {"probe", "validate"}


def main():
    binary, root = sys.argv[1], sys.argv[2]
    update = "--update" in sys.argv[3:]
    path = root + "/README.md"
    text = open(path, encoding="utf-8").read()
    block = re.compile(r"```text\n(\$ memplan [^\n]*)\n(.*?)```", re.S)
    failures, checked = 0, 0
    out_text, last = [], 0
    for m in block.finditer(text):
        command, shown = m.group(1), m.group(2)
        argv = shlex.split(command[2:].split("  #")[0])
        if argv[1] in GPU_COMMANDS:
            continue
        run = subprocess.run([binary] + argv[1:], cwd=root, capture_output=True, text=True)
        got = run.stdout
        checked += 1
        if update:
            out_text.append(text[last:m.start(2)] + got)
            last = m.end(2)
        elif got != shown:
            failures += 1
            print(f"FAIL: README example '{command}' differs from the output:")
            for a, b in zip(shown.splitlines() + [""] * 99, got.splitlines()):
                if a != b:
                    print(f"  README: {a!r}\n  output: {b!r}")
                    break
        else:
            print(f"ok: README example '{command}'")
    if update:
        open(path, "w", encoding="utf-8").write("".join(out_text) + text[last:])
        print(f"updated {checked} example(s)")
        return 0
    if checked == 0:
        print("FAIL: no README example found")
        return 1
    print(f"{checked} example(s), {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
