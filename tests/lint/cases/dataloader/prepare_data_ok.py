# ruff: noqa
"""Data preparation that writes files: the loader never feeds a GPU."""
import numpy as np
from PIL import Image
from torch.utils.data import DataLoader, Dataset


class Raw(Dataset):
    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, index):
        return np.asarray(Image.open(self.files[index]))


def main(files):
    for index, array in enumerate(DataLoader(Raw(files), batch_size=1, shuffle=True)):
        np.save(f"out/{index}.npy", array.numpy())
