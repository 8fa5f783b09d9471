"""memplan_torch: watch a PyTorch run's GPU memory, compare it with a memplan plan, write a trace.

Pure Python; torch is imported only when a Monitor starts. See the README's "Runtime companion"
section and docs/trace-schema.md.
"""

from . import trace
from .monitor import EmptyCachePolicy, MemplanWarning, Monitor, __version__, summarize
from .plan import PlanError, PlanExpectation, load_plan
from .snapshot import SnapshotError, snapshot_to_trace
from .trace import TraceError
from .trace import read as read_trace
from .trace import write as write_trace

__all__ = [
    "EmptyCachePolicy",
    "MemplanWarning",
    "Monitor",
    "PlanError",
    "PlanExpectation",
    "SnapshotError",
    "TraceError",
    "__version__",
    "load_plan",
    "read_trace",
    "snapshot_to_trace",
    "summarize",
    "trace",
    "write_trace",
]


def lightning_callback(**monitor_kwargs):
    """A PyTorch Lightning callback running a Monitor (imports lightning on call)."""
    from .callbacks import make_lightning_callback

    return make_lightning_callback(**monitor_kwargs)


def hf_callback(**monitor_kwargs):
    """A Hugging Face transformers TrainerCallback running a Monitor (imports transformers)."""
    from .callbacks import make_hf_callback

    return make_hf_callback(**monitor_kwargs)
