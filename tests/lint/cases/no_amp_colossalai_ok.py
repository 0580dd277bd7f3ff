# ruff: noqa
"""Numerics owned by the framework (a ColossalAI booster with its default plugin): CDL003 stays silent."""
import torch
from colossalai.booster import Booster
from colossalai.booster.plugin import GeminiPlugin


def main():
    booster = Booster(plugin=GeminiPlugin())  # Gemini trains in half precision by default
    model = torch.nn.Linear(10, 1).cuda()
    optimizer = torch.optim.AdamW(model.parameters())
    model, optimizer, *_ = booster.boost(model, optimizer)
    for step in range(100):
        loss = model(torch.randn(8, 10).cuda()).pow(2).mean()
        booster.backward(loss, optimizer)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
