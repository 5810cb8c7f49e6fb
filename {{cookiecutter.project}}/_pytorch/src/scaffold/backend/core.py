"""PyTorch's side of a run (src/scaffold/backend/api.py): device, process group, the Task's
model built for the data, its training step, evaluation and checkpoints as state_dicts."""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel

from src.scaffold.backend import devices, distributed, guards
from src.scaffold.backend.api import EpochEnd, TrainOptions
from src.scaffold.backend.loader import InMemory, Normalise, Streamed, auto_workers
from src.scaffold.backend.precision import choose
from src.scaffold.backend.saved import (  # noqa: F401 (read_meta, load_arrays: this module's too)
    CHECKPOINT_SUFFIX,
    LOAD_ERRORS,
    load_arrays,
    load_state,
    not_this_model,
    read_meta,
)
from src.scaffold.backend.schedule import Schedule
from src.scaffold.backend.stepping import StepRun, default_train_step
from src.scaffold.data.sharding import BatchPlan, cpu_count
from src.scaffold.data.splits import Splits
from src.scaffold.outputs import pretrained, truth
from src.scaffold.task import DataShape, Task

log = logging.getLogger(__name__)
# Samples the model is tried on before training.
CHECK_SAMPLES = 4


def _import_behind(name: str) -> threading.Thread | None:
    """Import ``name`` in a thread, now. torch.optim's first use imports torch._dynamo
    (sympy and symbolic shapes: about 1 s on a CPU, 4 s seen on a GPU host): begun before
    the data is read, it runs while the data is read and the device starts. Whoever imports it
    meanwhile waits for this import (Python's lock per module), never a second one."""

    def run() -> None:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 (the main thread's own import reports it)
            pass

    if importlib.util.find_spec(name) is None:
        return None  # torch 1.x: no dynamo
    thread = threading.Thread(target=run, name=f"import {name}", daemon=True)
    thread.start()
    return thread


class TorchBackend:
    """The Task's model trained by its step's optimizer, DDP across ranks."""

    name = "pytorch"
    suffix = CHECKPOINT_SUFFIX
    scheduler_only = False

    def __init__(self, options: TrainOptions, task: Task) -> None:
        self.importing: threading.Thread | None = None
        self.options, self.step = options, task.step
        self.accumulate = options.accumulate
        self.augment = task.augment
        self.spec = task.model(options.model)
        self.input_shape = self.spec.input_shape
        place = distributed.placement()
        self.rank, self.world_size = place.rank, place.world_size
        self.local_world_size = place.local_world_size
        self.torch_device = distributed.pick_device(options.device_target, place.device_index)
        self.device = str(self.torch_device)
        where = f"device {place.device_index} ({self.device})"
        self.placement = f"rank {place.rank} of {place.world_size} on {where}"
        self.unseen = (
            devices.unseen(self.torch_device.type, distributed.LOOKED_FOR)
            if options.device_target == "auto"
            else None
        )
        if self.torch_device.type == "cpu" and place.local_world_size > 1:
            # Each process would otherwise start a thread per CPU: N times oversubscribed.
            torch.set_num_threads(max(1, cpu_count() // place.local_world_size))
        distributed.join(place, self.torch_device)
        self.precision = choose(options.amp, self.torch_device)
        self.data: dict[str, InMemory | Streamed] = {}
        self.workers = 0

    def ahead(self) -> None:
        # torch.optim's first use imports torch._dynamo: begun now, behind the data's reading.
        self.importing = _import_behind("torch._dynamo")

    def _imported(self) -> None:
        """The import ahead() began, finished: before loader processes fork, and before
        this process exits (a thread cut short inside torch's C++ aborts the process)."""
        if self.importing is not None:
            self.importing.join()

    def _build(self, shape: DataShape) -> None:
        # The same seed on every rank gives the same initial weights everywhere.
        torch.manual_seed(self.options.seed)
        self.net = guards.build(self.spec, shape).to(self.torch_device)
        self.channels_last = self.torch_device.type == "cpu" and len(shape.input) == 3
        if self.channels_last:
            # oneDNN's CPU convolutions and pooling run markedly faster on NHWC weights.
            self.net = self.net.to(memory_format=torch.channels_last)
        self.optimizer = self.step.make_optimizer(
            self.net.parameters(), self.options.lr, self.options.optimizer
        )
        # Each group's own lr, scaled by the schedule every step (a checkpoint's is not used).
        self.base_lrs = [group["lr"] for group in self.optimizer.param_groups]
        self.run = StepRun(
            self.optimizer, self.precision, self.options.clip_grad_norm, self.step.loss
        )
        self.scaler = self.run.scaler
        self.train_step = self.step.train_step or default_train_step
        self.model: torch.nn.Module | None = self.net
        if self.world_size > 1:
            # DDP averages the gradients over the ranks after every backward pass.
            ids = None if self.torch_device.type == "cpu" else [self.torch_device.index]
            self.model = DistributedDataParallel(self.net, device_ids=ids)

    def setup(self, splits: Splits, schedule: Schedule) -> None:
        self.schedule = schedule
        info = splits.info
        self._build(DataShape(info.shape, info.num_classes))
        normalise = Normalise(info.mean, info.std, len(info.shape), self.torch_device)
        self._check_model(splits, normalise)
        self._imported()
        if info.in_memory:
            self.data = {
                name: InMemory(getattr(splits, name), normalise, self.torch_device)
                for name in ("train", "val", "test")
            }
            return
        options = self.options
        self.workers = (
            options.data.num_workers
            if options.data.num_workers is not None
            else auto_workers(self.local_world_size)
        )
        log.info("streaming the data with %d loader workers per rank", self.workers)
        self.data = {
            name: Streamed(
                getattr(splits, name),
                normalise,
                self.torch_device,
                self.workers,
                options.batch_size,
                *(
                    (self.augment, options.data.random_crop, options.data.random_flip)
                    if name == "train"
                    else ()
                ),
            )
            for name in ("train", "val", "test")
        }

    @torch.no_grad()
    def _check_model(self, splits: Splits, normalise: Normalise) -> None:
        """A few samples through the model before training: outputs of another shape than
        the data needs, or an error in the model, are one line now, not a traceback later."""
        split = splits.val if len(splits.val) else splits.train
        count = min(len(split), CHECK_SAMPLES)
        inputs = torch.from_numpy(np.stack([split.load(i) for i in range(count)]))
        inputs = normalise(inputs.to(self.torch_device))
        if self.channels_last:
            inputs = inputs.contiguous(memory_format=torch.channels_last)
        self.net.eval()
        with self.precision.autocast():
            outputs = guards.try_batch(
                self.spec.name, lambda: self.net(inputs), tuple(inputs.shape)
            )
        self.net.train()
        info = splits.info
        guards.check_outputs(self.spec.name, outputs, count, info.num_classes, split.numeric)
        labels = torch.from_numpy(np.asarray(split.labels[:count])).to(self.torch_device)
        # src/step.py's metrics on the same batch: the names the run will record, known now.
        self.sample_metrics = guards.try_metrics(lambda: self.step.metrics(outputs.float(), labels))

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.spec.name,
            "amp": self.precision.name,
            "channels_last": self.channels_last,
            "num_workers": self.workers,
        }

    def lr(self) -> float:
        """The learning rate of the last step, as the optimizer used it."""
        return float(self.optimizer.param_groups[0]["lr"])

    def _epoch(self, plan: BatchPlan, epoch: int, hook: EpochEnd) -> torch.Tensor:
        """One pass over this rank's batches of ``epoch`` through src/step.py's train_step;
        return the mean loss. The learning rate is set for each optimizer step, and DDP
        averages the gradients only on a step's last batch."""
        self.model.train()
        loss_sum = torch.zeros((), device=self.torch_device)
        # From the first batch not trained yet (a mid-epoch checkpoint's resume).
        steps = skipped = plan.skipped(epoch)
        done, updates = plan.steps_done(epoch - 1), plan.updates_done(epoch - 1)
        run = self.run
        for inputs, labels in self.data["train"].epoch(plan, epoch):
            run.window, run.last = plan.window(epoch, steps)
            if steps % plan.accumulate == 0:
                update = updates + steps // plan.accumulate
                for group, base in zip(self.optimizer.param_groups, self.base_lrs):
                    group["lr"] = self.schedule.scaled(base, update)
            if run.last or self.model is self.net:
                loss = self.train_step(self.model, (inputs, labels), run)
            else:
                with self.model.no_sync():
                    loss = self.train_step(self.model, (inputs, labels), run)
            # Summed on the device: reading .item() every step would stall a GPU; the hook
            # reads it only on the steps it reports.
            loss_sum += loss.detach().float()
            steps += 1
            hook.step(done + steps, loss.item, self.lr)
        return loss_sum / max(steps - skipped, 1)

    def fit(self, first: int, last: int, plan: BatchPlan, on_epoch_end: EpochEnd) -> None:
        for epoch in range(first, last + 1):
            start = time.perf_counter()
            loss = self._epoch(plan, epoch, on_epoch_end)
            # .item() waits for the device: the time covers the work, not just its launch.
            train_loss = distributed.average(loss, self.world_size).item()
            on_epoch_end(epoch, train_loss, time.perf_counter() - start)
            if distributed.any_rank(on_epoch_end.stopping, self.world_size, self.torch_device):
                return

    @torch.no_grad()
    def evaluate(self, split: str) -> dict[str, float]:
        training = self.net.training  # validate_every: in the middle of an epoch
        self.net.eval()
        sums: dict[str, torch.Tensor] = {}
        count = 0
        for inputs, labels in self.data[split].batches():
            with self.precision.autocast():
                logits = self.net(inputs).float()
            for key, value in self.step.metrics(logits, labels).items():
                sums[key] = sums.get(key, 0) + value
            count += len(labels)
        self.net.train(training)
        return {key: value.item() / max(count, 1) for key, value in sums.items()}

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        state = {"model": self.net.state_dict(), "optimizer": self.optimizer.state_dict(), **meta}
        if self.scaler is not None:
            state["scaler"] = self.scaler.state_dict()
        # Write then rename: a job killed mid-save leaves the previous checkpoint intact.
        tmp = path.with_name(f".{path.name}.tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)

    def _fits(self, what: str, path: Path, weights: Any) -> None:
        """One short line when the checkpoint's weights were made for another model than
        the one src/model.py builds now (a changed layer, another class count)."""
        own = {k: tuple(v.shape) for k, v in self.net.state_dict().items()}
        theirs = {k: tuple(v.shape) for k, v in dict(weights).items() if hasattr(v, "shape")}
        mismatch = truth.model_mismatch(f"{what} {path}", self.spec.name, own, theirs)
        if mismatch is not None:
            raise mismatch

    def restore(self, path: Path, what: str = "--resume") -> dict[str, int]:
        state = load_state(path, what, self.torch_device)
        self._fits(what, path, state.get("model") or {})
        try:
            self.net.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            if self.scaler is not None and "scaler" in state:
                self.scaler.load_state_dict(state["scaler"])
            found = {"epoch": state["epoch"], "seed": state["seed"]}
            found["batches"] = state.get("batches", 0)  # a checkpoint_every one's
            return {key: int(value) for key, value in found.items()}
        except LOAD_ERRORS as err:
            raise not_this_model(what, path, err) from err

    def prepare(
        self, shape: DataShape, mean: tuple[float, ...], std: tuple[float, ...], path: Path
    ) -> None:
        """The model of the checkpoint at ``path`` built for ``shape``, holding its weights
        (not the optimizer's state), in eval mode; inputs normalised as training did."""
        self.net = guards.build(self.spec, shape).to(self.torch_device)
        state = load_state(path, "--checkpoint", self.torch_device)
        self._fits("--checkpoint", path, state.get("model") or {})
        try:
            self.net.load_state_dict(state["model"])
        except LOAD_ERRORS as err:
            raise not_this_model("--checkpoint", path, err) from err
        self.net.eval()
        self.normalise = Normalise(mean, std, len(shape.input), self.torch_device)
        self.channels_last = self.torch_device.type == "cpu" and len(shape.input) == 3
        if self.channels_last:
            self.net = self.net.to(memory_format=torch.channels_last)

    @torch.inference_mode()
    def infer(self, inputs: np.ndarray) -> np.ndarray:
        batch = self.normalise(torch.from_numpy(inputs).to(self.torch_device))
        if self.channels_last:
            batch = batch.contiguous(memory_format=torch.channels_last)
        with self.precision.autocast():
            outputs = self.net(batch)
        return outputs.float().cpu().numpy()

    def load_pretrained(self, path: Path, skip: tuple[str, ...]) -> None:
        state = load_state(path, "--pretrained", self.torch_device)
        # Our checkpoints hold {"model": state_dict, ...}; others are a bare state_dict.
        weights = state.get("model", state)
        own = self.net.state_dict()
        shapes = {k: tuple(v.shape) for k, v in weights.items() if hasattr(v, "shape")}
        chosen = pretrained.select(path, {k: tuple(v.shape) for k, v in own.items()}, shapes, skip)
        own.update({key: weights[key] for key in chosen})
        self.net.load_state_dict(own)

    def weights_digest(self) -> str:
        # Parameters: what DDP keeps equal on every rank. Buffers (BatchNorm's running
        # statistics) are each rank's own, from its own batches.
        digest = hashlib.sha256()
        for value in self.net.parameters():
            digest.update(value.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()[:16]

    def close(self) -> None:
        self._imported()
        # DDP's reducer holds the process group: without it, leave() ends the group's threads.
        self.model = None
        gc.collect()
        distributed.leave()


OPTIONS = TrainOptions


def create(options: TrainOptions, task: Task) -> TorchBackend:
    """The Backend of a PyTorch run (train.py hands it to the run)."""
    return TorchBackend(options, task)
