# ruff: noqa
"""Training loaders over datasets that decode each item, on a GPU."""
import torch
import torchvision
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms


class Photos(Dataset):
    def __init__(self, files, transform):
        self.files = files
        self.transform = transform

    def __len__(self):
        return len(self.files)

    def __getitem__(self, index):
        return self.transform(Image.open(self.files[index]).convert("RGB"))


def main(files):
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten()).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # no workers and no pinning: one finding for the call, whose fix says both
    train_loader = DataLoader(Photos(files, tf), batch_size=64, shuffle=True)  # expect: CDL008
    # workers set, pageable memory for image batches of a conv net
    cifar = torchvision.datasets.CIFAR10("data", train=True, transform=tf)
    fast_loader = DataLoader(cifar, batch_size=128, shuffle=True, num_workers=8)  # expect: CDL009
    # settings given explicitly, to any value, are a decision
    DataLoader(cifar, batch_size=128, shuffle=True, num_workers=0, pin_memory=False)
    # evaluation is not the training loop
    val_loader = DataLoader(Photos(files, tf), batch_size=64)
    torch.backends.cudnn.benchmark = True
    for images in train_loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(images.cuda()).sum()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main([])
