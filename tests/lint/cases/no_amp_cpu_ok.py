# ruff: noqa
"""A training script that never uses a GPU: mixed precision is not the point."""
import torch


def main():
    model = torch.nn.Linear(10, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(10):
        loss = model(torch.randn(8, 10)).sum()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
