# ruff: noqa
from torch.utils.data import DataLoader

loader = DataLoader(range(8))
for batch in loader:
    print(batch)
