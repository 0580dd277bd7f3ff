import torch

model = torch.nn.Linear(16, 16).cuda()
if hasattr(torch, "compile"):  # a feature gate still runs torch.compile where it exists
    model = torch.compile(model, mode="max-autotune")


@torch.compile
def scale(x):
    return x * 2


print(model(scale(torch.ones(4, 16, device="cuda"))))
