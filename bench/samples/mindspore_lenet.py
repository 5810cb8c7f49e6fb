"""The seed sample's loop for MindSpore: LeNet on MNIST as MindSpore's own sample trains it, run
until the test accuracy reaches a target (the benchmarks' time-to-accuracy baseline).

Written the way the sample is: mindspore.dataset.MnistDataset read from the idx files, the
map operations Rescale (to [0, 1], then MNIST's mean and deviation) and HWC2CHW, a shuffle
buffer, batch with drop_remainder, Model.train one epoch at a time without data sink (there
is none on the CPU), Model.eval on the test set after each, a checkpoint per epoch. The LeNet
is the generated project's (from the rendered project on sys.path): the same model.

    python bench/samples/mindspore_lenet.py DATA_DIR [--target 0.95] [--max-epochs 10]

Prints {"epochs": N, "accuracy": A} on its last line.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import mindspore as ms
import mindspore.dataset as ds
import mindspore.dataset.transforms as transforms
import mindspore.dataset.vision as vision
import sample_args
from mindspore import nn
from mindspore.train import Accuracy, Model

MEAN, STD = 0.1307, 0.3081


def create_dataset(root: Path, usage: str, batch_size: int) -> ds.Dataset:
    data = ds.MnistDataset(str(root), usage=usage, shuffle=False)
    image_ops = [
        vision.Rescale(1.0 / 255.0, 0.0),
        vision.Rescale(1 / STD, -MEAN / STD),
        vision.HWC2CHW(),
    ]
    data = data.map(operations=image_ops, input_columns="image")
    data = data.map(operations=transforms.TypeCast(ms.int32), input_columns="label")
    if usage == "train":
        data = data.shuffle(buffer_size=10000)
    return data.batch(batch_size, drop_remainder=usage == "train")


def main() -> None:
    args = sample_args.parse(__doc__)

    sys.path.insert(0, str(args.project))
    from src.model import LeNet5

    ms.set_seed(args.seed)
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    train = create_dataset(args.data, "train", args.batch_size)
    test = create_dataset(args.data, "test", args.batch_size)
    net = LeNet5(10)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    optimizer = nn.Momentum(net.trainable_params(), args.lr, args.momentum)
    model = Model(net, loss, optimizer, metrics={"accuracy": Accuracy()})
    accuracy, epoch = 0.0, 0
    with tempfile.TemporaryDirectory() as output:
        for epoch in range(1, args.max_epochs + 1):
            model.train(1, train, dataset_sink_mode=False)
            accuracy = model.eval(test, dataset_sink_mode=False)["accuracy"]
            print(f"epoch {epoch}: test accuracy {accuracy:.4f}", flush=True)
            ms.save_checkpoint(net, str(Path(output) / f"lenet_epoch{epoch}.ckpt"))
            if accuracy >= args.target:
                break
    print(json.dumps({"epochs": epoch, "accuracy": accuracy}))


if __name__ == "__main__":
    main()
