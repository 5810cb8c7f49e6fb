"""The bare loop: bench/bare_loop.py's step (the project's LeNet, channels_last on the CPU as
train.py runs it, bfloat16 autocast on a GPU), each epoch's batches gathered before its clock."""

from __future__ import annotations

import sys

import numpy as np
from common import Clock, arguments, tb

if __name__ == "__main__":
    args = arguments(__doc__.splitlines()[0]).parse_args()
    from bare_loop import torch_loop  # bench/, on the path common put it on

    sys.path.insert(0, str(args.project))
    images, labels = tb.training_split(tb.read_digits(args.data))
    step, batch, wait = torch_loop(images, labels, args.device)
    size, last = args.batch_size, None
    steps = len(labels) // size
    clock = Clock()
    for epoch in range(args.epochs):
        order = np.random.default_rng([tb.SEED, epoch]).permutation(len(labels))
        batches = [batch(row) for row in order[: steps * size].reshape(steps, size)]
        clock.epoch_start()
        for images_, labels_ in batches:
            clock.step()
            last = step(images_, labels_)
        wait(last)
        clock.epoch_end(steps * size)
    clock.report()
