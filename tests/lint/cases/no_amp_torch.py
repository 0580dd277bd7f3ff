# ruff: noqa
"""An entry point that trains on the GPU in float32: CDL003 is reported once, at its loop."""
import torch


def main():
    model = torch.nn.Linear(10, 1).to("cuda")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(100):
        loss = model(torch.randn(8, 10, device="cuda")).pow(2).mean()
        loss.backward()  # expect: CDL003
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
