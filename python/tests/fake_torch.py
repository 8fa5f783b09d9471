"""A small stand-in for torch, enough to run memplan_torch without a GPU.

It has a caching allocator (2 MiB segments, freed blocks kept in a cache until empty_cache),
tensors whose storage is freed when the last Python reference goes (as in PyTorch), a tape
autograd that fires tensor hooks when a gradient is complete and post-accumulate hooks on
parameters, nn.Module with forward hooks, and an optimizer with step hooks. The allocator also
keeps peaks that nothing resets (`true_peak_*`), which tests compare with the monitor's.
"""

import itertools
import types

MiB = 1 << 20
SEGMENT = 2 * MiB


class FakeAllocator:
    def __init__(self, total=16 << 30):
        self.total = total
        self.allocated = 0
        self.reserved = 0
        self.cached = 0  # reserved but free
        self.peak_allocated = 0
        self.peak_reserved = 0
        self.true_peak_allocated = 0
        self.true_peak_reserved = 0
        self.resets = 0
        self.empty_cache_calls = 0
        self.syncs = 0

    def _bump(self):
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self.true_peak_allocated = max(self.true_peak_allocated, self.allocated)
        self.true_peak_reserved = max(self.true_peak_reserved, self.reserved)

    def malloc(self, n):
        n = (n + 511) // 512 * 512
        if self.cached < n:
            seg = (n - self.cached + SEGMENT - 1) // SEGMENT * SEGMENT
            if self.reserved + seg > self.total:
                raise MemoryError("fake CUDA out of memory")
            self.reserved += seg
            self.cached += seg
        self.cached -= n
        self.allocated += n
        self._bump()
        return n

    def release(self, n):
        self.allocated -= n
        self.cached += n

    def reset_true_peaks(self):
        self.true_peak_allocated = self.allocated
        self.true_peak_reserved = self.reserved


ALLOC = FakeAllocator()


class _Handle:
    def __init__(self, lst, item):
        self._lst, self._item = lst, item

    def remove(self):
        if self._item in self._lst:
            self._lst.remove(self._item)


class Tensor:
    _ids = itertools.count()

    def __init__(self, nbytes, requires_grad=False, grad_fn=None):
        self.nbytes = nbytes
        self._alloc = ALLOC  # frees go back to the allocator it came from
        self._block = ALLOC.malloc(nbytes) if nbytes > 0 else 0
        self.requires_grad = requires_grad
        self.grad_fn = grad_fn
        self.grad = None
        self._hooks = []
        self._acc_hooks = []
        self.id = next(Tensor._ids)

    def __del__(self):
        if self._block:
            self._alloc.release(self._block)
            self._block = 0

    def register_hook(self, fn):
        self._hooks.append(fn)
        return _Handle(self._hooks, fn)

    def register_post_accumulate_grad_hook(self, fn):
        self._acc_hooks.append(fn)
        return _Handle(self._acc_hooks, fn)

    def backward(self):
        autograd.backward(self)


class Parameter(Tensor):
    def __init__(self, nbytes):
        super().__init__(nbytes, requires_grad=True)


class _Node:
    """What an op keeps for backward: its inputs, the saved bytes, the grad sizes."""

    def __init__(self, inputs, saved, backward_workspace):
        self.inputs = inputs  # tensors (kept alive by the graph, as saved tensors are)
        self.saved = saved  # a Tensor or None
        self.backward_workspace = backward_workspace


_grad_enabled = [True]


def is_grad_enabled():
    return _grad_enabled[0]


class no_grad:
    def __enter__(self):
        self._prev = _grad_enabled[0]
        _grad_enabled[0] = False

    def __exit__(self, *a):
        _grad_enabled[0] = self._prev


def op(inputs, out_bytes, saved_bytes=0, workspace=0, backward_workspace=0):
    """An op: allocates its output (and a transient workspace, freed before it returns) and,
    with grad mode on, a graph node keeping `saved_bytes` and the inputs. The workspace comes
    after the output exists, as in a kernel launch."""
    needs = _grad_enabled[0] and any(t.requires_grad for t in inputs)
    node = None
    if needs:
        saved = Tensor(saved_bytes) if saved_bytes else None
        node = _Node(list(inputs), saved, backward_workspace)
    out = Tensor(out_bytes, requires_grad=needs, grad_fn=node)
    if workspace:
        w = Tensor(workspace)
        del w
    return out


class _Autograd(types.ModuleType):
    def backward(self, tensors, grad_tensors=None, retain_graph=None, create_graph=False,
                 inputs=None):
        root = tensors
        # Topological order over the tape, then reverse (the order of a tape engine).
        order, seen = [], set()

        def visit(t):
            if t.id in seen or t.grad_fn is None:
                return
            seen.add(t.id)
            for i in t.grad_fn.inputs:
                visit(i)
            order.append(t)

        visit(root)
        pending = {}  # tensor id -> consumers still to deliver a gradient
        for t in order:
            for i in t.grad_fn.inputs:
                pending[i.id] = pending.get(i.id, 0) + 1
        grads = {root.id: Tensor(root.nbytes)}
        for k in range(len(order) - 1, -1, -1):
            t = order[k]
            order[k] = None
            g = grads.pop(t.id, None)
            if g is None:
                continue
            for h in list(t._hooks):
                h(g)
            node = t.grad_fn
            if node.backward_workspace:
                w = Tensor(node.backward_workspace)
                del w
            for i in node.inputs:
                if not i.requires_grad:
                    continue
                gi = Tensor(i.nbytes)
                pending[i.id] -= 1
                if i.grad_fn is None:  # a leaf: accumulate into .grad
                    if i.grad is None:
                        i.grad = gi
                    del gi
                    if pending[i.id] == 0:
                        for h in list(i._acc_hooks):
                            h(i)
                    continue
                if i.id in grads:
                    del gi  # accumulated into the existing gradient
                else:
                    grads[i.id] = gi
            del g
            t.grad_fn = None  # the graph is freed as backward goes
            node.saved = None
            node.inputs = []
            del t, node


autograd = _Autograd("torch.autograd")


class Module:
    def __init__(self):
        self._children = {}
        self._params = {}
        self._pre = []
        self._post = []

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self.__dict__.setdefault("_children", {})[name] = value
        elif isinstance(value, Parameter):
            self.__dict__.setdefault("_params", {})[name] = value
        object.__setattr__(self, name, value)

    def named_modules(self, prefix=""):
        yield prefix, self
        for n, c in self._children.items():
            yield from c.named_modules(f"{prefix}.{n}" if prefix else n)

    def parameters(self):
        seen = set()
        for _, m in self.named_modules():
            for p in m._params.values():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield p

    def register_forward_pre_hook(self, fn):
        self._pre.append(fn)
        return _Handle(self._pre, fn)

    def register_forward_hook(self, fn):
        self._post.append(fn)
        return _Handle(self._post, fn)

    def __call__(self, *args):
        for h in list(self._pre):
            h(self, args)
        out = self.forward(*args)
        for h in list(self._post):
            h(self, args, out)
        return out


class Optimizer:
    def __init__(self, params):
        self.params = list(params)
        self.state = {}
        self._pre = []
        self._post = []

    def register_step_pre_hook(self, fn):
        self._pre.append(fn)
        return _Handle(self._pre, fn)

    def register_step_post_hook(self, fn):
        self._post.append(fn)
        return _Handle(self._post, fn)

    def step(self):
        for h in list(self._pre):
            h(self, (), {})
        for p in self.params:  # AdamW-like: two state tensors per parameter, a temporary
            if id(p) not in self.state:
                self.state[id(p)] = (Tensor(p.nbytes), Tensor(p.nbytes))
        tmp = [Tensor(p.nbytes) for p in self.params if p.grad is not None]
        del tmp
        for h in list(self._post):
            h(self, (), {})

    def zero_grad(self):
        for p in self.params:
            p.grad = None


def _make_cuda():
    cuda = types.ModuleType("torch.cuda")
    cuda.is_available = lambda: True
    cuda.current_device = lambda: 0
    cuda.get_device_name = lambda d=0: "Fake GPU"
    cuda.memory_allocated = lambda d=0: ALLOC.allocated
    cuda.memory_reserved = lambda d=0: ALLOC.reserved
    cuda.max_memory_allocated = lambda d=0: ALLOC.peak_allocated
    cuda.max_memory_reserved = lambda d=0: ALLOC.peak_reserved

    def reset_peak_memory_stats(d=0):
        ALLOC.resets += 1
        ALLOC.peak_allocated = ALLOC.allocated
        ALLOC.peak_reserved = ALLOC.reserved

    def empty_cache():
        ALLOC.empty_cache_calls += 1
        # Only whole free segments go back; the fake's cache is counted in bytes, so it
        # returns the whole 2 MiB multiples of it.
        give = ALLOC.cached // SEGMENT * SEGMENT
        ALLOC.reserved -= give
        ALLOC.cached -= give

    def synchronize(d=0):
        ALLOC.syncs += 1

    cuda.reset_peak_memory_stats = reset_peak_memory_stats
    cuda.empty_cache = empty_cache
    cuda.synchronize = synchronize
    cuda.mem_get_info = lambda d=0: (ALLOC.total - ALLOC.reserved - 500 * MiB, ALLOC.total)
    return cuda


def make_module():
    """A fresh fake `torch` module (and a fresh allocator)."""
    global ALLOC
    ALLOC = FakeAllocator()
    torch = types.ModuleType("torch")
    torch.__version__ = "0.0-fake"
    torch.Tensor = Tensor
    torch.cuda = _make_cuda()
    # The allocator's nested statistics, as torch._C gives them (the monitor's fast path).
    c = types.ModuleType("torch._C")

    def raw_stats(d=0):
        ALLOC.raw_calls = getattr(ALLOC, "raw_calls", 0) + 1
        return {"allocated_bytes": {"all": {"current": ALLOC.allocated,
                                            "peak": ALLOC.peak_allocated}},
                "reserved_bytes": {"all": {"current": ALLOC.reserved,
                                           "peak": ALLOC.peak_reserved}}}

    c._cuda_memoryStats = raw_stats
    c._cuda_resetPeakMemoryStats = torch.cuda.reset_peak_memory_stats
    torch._C = c
    torch.autograd = autograd
    torch.is_grad_enabled = is_grad_enabled
    torch.no_grad = no_grad
    torch.device = lambda s: types.SimpleNamespace(index=0)
    nn = types.ModuleType("torch.nn")
    nn.Module = Module
    nn.Parameter = Parameter
    torch.nn = nn
    optim = types.ModuleType("torch.optim")
    optim.Optimizer = Optimizer
    torch.optim = optim
    # Tensor.backward goes through torch.autograd.backward, looked up at call time.
    autograd.backward = types.MethodType(_Autograd.backward, autograd)
    return torch


def allocator():
    return ALLOC


# ---- a small model: two blocks of two linear layers, a head ----


class Linear(Module):
    def __init__(self, in_bytes, out_bytes, weight_bytes, workspace=0):
        super().__init__()
        self.weight = Parameter(weight_bytes)
        self.out_bytes = out_bytes
        self.workspace = workspace

    def forward(self, x):
        return op([x, self.weight], self.out_bytes, workspace=self.workspace,
                  backward_workspace=self.workspace)


class Block(Module):
    def __init__(self, width, workspace):
        super().__init__()
        self.fc1 = Linear(width, 2 * width, width // 4, workspace)
        self.fc2 = Linear(2 * width, width, width // 4)

    def forward(self, x):
        h = self.fc1(x)
        return self.fc2(h)


class Net(Module):
    def __init__(self, width=8 * MiB, workspace=16 * MiB):
        super().__init__()
        self.embed = Linear(0, width, width // 8)
        self.blocks = Module()
        self.blocks.b0 = Block(width, workspace)
        self.blocks.b1 = Block(width, 0)
        self.head = Linear(width, width // 2, width // 8)

    def forward(self, x):
        h = self.embed(x)
        h = self.blocks.b0(h)
        h = self.blocks.b1(h)
        return self.head(h)


def loss_of(out):
    return op([out], 4, saved_bytes=out.nbytes)


def train_step(model, opt, keep=None, leak_bytes=0):
    x = Tensor(1 * MiB)
    out = model(x)
    loss = loss_of(out)
    del out
    loss.backward()
    opt.step()
    opt.zero_grad()
    if keep is not None:
        keep.append(Tensor(leak_bytes))
    del loss, x
