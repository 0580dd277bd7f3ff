"""A tiny ``transformers.Trainer`` run with cuda-doctor's callback, on the CPU and offline (a
model of its own: nothing is downloaded).  Prints ``TRAINED steps=N`` once it has trained; a
failed check ends it with ``cuda_doctor.PreflightError`` and the checklist before any step."""

from __future__ import annotations

import logging
import sys
import tempfile
from typing import Any

import torch
import transformers

from cuda_doctor.integrations.transformers import CudaDoctorCallback


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, Any]:
        print("training step", flush=True)
        return {"loss": torch.nn.functional.mse_loss(self.layer(x), labels)}


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s %(levelname)s %(message)s")
    torch.manual_seed(0)
    rows = [{"x": torch.randn(4), "labels": torch.randn(1)} for _ in range(16)]
    with tempfile.TemporaryDirectory() as out:
        args = transformers.TrainingArguments(
            output_dir=out,
            max_steps=3,
            per_device_train_batch_size=4,
            use_cpu=True,
            report_to=[],
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
        )
        callback = CudaDoctorCallback()
        trainer = transformers.Trainer(model=Tiny(), args=args, train_dataset=rows, callbacks=[callback])
        trainer.train()
        print(f"TRAINED steps={trainer.state.global_step}", flush=True)


if __name__ == "__main__":
    main()
