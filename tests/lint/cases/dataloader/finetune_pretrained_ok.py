# ruff: noqa
"""A large pretrained model fine-tuned at a small batch: its step takes long enough that neither
loading in the main process (CDL008) nor pageable host-to-device copies (CDL009) are what the GPU
waits on, though the loaders decode images per item."""

import json

import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms
from transformers import AutoModelForVision2Seq, AutoProcessor


class Captions(Dataset):
    def __init__(self, annotations, processor):
        self.items = json.load(open(annotations))
        self.processor = processor

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        item = self.items[index]
        image = Image.open(item["image"]).convert("RGB")
        return self.processor(images=image, text=item["caption"], return_tensors="pt")


def main(annotations, photos):
    processor = AutoProcessor.from_pretrained("Salesforce/blip2-opt-2.7b")
    model = AutoModelForVision2Seq.from_pretrained("Salesforce/blip2-opt-2.7b").cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    # no workers over a dataset that opens and processes an image per item
    train_loader = DataLoader(Captions(annotations, processor), batch_size=2, shuffle=True)
    # workers, no pin_memory, image batches
    augment = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
    folder = torchvision.datasets.ImageFolder(photos, transform=augment)
    extra_loader = DataLoader(folder, batch_size=32, shuffle=True, num_workers=4)
    for batch in train_loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(**{k: v.cuda() for k, v in batch.items()}).loss
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main("captions.json", "photos")
