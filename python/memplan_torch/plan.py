"""Reads a memplan plan (`memplan plan MODEL ... --format json`) as the figures a run is held to."""

import json

from .trace import PHASES


class PlanError(ValueError):
    """A file that is not a memplan plan JSON document."""


def _bytes(obj, key, where):
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise PlanError(f"{where}: {key}: expected a byte count, got {v!r}")
    return v


def _peak(obj, where):
    """{"allocated", "reserved", "phases": {phase: {"allocated", "reserved"}}} of a plan peak."""
    out = {
        "allocated": _bytes(obj, "allocated_bytes", where),
        "reserved": _bytes(obj, "reserved_bytes", where),
        "phases": {},
    }
    for name, ph in (obj.get("phases") or {}).items():
        if name in PHASES:
            out["phases"][name] = {
                "allocated": _bytes(ph, "allocated_bytes", f"{where}: phases: {name}"),
                "reserved": _bytes(ph, "reserved_bytes", f"{where}: phases: {name}"),
            }
    return out


class PlanExpectation:
    """What a plan predicts per step and phase, and per module."""

    def __init__(self, doc, source="<plan>"):
        if not isinstance(doc, dict) or "peak" not in doc or "config" not in doc:
            raise PlanError(f"{source}: not a `memplan plan --format json` document")
        self.source = source
        self.model = doc.get("model", "")
        self.config = doc.get("config", {})
        self.peak = _peak(doc["peak"], "peak")
        self.first_step = _peak(doc["first_step"], "first_step") if "first_step" in doc else self.peak
        self.steady = _peak(doc["steady"], "steady") if "steady" in doc else self.peak
        self.modules = {}
        for i, m in enumerate(doc.get("modules") or []):
            where = f"modules[{i}]"
            name = m.get("module")
            if not isinstance(name, str):
                raise PlanError(f"{where}: module: expected a name")
            self.modules[name] = {
                "forward": _bytes(m, "forward_allocated_bytes", where),
                "backward": _bytes(m, "backward_allocated_bytes", where),
            }

    def for_step(self, index):
        """The prediction for step `index` (0 = the first step, which creates optimizer state)."""
        return self.first_step if index == 0 else self.steady

    def expected(self, index, phase):
        """(allocated, reserved) predicted for `phase` of step `index`; the step's peak when the
        plan has no per-phase figures."""
        p = self.for_step(index)
        ph = p["phases"].get(phase)
        if ph is None:
            return p["allocated"], p["reserved"]
        return ph["allocated"], ph["reserved"]


def load_plan(plan):
    """A PlanExpectation from a path, an open file, a dict or a PlanExpectation."""
    if isinstance(plan, PlanExpectation):
        return plan
    if isinstance(plan, dict):
        return PlanExpectation(plan)
    if hasattr(plan, "read"):
        return PlanExpectation(json.load(plan), getattr(plan, "name", "<plan>"))
    with open(plan) as f:
        try:
            doc = json.load(f)
        except json.JSONDecodeError as e:
            raise PlanError(f"{plan}: not JSON: {e}") from None
    return PlanExpectation(doc, str(plan))
