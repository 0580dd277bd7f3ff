# ruff: noqa
"""Loaders with nothing to do per item: tensors in memory, tensors already on the GPU (which
workers cannot share and pin_memory cannot pin), strings, a pre-batched dataset."""
import torch
from torch.utils.data import DataLoader, TensorDataset


class Prompts(torch.utils.data.Dataset):
    def __init__(self, prompt, n):
        self.prompt, self.n = prompt, n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return {"prompt": self.prompt, "index": index}


x = torch.randn(1024, 16)
y = torch.randint(0, 2, (1024,))
cpu_loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
gpu_loader = DataLoader(TensorDataset(x.cuda(), y.cuda()), batch_size=32, shuffle=True)
prompt_loader = DataLoader(Prompts("a photo of a dog", 100), batch_size=4, shuffle=True)
batches = DataLoader(TensorDataset(x), batch_size=None, shuffle=True)
model = torch.nn.Linear(16, 2).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for xb, yb in cpu_loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(xb.cuda()), yb.cuda())
    loss.backward()
    optimizer.step()
