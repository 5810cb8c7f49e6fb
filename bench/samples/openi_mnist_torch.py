"""The seed sample's loop: PyTorch MNIST as the OpenI cloudbrain sample trains it, run until the
test accuracy reaches a target (the benchmarks' time-to-accuracy baseline).

Written the way the sample is: torchvision's MNIST Dataset (reimplemented: there is no CPU
torchvision here), one PIL image a sample through ToTensor and Normalize, a shuffling
DataLoader, .to(device) on every batch, the whole test set evaluated after every epoch, a
state_dict saved each epoch. The LeNet is the sample's (ReLU before pooling, NCHW).

    python bench/samples/openi_mnist_torch.py DATA_DIR [--target 0.95] [--max-epochs 10]
        [--device cpu|cuda]

--device: where the model and each batch go (the sample's .to(device)); the CPU unless
asked, so that the CPU benchmarks compare like with like on a host that has a GPU.

Prints {"epochs": N, "accuracy": A} on its last line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import sample_args
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset

MEAN, STD = 0.1307, 0.3081


def read_idx(path: Path) -> np.ndarray:
    data = path.read_bytes()
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(shape)


class MNIST(Dataset):
    def __init__(self, root: Path, train: bool) -> None:
        prefix = "train" if train else "t10k"
        self.images = read_idx(root / f"{prefix}-images-idx3-ubyte")
        self.labels = read_idx(root / f"{prefix}-labels-idx1-ubyte")

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        # torchvision.datasets.MNIST.__getitem__: a PIL image per sample...
        picture = Image.fromarray(self.images[index], mode="L")
        # ...then transforms.ToTensor() and transforms.Normalize(), as they do it.
        array = np.array(picture, np.uint8, copy=True)
        image = torch.from_numpy(array).view(picture.size[1], picture.size[0], 1)
        image = image.permute((2, 0, 1)).contiguous().to(torch.float32).div(255)
        return (image - MEAN) / STD, int(self.labels[index])


def lenet() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, kernel_size=5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, 10),
    )


def test_accuracy(model: nn.Module, loader: DataLoader, device: torch.device) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, labels in loader:
            predicted = model(images.to(device)).argmax(dim=1)
            correct += (predicted == labels.to(device)).sum().item()
            total += len(labels)
    return correct / total


def device_flag() -> torch.device:
    """--device, taken out of the arguments the samples share (sample_args.py)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    known, rest = parser.parse_known_args()
    sys.argv[1:] = rest
    return torch.device(known.device)


def main() -> None:
    device = device_flag()
    args = sample_args.parse(__doc__)

    torch.manual_seed(args.seed)
    train_loader = DataLoader(MNIST(args.data, True), batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(MNIST(args.data, False), batch_size=args.batch_size)
    model = lenet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    accuracy, epoch = 0.0, 0
    with tempfile.TemporaryDirectory() as output:
        for epoch in range(1, args.max_epochs + 1):
            model.train()
            for images, labels in train_loader:
                images, labels = images.to(device), labels.to(device)
                optimizer.zero_grad()
                loss = F.cross_entropy(model(images), labels)
                loss.backward()
                optimizer.step()
            accuracy = test_accuracy(model, test_loader, device)
            print(f"epoch {epoch}: test accuracy {accuracy:.4f}", flush=True)
            torch.save(model.state_dict(), Path(output) / f"mnist_epoch{epoch}.pt")
            if accuracy >= args.target:
                break
    print(json.dumps({"epochs": epoch, "accuracy": accuracy}))


if __name__ == "__main__":
    main()
