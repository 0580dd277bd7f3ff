# ruff: noqa
import torch
from torch.utils.data import DataLoader as DL

device = torch.device("cuda")
a = DL(range(8))  # expect: CDL008,CDL009
b = DL(range(8), num_workers=0, pin_memory=True)  # expect: CDL008
c = DL(range(8), num_workers=4, pin_memory=False)  # expect: CDL009
d = DL(range(8), num_workers=4, pin_memory=True)
options = {"num_workers": 2}
e = DL(range(8), **options)
f = DL(range(8), num_workers=os_workers, pin_memory=True)  # noqa: F821
