"""Monitor: watches a PyTorch training (or inference) loop's GPU memory per step, phase and module.

How it measures. At every boundary it sees (a module's forward starting or ending, a gradient
reaching a module's output or inputs, backward starting or returning, the optimizer step, the end
of a step) it reads torch.cuda.max_memory_allocated() and max_memory_reserved(), which hold the
peak since the previous boundary, and resets them (reset_peak_memory_stats). The peak of a step,
a phase or a module call is the largest of the intervals it spans, so the step's peak is exactly
what max_memory_allocated() would report had it been reset only at the step's start. While the
monitor runs it owns those peak counters: read peaks from the monitor, not from torch.

Phases: forward runs from the step's start (or the model's forward starting) to
torch.autograd.backward being called (Tensor.backward, GradScaler and Lightning all go through
it), backward until it returns, optimizer from there (gradient clipping, optimizer.step,
zero_grad) to the step's end. With gradient accumulation a step has several forward and backward
intervals; a phase's peak is the largest of them.

A module's forward is its call (forward pre-hook to forward hook). Its backward starts when the
gradient of one of its outputs is ready (a tensor hook) and ends when the gradients of all its
inputs that need one are complete (tensor hooks), or, for a module without such inputs (the
first layer, an embedding), when its parameters' gradients are accumulated; anything still open
when backward returns ends then. A module recomputed by torch.utils.checkpoint during backward
counts the recomputation in its backward.
"""

import logging
import os
import time
import warnings

from . import trace as trace_mod
from .plan import load_plan

__version__ = "0.1.0"
log = logging.getLogger("memplan_torch")

_F, _B, _O = trace_mod.PHASES


class MemplanWarning(UserWarning):
    """The run exceeded its plan, or memory is leaking."""


def _torch():
    import torch  # imported at run time only: the package itself does not need torch

    return torch


def _tensors(obj, depth=0):
    """The tensors in a module's inputs or outputs (tensors, tuples, lists, dicts, ModelOutput)."""
    torch = _torch()
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth < 3:
        if isinstance(obj, dict):
            obj = obj.values()
        elif not isinstance(obj, (tuple, list)):
            return
        for x in obj:
            yield from _tensors(x, depth + 1)


class EmptyCachePolicy:
    """Releases the allocator's cached blocks (torch.cuda.empty_cache()) at phase boundaries when
    memory_reserved() passes `share` of the device's memory. Every release is recorded: what it
    freed, how long it took, and the steps after it are timed like the others, so the trace says
    what the policy bought and what it cost."""

    def __init__(self, share=0.9):
        if not 0.0 < share <= 1.0:
            raise ValueError("share: expected a fraction of the device in (0, 1]")
        self.share = share


class _Call:
    """One call of a module, followed through backward."""

    __slots__ = ("name", "pending_inputs", "pending_params", "opened", "closed")

    def __init__(self, name, pending_inputs, pending_params):
        self.name = name
        self.pending_inputs = pending_inputs
        self.pending_params = pending_params
        self.opened = False
        self.closed = False


class Monitor:
    """Records memory per step and phase (and per module) of a PyTorch loop.

    Use it as a context manager around the loop and call step() at the end of each iteration:

        with memplan_torch.Monitor(model, optimizer, plan="plan.json", trace="run.json") as mon:
            for batch in loader:
                ...forward, backward, optimizer.step(), zero_grad()...
                mon.step()

    Arguments:
      model: the nn.Module (its submodules get hooks; None: phases only).
      optimizer: a torch.optim.Optimizer (step hooks mark the optimizer phase), or None.
      modules: True (every submodule), False (none), an int (submodules up to that depth),
        or a list of module names.
      prefix: prepended to module names, so they match the plan's (e.g. "m." when the ONNX
        export wrapped the model in a module with attribute `m`).
      plan: a `memplan plan --format json` file (or dict) to hold the run to; margin: the share
        above the predicted peak of a phase that warns (0.10 = 10 %).
      trace: path of the trace file written on close().
      leak_steps, leak_min_bytes: a leak is reported when memory_allocated() after the step grew
        by at least leak_min_bytes in each of the last leak_steps steps.
      probe_empty_cache: None, or where to measure what empty_cache() returns: "step_end",
        "forward_end", "backward_end" (it calls empty_cache() there, every probe_every steps;
        this changes the run after it: the next allocations go to cudaMalloc again).
      policy: an EmptyCachePolicy, or None.
      sync: torch.cuda.synchronize() at the end of each step, so its time is the GPU's.
      samples: keep a sample per boundary (for the timeline): True, or False.
      on_warning: called with each warning's dict.
    """

    def __init__(self, model=None, optimizer=None, *, device=None, modules=True, prefix="",
                 plan=None, margin=0.10, trace=None, leak_steps=2, leak_min_bytes=1 << 20,
                 probe_empty_cache=None, probe_every=1, policy=None, sync=True, samples=True,
                 on_warning=None):
        if probe_empty_cache not in (None, "step_end", "forward_end", "backward_end"):
            raise ValueError("probe_empty_cache: expected None, 'step_end', 'forward_end' or "
                             "'backward_end'")
        if leak_steps < 1:
            raise ValueError("leak_steps: expected >= 1")
        self.model = model
        self.optimizer = optimizer
        self._device_arg = device
        self._modules_arg = modules
        self.prefix = prefix
        self.plan = load_plan(plan) if plan is not None else None
        self.margin = margin
        self.trace_path = trace
        self.leak_steps = leak_steps
        self.leak_min_bytes = leak_min_bytes
        self.probe = probe_empty_cache
        self.probe_every = max(1, int(probe_every))
        self.policy = policy
        self.sync = sync
        self.keep_samples = samples
        self.on_warning = on_warning
        self._handles = []
        self._started = False
        self._closed = False
        self.trace = None

    # ---- lifecycle ----

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    def start(self):
        """Installs the hooks and begins the first step."""
        if self._started:
            return self
        torch = _torch()
        self._cuda = torch.cuda
        dev = self._device_arg
        if dev is None:
            dev = torch.cuda.current_device()
        elif not isinstance(dev, int):
            dev = torch.device(dev).index or 0
        self.device = dev
        free, total = torch.cuda.mem_get_info(dev)
        self.device_total = total
        name = torch.cuda.get_device_name(dev) if hasattr(torch.cuda, "get_device_name") else ""
        self.trace = trace_mod.new_trace(
            f"memplan_torch {__version__}",
            {"index": dev, "name": name, "total_bytes": int(total)},
            getattr(torch, "__version__", ""),
            os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        )
        if self.plan is not None:
            self.trace["plan"] = {"file": self.plan.source, "margin": self.margin}
        self._warned = set()
        self._leak = None
        self._open = {}  # (module, phase) -> open calls: [allocated at start, peak since]
        self._cur_alloc = 0
        self._calls_by_param = {}  # id(param) -> list of _Call waiting for it
        self._pending_calls = []
        self._bw_depth = 0
        self._stats = self._stats_reader(torch, dev)
        self._install(torch)
        self._started = True
        self._begin_step()
        return self

    def close(self):
        """Ends the last step, removes the hooks and writes the trace (when a path was given).
        Returns the trace document."""
        if not self._started or self._closed:
            return self.trace
        self._end_step(final=True)
        for h in self._handles:
            h.remove()
        self._handles = []
        torch = _torch()
        if getattr(torch.autograd, "backward", None) is self._backward_wrapper:
            torch.autograd.backward = self._orig_backward
        self._closed = True
        if self.trace_path:
            trace_mod.write(self.trace, self.trace_path)
        return self.trace

    # ---- hooks ----

    def _module_names(self):
        if self.model is None or self._modules_arg is False:
            return []
        named = [(n, m) for n, m in self.model.named_modules() if n]
        arg = self._modules_arg
        if arg is True:
            return named
        if isinstance(arg, int):
            return [(n, m) for n, m in named if n.count(".") < arg]
        wanted = set(arg)
        found = [(n, m) for n, m in named if n in wanted]
        missing = wanted - {n for n, _ in found}
        if missing:
            raise ValueError(f"modules: not in the model: {', '.join(sorted(missing))}")
        return found

    def _install(self, torch):
        if self.model is not None:
            self._handles.append(self.model.register_forward_pre_hook(self._root_pre))
        self._params_of = {}
        for name, mod in self._module_names():
            full = self.prefix + name
            self._handles.append(mod.register_forward_pre_hook(self._make_pre(full)))
            self._handles.append(mod.register_forward_hook(self._make_post(full)))
            self._params_of[full] = [p for p in mod.parameters() if p.requires_grad]
        seen = set()
        for plist in self._params_of.values():
            for p in plist:
                if id(p) in seen or not hasattr(p, "register_post_accumulate_grad_hook"):
                    continue
                seen.add(id(p))
                self._handles.append(p.register_post_accumulate_grad_hook(self._make_param_hook()))
        if self.optimizer is not None:
            self._handles.append(self.optimizer.register_step_pre_hook(self._opt_pre))
            self._handles.append(self.optimizer.register_step_post_hook(self._opt_post))
        self._orig_backward = torch.autograd.backward
        orig = self._orig_backward
        mon = self

        def backward_wrapper(*args, **kwargs):
            # Only the outermost call is the backward phase (reentrant checkpointing calls
            # torch.autograd.backward inside backward).
            mon._bw_depth += 1
            if mon._bw_depth == 1:
                mon._enter_backward()
            try:
                return orig(*args, **kwargs)
            finally:
                mon._bw_depth -= 1
                if mon._bw_depth == 0:
                    mon._leave_backward()

        self._backward_wrapper = backward_wrapper
        torch.autograd.backward = backward_wrapper

    def _make_pre(self, name):
        def pre(module, args):
            self._tick(name)
            self._push((name, _B if self._phase == _B else _F))

        return pre

    def _make_post(self, name):
        def post(module, args, output):
            self._tick(name)
            in_backward = self._phase == _B
            self._pop((name, _B if in_backward else _F))
            torch = _torch()
            if in_backward or not torch.is_grad_enabled():
                return  # a recomputation (checkpoint) or no graph
            outs = [t for t in _tensors(output) if t.requires_grad]
            if not outs:
                return
            ins = [t for t in _tensors(args) if t.requires_grad]
            params = self._params_of.get(name, [])
            call = _Call(name, len(ins), 0 if ins else len(params))
            for t in outs:
                t.register_hook(lambda g, c=call: self._output_grad(c))
            for t in ins:
                t.register_hook(lambda g, c=call: self._input_grad(c))
            if not ins:
                for p in params:
                    self._calls_by_param.setdefault(id(p), []).append(call)
            self._pending_calls.append(call)

        return post

    def _make_param_hook(self):
        def hook(p):
            calls = self._calls_by_param.pop(id(p), None)
            if not calls:
                return
            self._tick("grad accumulated")
            for c in calls:
                c.pending_params -= 1
                if c.pending_params <= 0:
                    self._close_call(c)

        return hook

    def _output_grad(self, call):
        if self._phase != _B:
            self._set_phase(_B, "first gradient")
        self._tick(call.name)
        if not call.opened and not call.closed:
            call.opened = True
            self._push((call.name, _B))
            if call.pending_inputs == 0 and call.pending_params == 0:
                self._close_call(call)

    def _input_grad(self, call):
        self._tick(call.name)
        call.pending_inputs -= 1
        if call.pending_inputs <= 0:
            self._close_call(call)

    def _close_call(self, call):
        if call.closed:
            return
        call.closed = True
        if call.opened:
            self._pop((call.name, _B))

    def _push(self, key):
        self._open.setdefault(key, []).append([self._cur_alloc, self._cur_alloc])

    def _pop(self, key):
        """Ends the innermost open call of `key`: its rise above its start and (forward) what it
        kept go to the module's figures."""
        frames = self._open.get(key)
        if not frames:
            return
        entry, peak = frames.pop()
        if not frames:
            del self._open[key]
        name, phase = key
        m = self._step["modules"].setdefault(name, {})
        rk = phase + "_rise"
        m[rk] = max(m.get(rk, 0), peak - entry)
        if phase == _F:
            m["forward_kept"] = m.get("forward_kept", 0) + self._cur_alloc - entry

    def _root_pre(self, module, args):
        if self._phase != _F:
            self._set_phase(_F, "forward")

    def _enter_backward(self):
        self._set_phase(_B, "backward")

    def _leave_backward(self):
        self._tick("backward returned")
        for c in self._pending_calls:
            self._close_call(c)
        self._pending_calls = []
        self._calls_by_param = {}
        for key in [k for k in self._open if k[1] == _B]:
            while key in self._open:
                self._pop(key)
        self._maybe_probe("backward_end")
        self._set_phase(_O, "backward returned")

    def _opt_pre(self, optimizer, args, kwargs):
        if self._phase != _O:
            self._set_phase(_O, "optimizer.step")
        else:
            self._tick("optimizer.step")

    def _opt_post(self, optimizer, args, kwargs):
        self._tick("optimizer.step done")

    # ---- measurement ----

    def _stats_reader(self, torch, dev):
        """A function returning (peak allocated, peak reserved, allocated, reserved) and resetting
        the peaks. torch.cuda.max_memory_allocated() and its kin each build the whole statistics
        dict in Python (~0.1 ms); the allocator's own nested statistics give all four in one
        call. That one is used when it agrees with the public functions here."""
        c = torch.cuda

        def public():
            v = (c.max_memory_allocated(dev), c.max_memory_reserved(dev),
                 c.memory_allocated(dev), c.memory_reserved(dev))
            c.reset_peak_memory_stats(dev)
            return v

        raw = getattr(getattr(torch, "_C", None), "_cuda_memoryStats", None)
        reset = getattr(getattr(torch, "_C", None), "_cuda_resetPeakMemoryStats", None)
        if raw is None or reset is None:
            return public
        try:
            s = raw(dev)
            ok = (s["allocated_bytes"]["all"]["current"] == c.memory_allocated(dev)
                  and s["reserved_bytes"]["all"]["current"] == c.memory_reserved(dev)
                  and s["allocated_bytes"]["all"]["peak"] == c.max_memory_allocated(dev))
        except (KeyError, TypeError, RuntimeError):
            ok = False
        if not ok:
            return public

        def fast():
            s = raw(dev)
            a = s["allocated_bytes"]["all"]
            r = s["reserved_bytes"]["all"]
            reset(dev)
            return a["peak"], r["peak"], a["current"], r["current"]

        return fast

    def _tick(self, label=""):
        """Closes the interval since the previous boundary: its peaks go to the step, the phase
        and every open module; the peak counters restart from the current values."""
        pa, pr, ca, cr = self._stats()
        st = self._step
        self._events += 1
        if pa > st["peak_allocated"]:
            st["peak_allocated"] = pa
        if pr > st["peak_reserved"]:
            st["peak_reserved"] = pr
        ph = st["phases"].setdefault(self._phase, {"peak_allocated": 0, "peak_reserved": 0})
        if pa > ph["peak_allocated"]:
            ph["peak_allocated"] = pa
        if pr > ph["peak_reserved"]:
            ph["peak_reserved"] = pr
        mods = st["modules"]
        for (name, phase), frames in self._open.items():
            m = mods.setdefault(name, {})
            if pa > m.get(phase, 0):
                m[phase] = pa
            for f in frames:
                if pa > f[1]:
                    f[1] = pa
        self._cur_alloc = ca
        if self.keep_samples:
            st["samples"].append([round(time.perf_counter() - self._t0, 6), self._phase, pa, ca,
                                  cr])
        if self.plan is not None:
            self._check_plan(self._phase, ph)
        return pa, pr

    def _set_phase(self, phase, label):
        self._tick(label)
        old = self._phase
        ph = self._step["phases"].get(old)
        now = time.perf_counter()
        if ph is not None:
            ph["allocated_end"] = self._cuda.memory_allocated(self.device)
            ph["reserved_end"] = self._cuda.memory_reserved(self.device)
            ph["seconds"] = round(ph.get("seconds", 0.0) + now - self._phase_t0, 6)
        if old == _F and phase != _F:
            self._maybe_probe("forward_end")
        self._apply_policy(f"{old} end")
        self._phase = phase
        self._phase_t0 = now
        self._step["phases"].setdefault(phase, {"peak_allocated": 0, "peak_reserved": 0})

    def _begin_step(self):
        c = self._cuda
        d = self.device
        c.reset_peak_memory_stats(d)
        self._t0 = self._phase_t0 = time.perf_counter()
        self._phase = _F
        self._events = 0
        self._cur_alloc = c.memory_allocated(d)
        self._step = {
            "step": len(self.trace["steps"]),
            "allocated_start": c.memory_allocated(d),
            "reserved_start": c.memory_reserved(d),
            "peak_allocated": c.max_memory_allocated(d),
            "peak_reserved": c.max_memory_reserved(d),
            "phases": {},
            "modules": {},
            "samples": [],
        }

    def _end_step(self, final=False):
        c = self._cuda
        d = self.device
        if final and self._events == 0:
            return  # step() was called after the last iteration: nothing ran since
        if self.sync:
            c.synchronize(d)
        self._tick("step end")
        st = self._step
        now = time.perf_counter()
        ph = st["phases"].setdefault(self._phase, {"peak_allocated": 0, "peak_reserved": 0})
        ph["seconds"] = round(ph.get("seconds", 0.0) + now - self._phase_t0, 6)
        ph["allocated_end"] = c.memory_allocated(d)
        ph["reserved_end"] = c.memory_reserved(d)
        st["seconds"] = round(now - self._t0, 6)
        st["allocated_end"] = c.memory_allocated(d)
        st["reserved_end"] = c.memory_reserved(d)
        free, total = c.mem_get_info(d)
        st["device_used_end"] = int(total - free)
        st["fragmentation_end"] = st["reserved_end"] - st["allocated_end"]
        st["phases"] = {p: st["phases"][p] for p in trace_mod.PHASES if p in st["phases"]}
        if not self.keep_samples:
            del st["samples"]
        self.trace["steps"].append(st)
        self._check_leak()
        self._maybe_probe("step_end")
        self._apply_policy("step end")

    def step(self):
        """Marks the end of an iteration (after optimizer.step() and zero_grad()); the next
        iteration's step begins. Returns the finished step's record."""
        if not self._started:
            self.start()
        self._end_step()
        self._pending_calls = []
        self._calls_by_param = {}
        self._open = {}
        done = self.trace["steps"][-1] if self.trace["steps"] else None
        self._begin_step()
        return done

    # ---- leaks, cache, plan ----

    def _check_leak(self):
        steps = self.trace["steps"]
        n = self.leak_steps
        if len(steps) <= n:
            return
        ends = [s["allocated_end"] for s in steps[-(n + 1):]]
        deltas = [b - a for a, b in zip(ends, ends[1:])]
        if not all(d >= self.leak_min_bytes for d in deltas):
            self._leak = None
            return
        last = steps[-1]["step"]
        if self._leak is None:
            first = last - n + 1
            self._leak = {"first_step": first, "last_step": last,
                          "bytes_per_step": sum(deltas) // n, "total_bytes": ends[-1] - ends[0]}
            self.trace["leaks"].append(self._leak)
            self._warn(last, None, "leak",
                       f"memory_allocated() after the step grew by "
                       f"{_mib(self._leak['bytes_per_step'])} per step over steps "
                       f"{first - 1}-{last} (now {_mib(ends[-1])}): something keeps a tensor "
                       f"each step (a loss summed with its graph, a list of outputs)")
        else:
            lk = self._leak
            prev_total = lk["total_bytes"]
            lk["last_step"] = last
            lk["total_bytes"] = prev_total + deltas[-1]
            lk["bytes_per_step"] = lk["total_bytes"] // (last - lk["first_step"] + 1)

    def _empty_cache(self, step, at, reason):
        c = self._cuda
        d = self.device
        self._tick(f"empty_cache ({reason})")
        c.synchronize(d)
        before = c.memory_reserved(d)
        t = time.perf_counter()
        c.empty_cache()
        c.synchronize(d)
        dt = time.perf_counter() - t
        after = c.memory_reserved(d)
        c.reset_peak_memory_stats(d)
        rec = {"step": step, "at": at, "reason": reason, "freed_bytes": int(before - after),
               "reserved_before": int(before), "reserved_after": int(after),
               "allocated": int(c.memory_allocated(d)), "seconds": round(dt, 6)}
        self.trace["empty_cache"].append(rec)
        return rec

    def _maybe_probe(self, at):
        if self.probe != at:
            return
        step = self._step["step"] if at != "step_end" else self.trace["steps"][-1]["step"]
        if step % self.probe_every == 0:
            self._empty_cache(step, at, "probe")

    def _apply_policy(self, at):
        if self.policy is None:
            return
        if self._cuda.memory_reserved(self.device) > self.policy.share * self.device_total:
            step = self._step["step"] if at != "step end" else self.trace["steps"][-1]["step"]
            self._empty_cache(step, at, "policy")

    def _check_plan(self, phase, ph):
        step = self._step["step"]
        if (step, phase) in self._warned:
            return
        alloc, _ = self.plan.expected(step, phase)
        if alloc > 0 and ph["peak_allocated"] > alloc * (1.0 + self.margin):
            self._warned.add((step, phase))
            self._warn(step, phase, "over_plan",
                       f"step {step} {phase}: allocated {_mib(ph['peak_allocated'])} exceeds the "
                       f"plan's {_mib(alloc)} by more than {self.margin:.0%}",
                       measured=ph["peak_allocated"], predicted=alloc)

    def _warn(self, step, phase, kind, message, **extra):
        rec = {"step": step, "phase": phase, "kind": kind, "message": message}
        rec.update(extra)
        self.trace["warnings"].append(rec)
        warnings.warn(message, MemplanWarning, stacklevel=3)
        log.warning(message)
        if self.on_warning is not None:
            self.on_warning(rec)

    # ---- reading the results ----

    @property
    def steps(self):
        """The finished steps' records (dicts, as in the trace)."""
        return self.trace["steps"] if self.trace else []

    @property
    def leaks(self):
        return self.trace["leaks"] if self.trace else []

    def summary(self):
        """A few lines: the peaks per phase of the last step, leaks, cache releases, warnings."""
        return summarize(self.trace)


def _mib(b):
    return f"{b / 1048576:.1f} MiB"


def summarize(doc):
    """Text summary of a trace document."""
    if not doc or not doc["steps"]:
        return "no steps recorded"
    lines = []
    last = doc["steps"][-1]
    lines.append(f"{len(doc['steps'])} steps; last (step {last['step']}): peak allocated "
                 f"{_mib(last['peak_allocated'])}, reserved {_mib(last['peak_reserved'])}, "
                 f"{last.get('seconds', 0):.3f} s")
    for p, ph in last.get("phases", {}).items():
        lines.append(f"  {p:<10} allocated {_mib(ph['peak_allocated']):>12}  reserved "
                     f"{_mib(ph['peak_reserved']):>12}")
    if "fragmentation_end" in last:
        lines.append(f"  after the step: reserved - allocated = {_mib(last['fragmentation_end'])}")
    for lk in doc.get("leaks", []):
        lines.append(f"  leak: +{_mib(lk['bytes_per_step'])} per step, steps {lk['first_step']}-"
                     f"{lk['last_step']}")
    ec = doc.get("empty_cache", [])
    if ec:
        freed = sum(r["freed_bytes"] for r in ec)
        secs = sum(r["seconds"] for r in ec)
        lines.append(f"  empty_cache: {len(ec)} calls freed {_mib(freed)} in {secs * 1000:.1f} ms")
    for w in doc.get("warnings", []):
        lines.append(f"  warning: {w['message']}")
    return "\n".join(lines)
