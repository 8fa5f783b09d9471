"""A PyTorch Lightning callback and a Hugging Face TrainerCallback that run a Monitor.

Each framework is imported only when its callback is made, so the package needs neither.
A monitor step is one optimizer step: Lightning's on_train_batch_end (with gradient accumulation,
one step per accumulated batch group as Lightning counts them), transformers' on_step_end.
"""

from .monitor import Monitor


def _lightning_base():
    try:
        from lightning.pytorch import Callback  # Lightning 2.x
    except ImportError:
        try:
            from pytorch_lightning import Callback
        except ImportError:
            raise ImportError("memplan_torch.lightning_callback needs lightning or "
                              "pytorch_lightning installed") from None
    return Callback


def make_lightning_callback(**monitor_kwargs):
    """A lightning Callback: a Monitor on the LightningModule and its first optimizer from
    on_train_start to on_train_end, a step per training batch. `.monitor` is the Monitor."""
    base = _lightning_base()

    class MemplanLightningCallback(base):
        def __init__(self):
            super().__init__()
            self.monitor = None
            self._batches = 0

        def on_train_start(self, trainer, pl_module):
            opts = getattr(trainer, "optimizers", None) or [None]
            opt = opts[0]
            opt = getattr(opt, "optimizer", opt)  # LightningOptimizer wraps the torch one
            self.monitor = Monitor(pl_module, opt, **monitor_kwargs).start()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if self.monitor is None:
                return
            self._batches += 1
            every = max(1, int(getattr(trainer, "accumulate_grad_batches", 1) or 1))
            if self._batches % every == 0:
                self.monitor.step()

        def on_train_end(self, trainer, pl_module):
            if self.monitor is not None:
                self.monitor.close()

    return MemplanLightningCallback()


def make_hf_callback(**monitor_kwargs):
    """A transformers TrainerCallback: a Monitor on the Trainer's model and optimizer from
    on_train_begin to on_train_end, a step per optimizer step. `.monitor` is the Monitor."""
    try:
        from transformers import TrainerCallback
    except ImportError:
        raise ImportError("memplan_torch.hf_callback needs transformers installed") from None

    class MemplanTrainerCallback(TrainerCallback):
        def __init__(self):
            super().__init__()
            self.monitor = None

        def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
            self.monitor = Monitor(model, optimizer, **monitor_kwargs).start()

        def on_step_end(self, args, state, control, **kwargs):
            if self.monitor is not None:
                self.monitor.step()

        def on_train_end(self, args, state, control, **kwargs):
            if self.monitor is not None:
                self.monitor.close()

    return MemplanTrainerCallback()
