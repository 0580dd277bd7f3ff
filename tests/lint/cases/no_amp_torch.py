# ruff: noqa
import torch

model = torch.nn.Linear(10, 1).to("cuda")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    loss = model(torch.randn(8, 10, device="cuda")).pow(2).mean()
    loss.backward()  # expect: CDL003
    optimizer.step()
    optimizer.zero_grad()
