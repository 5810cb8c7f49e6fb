"""The bare loop's start-up, the floor train.py's is measured against: import the
framework, start the device, read the digits, build the project's LeNet, loss and optimizer,
take one step; nothing else. Standard library, numpy and the framework only (no generator,
no trainbench), so that it runs wherever a rendered project does.

    python bench/bare_start.py pytorch|mindspore PROJECT DATA_DIR [--device cpu|cuda]

Prints, as JSON on its last line, the seconds of each phase from the process start, with
train.py's names (src/scaffold/run/timeline.py): interpreter and imports, device, data,
model, first step.
"""

from __future__ import annotations

import json
import os
import sys
import time

PHASES = ("interpreter and imports", "device", "data", "model", "first step")
BATCH, LR, MOMENTUM, SEED = 32, 0.01, 0.9, 0
MEAN, STD = 0.1307, 0.3081


def process_age() -> float:
    """Seconds since this process started (Linux /proc), as train.py's timeline reads it."""
    with open("/proc/self/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    with open("/proc/uptime") as uptime:
        up = float(uptime.read().split()[0])
    return up - int(fields[19]) / os.sysconf("SC_CLK_TCK")


STARTED = time.perf_counter() - process_age()


def read_images(path: str):  # -> np.ndarray
    import numpy as np

    with open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    shape = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def main() -> None:
    framework, project, data = sys.argv[1:4]
    device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
    sys.path.insert(0, project)
    marks = []
    import numpy as np

    if framework == "pytorch":
        import torch
        import torch.nn.functional as F

        marks.append(time.perf_counter())
        dev = torch.device(device)
        if dev.type == "cuda":
            torch.cuda.init()
            torch.empty(1, device=dev)
        marks.append(time.perf_counter())
        images = read_images(os.path.join(data, "train-images-idx3-ubyte"))
        labels = read_images(os.path.join(data, "train-labels-idx1-ubyte"))
        x = torch.from_numpy(images[:BATCH].copy()).unsqueeze(1).float().div_(255)
        x = x.sub_(MEAN).div_(STD).to(dev)
        y = torch.from_numpy(labels[:BATCH].astype(np.int64)).to(dev)
        marks.append(time.perf_counter())
        from src.model import LeNet

        torch.manual_seed(SEED)
        net = LeNet().to(dev)
        optimizer = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)
        marks.append(time.perf_counter())
        loss = F.cross_entropy(net(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss.item()
    else:
        import mindspore as ms

        marks.append(time.perf_counter())
        ms.set_context(mode=ms.GRAPH_MODE)
        ms.set_device("CPU")
        marks.append(time.perf_counter())
        images = read_images(os.path.join(data, "train-images-idx3-ubyte"))
        labels = read_images(os.path.join(data, "train-labels-idx1-ubyte"))
        x = ((images[:BATCH].astype(np.float32)[:, None] / 255 - MEAN) / STD).astype(np.float32)
        y = labels[:BATCH].astype(np.int32)
        marks.append(time.perf_counter())
        from bare_ms import train_step

        ms.set_seed(SEED)
        step = train_step(10, LR, MOMENTUM)
        marks.append(time.perf_counter())
        step(ms.Tensor(x), ms.Tensor(y)).asnumpy()
    marks.append(time.perf_counter())
    ends = [STARTED, *marks]
    split = {phase: ends[i + 1] - ends[i] for i, phase in enumerate(PHASES)}
    print(json.dumps(split))


if __name__ == "__main__":
    main()
