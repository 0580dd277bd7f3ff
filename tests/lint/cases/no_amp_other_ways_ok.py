# ruff: noqa
"""Training in a half dtype chosen by hand: CDL003 stays silent."""
import torch


def main():
    model = torch.nn.Linear(10, 1).to("cuda", dtype=torch.half)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(100):
        loss = model(torch.randn(8, 10, device="cuda")).pow(2).mean()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
