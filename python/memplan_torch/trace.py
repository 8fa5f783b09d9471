"""The memplan trace file: what a run measured, as JSON (schema in docs/trace-schema.md)."""

import json
import os
import tempfile

SCHEMA = "memplan-trace"
VERSION = 1
PHASES = ("forward", "backward", "optimizer")
SAMPLE_COLUMNS = ("seconds", "phase", "peak_allocated", "allocated", "reserved")
MODULE_KEYS = ("forward", "backward", "forward_rise", "forward_kept", "backward_rise")


class TraceError(ValueError):
    """A file that is not a memplan trace of a version this package reads."""


def new_trace(producer, device=None, torch_version="", allocator_conf=""):
    """An empty trace document."""
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "producer": producer,
        "torch_version": torch_version,
        "device": device or {"index": 0, "name": "", "total_bytes": 0},
        "allocator_conf": allocator_conf,
        "sample_columns": list(SAMPLE_COLUMNS),
        "steps": [],
        "leaks": [],
        "empty_cache": [],
        "plan": None,
        "warnings": [],
    }


def _require_int(where, obj, key):
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise TraceError(f"{where}: {key}: expected a byte count (integer >= 0), got {v!r}")
    return v


def validate(doc):
    """Raises TraceError when `doc` is not a readable trace; returns it otherwise."""
    if not isinstance(doc, dict):
        raise TraceError("not a JSON object")
    if doc.get("schema") != SCHEMA:
        raise TraceError(f"schema: expected {SCHEMA!r}, got {doc.get('schema')!r}")
    if doc.get("version") != VERSION:
        raise TraceError(f"version: this package reads version {VERSION}, got {doc.get('version')!r}")
    steps = doc.get("steps")
    if not isinstance(steps, list) or not steps:
        raise TraceError("steps: expected a non-empty list")
    for i, s in enumerate(steps):
        where = f"steps[{i}]"
        if not isinstance(s, dict):
            raise TraceError(f"{where}: expected an object")
        for key in ("peak_allocated", "peak_reserved"):
            _require_int(where, s, key)
        phases = s.get("phases", {})
        if not isinstance(phases, dict):
            raise TraceError(f"{where}: phases: expected an object")
        for name, ph in phases.items():
            if name not in PHASES:
                raise TraceError(f"{where}: phases: unknown phase {name!r}")
            for key in ("peak_allocated", "peak_reserved"):
                _require_int(f"{where}: phases: {name}", ph, key)
        mods = s.get("modules", {})
        if not isinstance(mods, dict):
            raise TraceError(f"{where}: modules: expected an object")
        for name, m in mods.items():
            if not isinstance(m, dict):
                raise TraceError(f"{where}: modules: {name}: expected an object")
            for key, v in m.items():
                if key not in MODULE_KEYS:
                    raise TraceError(f"{where}: modules: {name}: unknown figure {key!r}")
                if key == "forward_kept":
                    if isinstance(v, bool) or not isinstance(v, int):
                        raise TraceError(f"{where}: modules: {name}: forward_kept: expected an "
                                         f"integer, got {v!r}")
                else:
                    _require_int(f"{where}: modules: {name}", m, key)
    return doc


def write(doc, path):
    """Writes `doc` to `path` atomically (a temporary file renamed over it)."""
    validate(doc)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".trace-", suffix=".json", dir=d)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # as open() would create it, not mkstemp's 0600
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read(path):
    """Reads and validates a trace file."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except json.JSONDecodeError as e:
        raise TraceError(f"not JSON: {e}") from None
    return validate(doc)
