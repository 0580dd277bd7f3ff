# ruff: noqa
"""Test code: loading speed over a toy dataset is not the point."""
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __len__(self):
        return 3

    def __getitem__(self, index):
        return Image.open("x.png")


def test_loader():
    loader = DataLoader(Images(), batch_size=1, shuffle=True)
    model = torch.nn.Linear(1, 1).cuda()
    loss = model(torch.ones(1, 1).cuda()).sum()
    loss.backward()
