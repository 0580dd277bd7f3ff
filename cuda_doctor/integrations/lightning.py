"""A PyTorch Lightning callback: the check before the fit trains (docs/api.md).

    from cuda_doctor.integrations.lightning import CudaDoctorCallback

    trainer = lightning.pytorch.Trainer(callbacks=[CudaDoctorCallback()])

It runs in the ``setup`` hook of ``fit``: the processes are started, but the model is not yet on
the GPU.  Local rank 0 of each node checks and the node's other ranks take its verdict.  A finding
at ``fail_on`` raises ``cuda_doctor.PreflightError`` with the checklist, which ends ``fit`` (Lightning
re-raises what a callback raises, after its own teardown); otherwise the one-line verdict is logged.
Importing this module imports Lightning (``lightning.pytorch``, else ``pytorch_lightning``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

try:
    from lightning.pytorch import Callback
    from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
except ImportError:  # the package's older name
    from pytorch_lightning import Callback
    from pytorch_lightning.utilities import rank_zero_info, rank_zero_warn

from cuda_doctor.api import StrPath, preflight

__all__ = ["CudaDoctorCallback"]


class CudaDoctorCallback(Callback):
    """Check the machine when ``fit`` starts; the parameters are ``cuda_doctor.require``'s."""

    def __init__(
        self,
        fail_on: str = "error",
        fast: bool = True,
        *,
        select: str | Iterable[str] = (),
        ignore: str | Iterable[str] = (),
        timeout: float = 10.0,
        wait: float | None = None,
        config: StrPath | None = None,
    ) -> None:
        super().__init__()
        self.options: dict[str, Any] = {
            "fail_on": fail_on,
            "fast": fast,
            "select": select,
            "ignore": ignore,
            "timeout": timeout,
            "wait": wait,
            "config": config,
        }
        #: The last verdict line, once a fit has started.
        self.headline: str | None = None

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage != "fit":
            return
        self.headline = preflight(local_rank=trainer.local_rank, **self.options)
        if self.headline.startswith("OK"):
            rank_zero_info(f"cuda-doctor: {self.headline}")
        else:  # no verdict (the driver could not be read): said, but no reason to stop
            rank_zero_warn(f"cuda-doctor: {self.headline}")
