"""A tiny Lightning fit with cuda-doctor's callback, as a user's script would have it.

``python lightning_fit.py [ACCELERATOR]`` (default ``cpu``; ``auto`` takes the GPU when CUDA sees
one): prints ``TRAINED steps=N device=D`` once the fit has trained (D: where its steps ran); a failed check ends it with
``cuda_doctor.PreflightError`` and the checklist before any step.
"""

from __future__ import annotations

import sys

import lightning.pytorch as pl
import torch

from cuda_doctor.integrations.lightning import CudaDoctorCallback


class Tiny(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.trained_on = "nothing"  # Lightning moves the model back to the CPU after the fit

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        print(f"training step {batch_idx} on {x.device}", flush=True)
        self.trained_on = str(x.device)
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main() -> None:
    accelerator = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    callback = CudaDoctorCallback()
    trainer = pl.Trainer(
        accelerator=accelerator,
        devices=1,
        max_steps=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[callback],
    )
    model = Tiny()
    trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=4))
    print(f"TRAINED steps={trainer.global_step} device={model.trained_on}", flush=True)
    print(f"callback headline: {callback.headline}", flush=True)


if __name__ == "__main__":
    main()
