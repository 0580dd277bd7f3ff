"""A GPU-bound training loop: large matmuls under autocast, data made on the GPU. About 20 s."""

from __future__ import annotations

import time

import torch

SECONDS = 20.0


def main() -> None:
    device = torch.device("cuda")
    model = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192) for _ in range(8)]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(8192, 8192, device=device)
    start = time.monotonic()
    steps = 0
    while time.monotonic() - start < SECONDS:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps += 1
        if steps % 10 == 0:
            torch.cuda.synchronize()  # keep the CPU from queueing minutes of work
    torch.cuda.synchronize()
    print(f"gpu_bound: {steps} steps in {time.monotonic() - start:.1f} s")


if __name__ == "__main__":
    main()
