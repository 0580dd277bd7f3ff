"""A deliberately starved training loop: every sample costs 2 ms of "decoding" in the main process.

num_workers=0, so the GPU waits while the Dataset sleeps. Runs for about 20 s of training.
"""

from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, Dataset

SECONDS = 20.0


class SlowDataset(Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(0.002)  # stands in for JPEG decoding and augmentation on one CPU core
        return torch.randn(4096)


def main() -> None:
    device = torch.device("cuda")
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(8)]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    loader = DataLoader(SlowDataset(), batch_size=64, num_workers=0)
    start = time.monotonic()
    steps = 0
    for batch in loader:
        x = batch.to(device).repeat(16, 1)  # 1024 rows of real work per step
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        if time.monotonic() - start > SECONDS:
            break
    torch.cuda.synchronize()
    print(f"starved: {steps} steps in {time.monotonic() - start:.1f} s")


if __name__ == "__main__":
    main()
