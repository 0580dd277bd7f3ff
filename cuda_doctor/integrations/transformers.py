"""A Hugging Face ``transformers`` callback: the check before ``Trainer.train`` trains (docs/api.md).

    from cuda_doctor.integrations.transformers import CudaDoctorCallback

    trainer = transformers.Trainer(model=model, args=args, callbacks=[CudaDoctorCallback()])

It runs in ``on_train_begin``.  Local rank 0 of each node checks and the node's other ranks take
its verdict.  A finding at ``fail_on`` raises ``cuda_doctor.PreflightError`` with the checklist,
which ends ``train()``; otherwise local rank 0 logs the one-line verdict on the ``cuda_doctor``
logger.  Importing this module imports ``transformers``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from transformers import TrainerCallback

from cuda_doctor.api import StrPath, preflight

__all__ = ["CudaDoctorCallback"]

log = logging.getLogger("cuda_doctor")


class CudaDoctorCallback(TrainerCallback):
    """Check the machine when training starts; the parameters are ``cuda_doctor.require``'s."""

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
        self.options: dict[str, Any] = {
            "fail_on": fail_on,
            "fast": fast,
            "select": select,
            "ignore": ignore,
            "timeout": timeout,
            "wait": wait,
            "config": config,
        }
        #: The last verdict line, once training has started.
        self.headline: str | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.headline = preflight(local_rank=args.local_process_index, **self.options)
        if not state.is_local_process_zero:
            return
        if self.headline.startswith("OK"):
            log.info("cuda-doctor: %s", self.headline)
        else:  # no verdict (the driver could not be read): said, but no reason to stop
            log.warning("cuda-doctor: %s", self.headline)
