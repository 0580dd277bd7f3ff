# ruff: noqa
"""Training in float64 on purpose (an L-BFGS fit to a precise target)."""
import torch


def main():
    model = torch.nn.Linear(3, 1).double().cuda()
    optimizer = torch.optim.LBFGS(model.parameters())
    x = torch.randn(16, 3, dtype=torch.float64, device="cuda")

    def closure():
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        return loss

    for _ in range(5):
        optimizer.step(closure)


if __name__ == "__main__":
    main()
