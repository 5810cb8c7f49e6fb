"""PyTorch's Backend (api.py): the Task's model on its device, trained DDP across ranks, or
sharded over them (shard: full, sharding.py and shards.py); and the Framework's
CHECKPOINT_SUFFIX and read_meta (load_arrays for the checks) from saved.py."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib.util
import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel

from src.scaffold.backend import devices, distributed, guards, hf, saved, sharding, shards
from src.scaffold.backend.api import EpochEnd, TrainOptions
from src.scaffold.backend.loader import EVAL_BATCH, InMemory, Normalise, Streamed, auto_workers
from src.scaffold.backend.precision import choose
from src.scaffold.backend.saved import CHECKPOINT_SUFFIX, load_arrays, read_meta  # noqa: F401
from src.scaffold.backend.schedule import Schedule
from src.scaffold.backend.stepping import StepRun, default_train_step
from src.scaffold.data.sharding import BatchPlan, cpu_count
from src.scaffold.data.splits import Splits
from src.scaffold.errors import CheckpointError
from src.scaffold.outputs import checkpoints, pretrained, truth
from src.scaffold.task import DataShape, Task

log = logging.getLogger(__name__)
CHECK_SAMPLES = 4  # samples the model is tried on before training
SPLITS = ("train", "val", "test")


class TorchBackend:
    """The Task's model trained by its step's optimizer, DDP across ranks."""

    name = "pytorch"
    suffix = CHECKPOINT_SUFFIX
    scheduler_only = False
    inside_epochs = True

    def __init__(self, options: TrainOptions, task: Task) -> None:
        self.importing: threading.Thread | None = None
        self.sharded = options.shard.mode == "full"  # its checkpoints too, on any ranks
        self.options, self.step, self.augment = options, task.step, task.augment
        self.accumulate = options.accumulate
        self.eval_batch = EVAL_BATCH  # samples evaluated at a time (prepare: by the data)
        # init_from's Hugging Face model (hf.py), else src/model.py's chosen one.
        own, init_from = task.model(options.model), options.init_from
        self.spec = (
            own
            if init_from is None
            else hf.spec(init_from, options.lora, options.data.block_size, own.ids)
        )
        self.input_shape = self.spec.input_shape
        place = distributed.placement()
        self.rank, self.world_size = place.rank, place.world_size
        self.local_world_size = place.local_world_size
        self.torch_device = distributed.pick_device(options.device_target, place.device_index)
        self.device = str(self.torch_device)
        where = f"device {place.device_index} ({self.device})"
        self.placement = f"rank {place.rank} of {place.world_size} on {where}"
        self.unseen = None
        if options.device_target == "auto":
            self.unseen = devices.unseen(self.torch_device.type, distributed.LOOKED_FOR)
        if self.torch_device.type == "cpu" and place.local_world_size > 1:
            # Each process would otherwise start a thread per CPU: N times oversubscribed.
            torch.set_num_threads(max(1, cpu_count() // place.local_world_size))
        distributed.join(place, self.torch_device)
        # Sharded over ranks: evaluations and checkpoints are every rank's (run/epochs.py).
        self.collective = self.sharded and self.world_size > 1
        self.precision = choose(options.amp, self.torch_device)
        self.data: dict[str, InMemory | Streamed] = {}
        self.workers, self.stepped = 0, False

    def ahead(self) -> None:
        """torch._dynamo (1-4 s to import at torch.optim's first use), imported behind the data."""

        def run() -> None:
            with contextlib.suppress(Exception):  # the main thread's own import reports it
                importlib.import_module("torch._dynamo")

        if importlib.util.find_spec("torch._dynamo") is not None:  # torch 1.x has none
            self.importing = threading.Thread(target=run, name="import torch._dynamo", daemon=True)
            self.importing.start()

    def _imported(self) -> None:
        """ahead()'s import, finished before loaders fork or the process exits (which aborts)."""
        if self.importing is not None:
            self.importing.join()

    def _built(self, shape: DataShape) -> None:
        """self.net for ``shape``; NHWC for images on the CPU, where oneDNN runs it faster."""
        args = {} if self.options.init_from else self.options.model_args  # src/model.py's
        self.net = guards.build(self.spec, shape, args).to(self.torch_device)
        # Not sharded: FSDP2 takes contiguous parameters only.
        self.channels_last = self.torch_device.type == "cpu" and len(shape.input) == 3
        self.channels_last = self.channels_last and not self.collective
        if self.channels_last:
            self.net = self.net.to(memory_format=torch.channels_last)

    def _batch(self, normalise: Normalise, inputs: np.ndarray) -> torch.Tensor:
        batch = normalise(torch.from_numpy(inputs).to(self.torch_device))
        return batch.contiguous(memory_format=torch.channels_last) if self.channels_last else batch

    def setup(self, splits: Splits, schedule: Schedule) -> None:
        self.schedule, info, options = schedule, splits.info, self.options
        device = self.torch_device
        torch.manual_seed(options.seed)  # the same initial weights on every rank
        self._built(DataShape(info.shape, info.num_classes))
        sharding.apply(self.net, self.spec, self.precision, options.shard, self.collective)
        params = self.net.parameters()
        self.optimizer = self.step.make_optimizer(params, options.lr, options.optimizer)
        # Each group's own lr, scaled by the schedule every step (a checkpoint's is not used).
        self.base_lrs = [group["lr"] for group in self.optimizer.param_groups]
        self.run = StepRun(self.optimizer, self.precision, options.clip_grad_norm, self.step.loss)
        self.train_step = self.step.train_step or default_train_step
        self.model: torch.nn.Module | None = self.net
        if self.world_size > 1 and not self.collective:
            ids = None if device.type == "cpu" else [device.index]
            self.model = DistributedDataParallel(self.net, device_ids=ids)
        normalise = Normalise(info.mean, info.std, len(info.shape), device)
        self.eval_batch = info.eval_batch(options.batch_size)
        self._check_model(splits, normalise)
        self._imported()
        if info.in_memory:
            self.data = {n: InMemory(getattr(splits, n), normalise, device) for n in SPLITS}
            return
        workers = options.data.num_workers
        self.workers = auto_workers(self.local_world_size) if workers is None else workers
        log.info("streaming the data with %d loader workers per rank", self.workers)
        args = (normalise, device, self.workers, options.batch_size)
        crop, flip = options.data.random_crop, options.data.random_flip
        augment = (self.augment, crop, flip) if len(info.shape) == 3 else ()  # images only
        self.data = {
            name: Streamed(getattr(splits, name), *args, *(augment if name == "train" else ()))
            for name in SPLITS
        }

    @torch.no_grad()
    def _check_model(self, splits: Splits, normalise: Normalise) -> None:
        """Samples through the model and src/step.py's metrics: wrong shapes, errors in one line."""
        split = splits.val if len(splits.val) else splits.train
        count = min(len(split), CHECK_SAMPLES)
        inputs = self._batch(normalise, np.stack([split.load(i) for i in range(count)]))
        self.net.eval()
        with self.precision.autocast():
            outputs = guards.try_batch(
                self.spec.name, lambda: self.net(inputs), tuple(inputs.shape)
            )
        self.net.train()
        labels = torch.from_numpy(split.labels_at(slice(0, count))).to(self.torch_device)
        shape, info = tuple(labels.shape), splits.info
        guards.check_outputs(self.spec.name, outputs, shape, info.num_classes, split.numeric)
        if len(shape) > 1:  # not a class or value a sample: the loss says if outputs fit
            guards.try_loss(lambda: self.step.loss(outputs.float(), labels))
        sums = guards.try_metrics(lambda: self.step.metrics(outputs.float(), labels))
        self.sample_metrics = self.step.reduce(sums, count)

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.spec.name,
            "amp": self.precision.name,
            "channels_last": self.channels_last,
            "num_workers": self.workers,
            "shard": self.options.shard.mode,
        }

    def lr(self) -> float:
        """The learning rate of the last step, as the optimizer used it."""
        return float(self.optimizer.param_groups[0]["lr"])

    def _epoch(self, plan: BatchPlan, epoch: int, hook: EpochEnd) -> torch.Tensor:
        """This rank's batches of ``epoch`` through src/step.py's train_step: the mean loss."""
        self.model.train()
        loss_sum = torch.zeros((), device=self.torch_device)
        steps = skipped = plan.skipped(epoch)  # batches a mid-epoch checkpoint had trained
        done, updates = plan.steps_done(epoch - 1), plan.updates_done(epoch - 1)
        run = self.run
        for inputs, labels in self.data["train"].epoch(plan, epoch):
            run.window, run.last = plan.window(epoch, steps)
            if steps % plan.accumulate == 0:
                update = updates + steps // plan.accumulate
                for group, base in zip(self.optimizer.param_groups, self.base_lrs):
                    group["lr"] = self.schedule.scaled(base, update)
            quiet = not run.last and self.model is not self.net  # DDP syncs on a step's last
            with self.model.no_sync() if quiet else contextlib.nullcontext():
                loss = self.train_step(self.model, (inputs, labels), run)
            if not self.stepped and run.last:  # the first optimizer step: the state is there
                self.stepped = True
                sharding.say(self.net, self.optimizer, self.rank, self.world_size, self.options)
            # Summed on the device: .item() every step would stall a GPU (the hook reads few).
            loss_sum += loss.detach().float()
            steps += 1
            hook.step(done + steps, loss.item, self.lr)
        return loss_sum / max(steps - skipped, 1)

    def fit(self, first: int, last: int, plan: BatchPlan, on_epoch_end: EpochEnd) -> None:
        for epoch in range(first, last + 1):
            start = time.perf_counter()
            loss = self._epoch(plan, epoch, on_epoch_end)
            train_loss = distributed.average(loss, self.world_size).item()  # waits for the work
            on_epoch_end(epoch, train_loss, time.perf_counter() - start)
            if distributed.any_rank(on_epoch_end.stopping, self.world_size, self.torch_device):
                return

    @torch.no_grad()
    def evaluate(self, split: str) -> dict[str, float]:
        training = self.net.training  # validate_every: in the middle of an epoch
        self.net.eval()
        sums: dict[str, torch.Tensor] = {}
        count = 0
        for inputs, labels in self.data[split].batches(self.eval_batch):
            with self.precision.autocast():
                logits = self.net(inputs).float()
            for key, value in self.step.metrics(logits, labels).items():
                sums[key] = sums.get(key, 0) + value
            count += len(labels)
        self.net.train(training)
        return self.step.reduce(sums, count)

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        scaler = {} if self.run.scaler is None else {"scaler": self.run.scaler.state_dict()}
        if self.sharded:  # every rank's shards (epochs.py calls it on each), then the file
            held = sharding.state_bytes(self.net, self.optimizer)
            shards.save(path, self.net, self.optimizer, {**meta, **scaler}, sum(held.values()))
            return
        state = {"model": hf.kept(self.net), "optimizer": self.optimizer.state_dict(), **meta}
        state.update(scaler)
        # Through a temporary name, with its checksum: a killed or failed save damages nothing.
        checkpoints.write(path, lambda tmp: torch.save(state, tmp), saved.nbytes(state))

    def _load(self, path: Path, what: str, optimizer: Any = None) -> dict[str, Any]:
        """The checkpoint at ``path``, its weights loaded (and ``optimizer``'s state, from a
        sharded one): one line if made for another model."""
        state = saved.load_state(path, what, self.torch_device)
        own = {k: tuple(v.shape) for k, v in hf.kept(self.net).items()}  # LoRA: adapters
        weights = dict(state.get("model") or {})
        theirs = {k: tuple(v.shape) for k, v in weights.items() if hasattr(v, "shape")}
        if shards.KEY in state:
            theirs = shards.shapes(path, state)
        mismatch = truth.model_mismatch(f"{what} {path}", self.spec.name, own, theirs)
        if mismatch is not None:
            raise mismatch
        if shards.KEY in state:
            shards.load(path, state, self.net, optimizer, what)
            return state
        if self.collective:
            raise CheckpointError(
                f"{what} {path} is a whole model's checkpoint (shard: none): a sharded run "
                f"continues from sharded ones; start from its weights with --pretrained {path}"
            )
        try:
            self.net.load_state_dict(state["model"], strict=len(own) == len(self.net.state_dict()))
        except saved.LOAD_ERRORS as err:
            raise saved.not_this_model(what, path, err) from err
        return state

    def restore(self, path: Path, what: str = "--resume") -> dict[str, int]:
        state = self._load(path, what, self.optimizer)
        whole = shards.KEY not in state
        if whole and "optimizer" not in state and what == "--resume":  # eval.py's: scored
            raise CheckpointError(
                f"{what} {path} holds weights only (export.py --format checkpoint writes these):"
                f" resume from the checkpoint it was written from, or start from its weights "
                f"with --pretrained {path}"
            )
        try:
            if whole and "optimizer" in state:
                self.optimizer.load_state_dict(state["optimizer"])
            if self.run.scaler is not None and "scaler" in state:
                self.run.scaler.load_state_dict(state["scaler"])
            found = {"epoch": state["epoch"], "seed": state["seed"]}
            found["batches"] = state.get("batches", 0)  # a checkpoint_every one's
            return {key: int(value) for key, value in found.items()}
        except saved.LOAD_ERRORS as err:
            raise saved.not_this_model(what, path, err) from err

    def prepare(
        self, shape: DataShape, mean: tuple[float, ...], std: tuple[float, ...], path: Path
    ) -> None:
        self._built(shape)
        self._load(path, "--checkpoint")
        self.prepared = path  # export.py's checkpoint format copies its meta
        self.net.eval()
        self.normalise = Normalise(mean, std, len(shape.input), self.torch_device)

    @torch.inference_mode()
    def infer(self, inputs: np.ndarray) -> np.ndarray:
        batch = self._batch(self.normalise, inputs)
        with self.precision.autocast():
            outputs = self.net(batch)
        return outputs.float().cpu().numpy()

    def load_pretrained(self, path: Path, skip: tuple[str, ...]) -> None:
        state = saved.load_state(path, "--pretrained", self.torch_device)
        # Our checkpoints hold {"model": state_dict, ...}; others are a bare state_dict.
        weights = shards.whole(path, state) if shards.KEY in state else state.get("model", state)
        own = self.net.state_dict()
        shapes = {k: tuple(v.shape) for k, v in weights.items() if hasattr(v, "shape")}
        chosen = pretrained.select(path, {k: tuple(v.shape) for k, v in own.items()}, shapes, skip)
        if self.collective:  # whole tensors on every rank, each keeping its shards of them
            shards.load_whole(self.net, {key: weights[key] for key in chosen})
            return
        own.update({key: weights[key] for key in chosen})
        self.net.load_state_dict(own)

    def agree(self, flag: bool) -> bool:
        return distributed.any_rank(flag, self.world_size, self.torch_device)

    def weights_digest(self) -> str:
        digest = hashlib.sha256()
        if self.collective:  # its float32 shards (the root's bf16 copy stays after a forward)
            self.net.reshard()
        for value in self.net.parameters():  # whole: gathered from every rank when sharded
            digest.update(sharding.full(value.detach()).cpu().contiguous().numpy().tobytes())
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
