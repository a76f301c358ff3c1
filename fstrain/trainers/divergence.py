"""The typed error a training loop raises when its loss stops being a number."""

from __future__ import annotations

from fstrain.kernel.errors import FeatureStoreError


class TrainingDivergedError(FeatureStoreError):
    """The training loss became NaN or infinite; the run stopped at that step.

    Attributes:
        epoch: 0-based epoch of the first non-finite loss.
        batch: 0-based micro-batch within that epoch.
        global_step: optimizer steps taken before it.
        value: the loss value (``nan``, ``inf`` or ``-inf``).
    """

    def __init__(self, *, model: str, epoch: int, batch: int, global_step: int,
                 value: float, hint: str = "") -> None:
        self.epoch, self.batch, self.global_step, self.value = epoch, batch, global_step, value
        super().__init__(
            f"training {model} diverged: the loss was {value} at epoch {epoch}, batch {batch} "
            f"(after {global_step} optimizer steps); the run stopped there. Usual causes: a "
            "learning rate too high, fp16 overflow, invalid inputs (NaN/inf features), an "
            "unstable loss or exploding gradients. Lower torch.lr, set torch.grad_clip, use "
            f"amp bf16 or off, and check the inputs.{(' ' + hint) if hint else ''}"
        )
