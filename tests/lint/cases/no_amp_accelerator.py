# ruff: noqa
# Device selection through torch.accelerator counts as GPU use.
import torch


def train():
    device = torch.accelerator.current_accelerator()
    model = torch.nn.Linear(10, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for batch in range(10):
        loss = model(torch.randn(8, 10).to(device)).sum()
        loss.backward()  # expect: CDL003
        optimizer.step()


if __name__ == "__main__":
    train()
