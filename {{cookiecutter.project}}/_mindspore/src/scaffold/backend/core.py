"""MindSpore's Backend (api.py): device, model, amp, evaluation, checkpoints; train_loop trains."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import nn, ops
from mindspore.amp import auto_mixed_precision

from src.scaffold.backend import devices, guards, recompute, saved, shards
from src.scaffold.backend.api import EpochEnd
from src.scaffold.backend.context import init_env
from src.scaffold.backend.loader import Loader, typed
from src.scaffold.backend.options import (
    MSOptions,
    check_step_options,
    pytorch_only,
    sink_on,
)

# read_meta and load_arrays are this module's too (api.Framework, checks/test_train.py).
from src.scaffold.backend.saved import CHECKPOINT_SUFFIX, load_arrays, read_meta  # noqa: F401
from src.scaffold.backend.schedule import Schedule
from src.scaffold.backend.train_loop import LOOP, fit
from src.scaffold.data.normalise import Normalise
from src.scaffold.data.sharding import BatchPlan
from src.scaffold.data.splits import Splits
from src.scaffold.outputs import checkpoints, pretrained, truth
from src.scaffold.outputs.checkpoints import usual_mode
from src.scaffold.task import DataShape, Task

log = logging.getLogger(__name__)
CHECK_SAMPLES = 4  # tried through the model before training
# The optimizer's learning-rate parameter: from the config, never from a checkpoint.
LR = "learning_rate"


class MindSporeBackend:
    """The Task's model trained with its step's loss and optimizer, data parallel over the ranks."""

    name = "mindspore"
    suffix = CHECKPOINT_SUFFIX
    net: nn.Cell
    optimizer: nn.Optimizer
    loader: Loader

    def __init__(self, options: MSOptions, task: Task) -> None:
        check_step_options(options, LOOP, sink=False)  # before the device starts
        pytorch_only(options)
        ctx = init_env(options)  # shard: full on the CPU is one line before the device starts
        # shard: full on 2+ ranks, optimizer parallel: a slice a rank, saved by every rank.
        self.collective = ctx.strategy is not None
        self.strategy = ctx.strategy
        self.step, self.augment = task.step, task.augment
        # msrun's scheduler never gets here: its init() coordinates the job, then exits.
        self.scheduler_only = os.environ.get("MS_ROLE") == "MS_SCHED"
        self.rank, self.world_size, self.target = ctx.rank, ctx.group_size, ctx.device_target
        self.device = self.target + ("" if ctx.device_id is None else f":{ctx.device_id}")
        self.placement = f"rank {self.rank} of {self.world_size} on {self.device}"
        found = {"Ascend": "npu", "GPU": "cuda"}.get(self.target, "cpu")
        backends = "MindSpore's Ascend and GPU backends (loaded when CANN or CUDA is)"
        self.unseen = devices.unseen(found, backends) if options.device_target == "auto" else None
        self.options = options
        # Checked before the data is read: a typo fails in a second, not after staging.
        self.spec = task.model(options.model)
        self.input_shape = self.spec.input_shape
        self.amp = options.amp == "true" or (options.amp == "auto" and self.target != "CPU")
        self.sink = sink_on(options.dataset_sink_mode, self.target, self.collective)
        if options.dataset_sink_mode == "true" and not self.sink:
            log.info("MindSpore has no data sink on the CPU: training without it")
        self.accumulate = options.accumulate
        check_step_options(options, LOOP, self.sink)
        self.inside_epochs = LOOP == "custom" and not self.sink

    def describe(self) -> dict[str, Any]:
        amp = self.options.amp_level.upper() if self.amp else "O0"
        return dict(model=self.spec.name, train_loop=LOOP, amp=amp, dataset_sink_mode=self.sink)

    def setup(self, splits: Splits, schedule: Schedule) -> None:
        info, opts = splits.info, self.options
        # Seeded again here: every rank builds the same initial weights, whatever ran before.
        ms.set_seed(opts.seed)
        self.net = guards.build(self.spec, DataShape(info.shape, info.num_classes), opts.model_args)
        recompute.apply(self.net, self.spec, opts.shard.activation_checkpointing)
        if self.amp:
            # float16 compute; the loops scale the loss and skip steps that overflow.
            self.net = auto_mixed_precision(self.net, opts.amp_level.upper())
        # A list is a dynamic learning rate (one value per optimizer step); a number is constant.
        lr = schedule.base if schedule.constant else schedule.values()
        self.optimizer = self.step.make_optimizer(self.net.trainable_params(), lr, opts.optimizer)
        # A dynamic rate is a schedule cell holding the table as its own parameter.
        table = getattr(self.optimizer.learning_rate, "learning_rate", self.optimizer.learning_rate)
        self.lrs = np.asarray(table.asnumpy(), dtype=np.float32).reshape(-1)
        self.loader = Loader(splits, opts.data, opts.batch_size, self.world_size, self.augment)
        self._check_model(splits)

    def _check_model(self, splits: Splits) -> None:
        """A few samples through the model: a wrong output shape or a model error is one line."""
        split = splits.val if len(splits.val) else splits.train
        count = min(len(split), CHECK_SAMPLES)
        inputs = self.loader.normalise(np.stack([split.load(i) for i in range(count)]))
        training, mode, name = self.net.training, ms.get_context("mode"), self.spec.name
        self.net.set_train(False)
        # Op by op: a graph compiled for these few samples would serve nothing (0.2 s on a CPU).
        ms.set_context(mode=ms.PYNATIVE_MODE)
        labels = typed(split.labels_at(slice(0, count)))
        try:
            outputs = guards.try_batch(name, lambda: self.net(ms.Tensor(inputs)), inputs.shape)
            guards.check_outputs(
                name, outputs, labels.shape, splits.info.num_classes, split.numeric
            )
            if labels.ndim > 1:  # not a class or value a sample: the loss says if outputs fit
                guards.try_loss(lambda: self.step.loss(outputs, ms.Tensor(labels)))
        finally:
            ms.set_context(mode=mode)
        self.net.set_train(training)
        # src/step.py's metrics on the same batch: the names the run will record, known now.
        scores = guards.try_metrics(lambda: self.step.metrics(outputs.asnumpy(), labels))
        self.sample_metrics = self.step.reduce(scores, count)

    def fit(self, first: int, last: int, plan: BatchPlan, on_epoch_end: EpochEnd) -> None:
        try:
            fit(self, first, last, plan, on_epoch_end)
        except RuntimeError as err:
            broken = self.loader.broken_image(err)
            if broken is None:
                raise
            raise broken from err

    def any_rank(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is on one (what rank 0 alone decides)."""
        if self.world_size == 1:
            return flag
        # A sum: the CPU's AllReduce has no max.
        value = ops.AllReduce()(ms.Tensor(np.array([float(flag)], np.float32)))
        return bool(value.asnumpy()[0] > 0)

    def lr_of(self, step: int) -> float:
        """The learning rate the optimizer used for step ``step`` (1-based over the run)."""
        return float(self.lrs[min(step - 1, len(self.lrs) - 1)])

    def loss_cell(self) -> nn.Cell:
        """src/step.py's train_step on the network: the Cell the training loops differentiate."""
        return LossCell(self.net, self.step.loss, self.step.train_step)

    def evaluate(self, split: str) -> dict[str, float]:
        """The mean of each metric over every sample of the split (the last batch partial)."""
        training = self.net.training
        self.net.set_train(False)  # BatchNorm uses its running statistics
        sums: dict[str, float] = {}
        count = 0
        for inputs, labels in self.loader.batches(split):
            outputs = self.net(ms.Tensor(inputs)).asnumpy()
            for name, value in self.step.metrics(outputs, np.asarray(labels)).items():
                sums[name] = sums.get(name, 0.0) + float(value)
            count += len(labels)
        self.net.set_train(training)
        return self.step.reduce(sums, count)

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        # One entry per name (the optimizer's include the net's); no LR: the schedule gives it.
        every = (*self.net.get_parameters(), *self.optimizer.get_parameters())
        params = {p.name: p for p in every if p.name != LR}
        entries = [{"name": name, "data": p} for name, p in params.items()]
        # append_dict takes numbers and strings: names, lists and None go as JSON text.
        numbers = (*saved.META, saved.PARTIAL)
        append = {k: v if k in numbers else json.dumps(v) for k, v in meta.items()}
        needed = sum(p.nbytes for p in params.values())
        if self.collective:  # each rank's slices, then rank 0 the file naming them
            ranks, barrier = (self.rank, self.world_size), lambda: self.any_rank(False)
            shards.save(path, entries, append, self.strategy, ranks, barrier, needed)
            return

        def save(tmp: Path) -> None:
            ms.save_checkpoint(entries, str(tmp), append_dict=append)
            usual_mode(tmp)

        # Through a temporary name, with its checksum: a killed or failed save damages nothing.
        # MindSpore's own CRITICAL line for a failed save is left out: the error says it.
        logging.disable(logging.CRITICAL)
        try:
            checkpoints.write(path, save, needed)
        finally:
            logging.disable(logging.NOTSET)

    def _fits(self, what: str, path: Path, params: dict[str, Any]) -> None:
        """One short line, before MindSpore logs a CRITICAL one, for another model's weights."""
        own = {name: tuple(p.shape) for name, p in self.net.parameters_dict().items()}
        theirs = {k: tuple(params[k].shape) for k in own if hasattr(params.get(k), "shape")}
        mismatch = truth.model_mismatch(f"{what} {path}", self.spec.name, own, theirs)
        if mismatch is not None:
            raise mismatch

    def _load(self, what: str, path: Path, params: dict[str, Any], *cells: nn.Cell) -> None:
        """``params`` into ``cells``, or one line naming what does not fit."""
        try:
            loads = [ms.load_param_into_net(cell, params, strict_load=True) for cell in cells]
        except saved.LOAD_ERRORS as err:
            raise saved.not_this_model(what, path, err) from err
        missing = [name for lost, _ in loads for name in lost if name != LR]
        if missing:
            raise saved.not_this_model(what, path, f"it lacks {', '.join(missing[:5])}")

    def restore(self, path: Path, what: str = "--resume") -> dict[str, int]:
        params = shards.whole_if_sharded(path, saved.load_params(path, what), what)
        self._fits(what, path, params)
        try:
            meta = {key: int(params.pop(key).asnumpy()) for key in saved.META}
            batches = params.pop(saved.PARTIAL, None)
            meta[saved.PARTIAL] = 0 if batches is None else int(batches.asnumpy())
        except saved.LOAD_ERRORS as err:
            raise saved.not_this_model(what, path, err) from err
        for key in (*saved.CHECKPOINT_META, LR):  # what describes the data; older ones carry LR
            params.pop(key, None)
        # The schedule's learning rate, given so that MindSpore loads it without a warning.
        params.update({p.name: p for p in self.optimizer.get_parameters() if p.name == LR})
        self._load(what, path, params, self.net, self.optimizer)
        return meta

    def prepare(
        self, shape: DataShape, mean: tuple[float, ...], std: tuple[float, ...], path: Path
    ) -> None:
        """The checkpoint's model, built for ``shape``, in eval mode (no optimizer state)."""
        self.net = guards.build(self.spec, shape, self.options.model_args)
        params = shards.whole_if_sharded(
            path, saved.load_params(path, "--checkpoint"), "--checkpoint"
        )
        for key in (*saved.BOOKKEEPING, LR):
            params.pop(key, None)
        self._fits("--checkpoint", path, params)
        self._load("--checkpoint", path, params, self.net)
        self.net.set_train(False)
        self.normalise = Normalise(mean, std, len(shape.input))

    def infer(self, inputs: np.ndarray) -> np.ndarray:
        outputs = self.net(ms.Tensor(self.normalise(inputs)))
        return np.asarray(outputs.asnumpy(), dtype=np.float32)

    def load_pretrained(self, path: Path, skip: tuple[str, ...]) -> None:
        params = shards.whole_if_sharded(
            path, saved.load_params(path, "--pretrained"), "--pretrained"
        )
        # Every parameter of the net: BatchNorm's running statistics are weights here too.
        own = {name: tuple(p.shape) for name, p in self.net.parameters_dict().items()}
        shapes = {k: tuple(v.shape) for k, v in params.items() if hasattr(v, "shape")}
        chosen = pretrained.select(path, own, shapes, skip)
        ms.load_param_into_net(self.net, {k: params[k] for k in chosen})

    def agree(self, flag: bool) -> bool:
        return self.any_rank(flag)  # asked only where collective: shard: full

    def weights_digest(self) -> str:
        # Trainable parameters: equal on every rank (BatchNorm's moving statistics are not).
        digest = hashlib.sha256()
        for param in self.net.trainable_params():
            digest.update(np.ascontiguousarray(param.asnumpy()).tobytes())
        return digest.hexdigest()[:16]

    def ahead(self) -> None:
        """Nothing to begin ahead: MindSpore compiles at the first step."""

    def close(self) -> None:
        """The loader processes stop (the strategy file goes); MindSpore leaves its process group
        at exit."""
        loader = getattr(self, "loader", None)
        if loader is not None:
            loader.close()
        strategy = getattr(self, "strategy", None)
        if strategy is not None:  # copied into each sharded checkpoint (shards.py)
            strategy.unlink(missing_ok=True)


class LossCell(nn.Cell):
    """A batch's loss as a Cell: src/step.py's train_step(net, batch), else its loss(outputs)."""

    def __init__(self, net: nn.Cell, loss: Any, train_step: Any = None) -> None:
        super().__init__(auto_prefix=False)  # the parameters keep the network's names
        self.net, self.loss, self.train_step = net, loss, train_step
        self.own = train_step is not None  # a constant: the compiled graph keeps one branch

    def construct(self, inputs: ms.Tensor, labels: ms.Tensor) -> ms.Tensor:
        if self.own:
            return self.train_step(self.net, (inputs, labels))
        return self.loss(self.net(inputs), labels)


OPTIONS = MSOptions


def create(options: MSOptions, task: Task) -> MindSporeBackend:
    """The Backend of a MindSpore run (train.py hands it to the run)."""
    return MindSporeBackend(options, task)
