#!/usr/bin/env python3
"""Which copies F.linear makes of a non-contiguous 3-D input (a batch-first
view of a sequence-first tensor, as a batch-first cuDNN LSTM returns), with
and without autocast: the caching allocator's history with C++ frames.

  python3 bench/linear_copy_probe.py > OUT.txt

For each case (fp32; bf16 weights and input; amp_bf16 with a bf16 input;
amp_bf16 with an fp32 input; a batch-first LSTM, dropout and the head, in
amp_bf16 and fp32) it runs one forward and backward of
nn.Linear(H, V) on x = randn(T, B, H).transpose(0, 1) and prints every
allocation of 1 MiB or more in order, its size and the innermost ATen and
Python frames that made it, and when it was freed.
"""
import torch
import torch.nn as nn

T, B, H, V = 96, 32, 512, 4096
MIB = 2 ** 20


def frames(ev):
    """The ATen and autograd C++ frames (names without their arguments), then
    the innermost Python frames."""
    names = [f.get("name", "").split("(")[0] for f in ev.get("frames", [])]
    keep = ("at::", "torch::autograd", "autocast", "c10::impl")
    aten = [n for n in names if any(k in n for k in keep) and "redispatch" not in n
            and "call" not in n.split("::")[-1]]
    py = [f"{f.get('filename', '').split('/')[-1]}:{f.get('line')}" for f in ev.get("frames", [])
          if f.get("filename", "").endswith(".py")]
    return " < ".join(aten[:14]) + " || " + " ".join(py[:2])


class LstmHead(nn.Module):
    """A batch-first LSTM, dropout and a vocabulary head (bench/families.py LstmLM)."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(H, H, batch_first=True)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(H, V)

    def forward(self, x):
        h, _ = self.rnn(x)
        return self.head(self.drop(h))


def case(name, x_dtype, w_dtype, amp, lstm=False):
    torch.cuda.synchronize()
    lin = (LstmHead() if lstm else nn.Linear(H, V)).cuda().to(w_dtype)
    x = torch.randn(T, B, H, device="cuda", dtype=x_dtype).transpose(0, 1)
    if not lstm:
        x.requires_grad_()
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="all")
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
        y = lin(x)
    y.float().sum().backward()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    print(f"== {name}: x {tuple(x.shape)} strides {x.stride()} {x_dtype}, weight {w_dtype}, "
          f"autocast {amp}")
    live = {}
    for k, ev in enumerate(snap["device_traces"][0]):
        if ev["action"] == "alloc" and ev["size"] >= MIB:
            live[ev["addr"]] = k
            print(f"  {k:4d} alloc {ev['size'] / MIB:8.2f} MiB  {frames(ev)[:1500]}")
        elif ev["action"] == "free_completed" and ev["addr"] in live:
            print(f"  {k:4d} free  {ev['size'] / MIB:8.2f} MiB  (alloc {live.pop(ev['addr'])})")
    del lin, x, y
    torch.cuda.empty_cache()


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name())
    case("fp32", torch.float32, torch.float32, False)
    case("bf16", torch.bfloat16, torch.bfloat16, False)
    case("amp_bf16, bf16 input", torch.bfloat16, torch.float32, True)
    case("amp_bf16, fp32 input", torch.float32, torch.float32, True)
    case("amp_bf16, LSTM, dropout, head", torch.float32, torch.float32, True, lstm=True)
    case("fp32, LSTM, dropout, head", torch.float32, torch.float32, False, lstm=True)
