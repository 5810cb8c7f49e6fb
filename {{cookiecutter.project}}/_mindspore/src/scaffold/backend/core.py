"""MindSpore's side of a run (src/scaffold/backend/api.py): device and process group, the
Task's model for the data's shape, mixed precision, evaluation and checkpoints. The
epochs themselves run in src/scaffold/backend/train_loop.py: Model.train with callbacks,
or a hand-written loop; both take their batches from src/scaffold/backend/loader.py."""

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

from src.scaffold.backend import devices, guards
from src.scaffold.backend.api import EpochEnd
from src.scaffold.backend.context import init_env
from src.scaffold.backend.loader import Loader
from src.scaffold.backend.options import MSOptions, check_step_options, sink_on
from src.scaffold.backend.saved import (  # noqa: F401 (read_meta, load_arrays: this module's too)
    BOOKKEEPING,
    CHECKPOINT_SUFFIX,
    DATA_META,
    LOAD_ERRORS,
    META,
    PARTIAL,
    load_arrays,
    load_params,
    not_this_model,
    read_meta,
)
from src.scaffold.backend.schedule import Schedule
from src.scaffold.backend.train_loop import LOOP, fit
from src.scaffold.data.normalise import Normalise
from src.scaffold.data.sharding import BatchPlan
from src.scaffold.data.splits import Splits
from src.scaffold.errors import CheckpointError
from src.scaffold.outputs import pretrained, truth
from src.scaffold.outputs.checkpoints import usual_mode
from src.scaffold.task import DataShape, Task

log = logging.getLogger(__name__)
# Samples the model is tried on before training.
CHECK_SAMPLES = 4
# The optimizer's learning-rate parameter: from the config, never from a checkpoint.
LR = "learning_rate"


class MindSporeBackend:
    """The Task's model trained with its step's loss and optimizer; gradients averaged over
    the ranks (data parallel)."""

    name = "mindspore"
    suffix = CHECKPOINT_SUFFIX
    net: nn.Cell
    optimizer: nn.Optimizer
    loader: Loader

    def __init__(self, options: MSOptions, task: Task) -> None:
        check_step_options(options, LOOP, sink=False)  # before the device starts
        ctx = init_env(options)
        self.step, self.augment = task.step, task.augment
        # msrun's scheduler never gets here: its init() coordinates the job, then exits.
        self.scheduler_only = os.environ.get("MS_ROLE") == "MS_SCHED"
        self.rank, self.world_size, self.target = ctx.rank, ctx.group_size, ctx.device_target
        self.device = ctx.device_target
        if ctx.device_id is not None:
            self.device += f":{ctx.device_id}"
        self.placement = f"rank {self.rank} of {self.world_size} on {self.device}"
        found = {"Ascend": "npu", "GPU": "cuda"}.get(self.target, "cpu")
        self.unseen = (
            devices.unseen(
                found, "MindSpore's Ascend and GPU backends (loaded when CANN or CUDA is)"
            )
            if options.device_target == "auto"
            else None
        )
        self.options = options
        # Checked before the data is read: a typo fails in a second, not after staging.
        self.spec = task.model(options.model)
        self.input_shape = self.spec.input_shape
        self.amp = options.amp == "true" or (options.amp == "auto" and self.target != "CPU")
        self.sink = sink_on(options.dataset_sink_mode, self.target)
        if options.dataset_sink_mode == "true" and not self.sink:
            log.info("MindSpore has no data sink on the CPU: training without it")
        self.accumulate = options.accumulate
        check_step_options(options, LOOP, self.sink)

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.spec.name,
            "train_loop": LOOP,
            "amp": self.options.amp_level.upper() if self.amp else "O0",
            "dataset_sink_mode": self.sink,
        }

    def setup(self, splits: Splits, schedule: Schedule) -> None:
        info = splits.info
        # Seeded again here: every rank builds the same initial weights, whatever ran before.
        ms.set_seed(self.options.seed)
        self.net = guards.build(self.spec, DataShape(tuple(info.shape), info.num_classes))
        if self.amp:
            # float16 compute; the loops then scale the loss dynamically and skip steps
            # whose gradients overflow.
            self.net = auto_mixed_precision(self.net, self.options.amp_level.upper())
        # A list is MindSpore's dynamic learning rate: one value per step, looked up by the
        # optimizer's global step. A plain number when every step trains at lr.
        lr = schedule.base if schedule.constant else schedule.values()
        self.optimizer = self.step.make_optimizer(
            self.net.trainable_params(), lr, self.options.optimizer
        )
        self.lrs = self._lr_table()
        self.loader = Loader(
            splits, self.options.data, self.options.batch_size, self.world_size, self.augment
        )
        self._check_model(splits)

    def _check_model(self, splits: Splits) -> None:
        """A few samples through the model before training: outputs of another shape than
        the data needs, or an error in the model, are one line now, not a traceback later."""
        split = splits.val if len(splits.val) else splits.train
        count = min(len(split), CHECK_SAMPLES)
        inputs = self.loader.normalise(np.stack([split.load(i) for i in range(count)]))
        training = self.net.training
        self.net.set_train(False)
        name = self.spec.name
        # Op by op (PyNative): a graph compiled for 4 samples would serve nothing after it
        # (0.2 s on a CPU); the training graph is compiled, and checked, by its first step.
        mode = ms.get_context("mode")
        ms.set_context(mode=ms.PYNATIVE_MODE)
        try:
            outputs = guards.try_batch(name, lambda: self.net(ms.Tensor(inputs)), inputs.shape)
        finally:
            ms.set_context(mode=mode)
        self.net.set_train(training)
        info = splits.info
        guards.check_outputs(name, outputs, count, info.num_classes, split.numeric)
        labels = np.asarray(split.labels[:count])
        # src/step.py's metrics on the same batch: the names the run will record, known now.
        self.sample_metrics = guards.try_metrics(
            lambda: self.step.metrics(outputs.asnumpy(), labels)
        )

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

    def _lr_table(self) -> np.ndarray:
        """The optimizer's learning rates: one per step (dynamic), or one for all."""
        lr = self.optimizer.learning_rate
        # A dynamic rate is a schedule cell holding the table as its own parameter.
        table = getattr(lr, "learning_rate", lr)
        return np.asarray(table.asnumpy(), dtype=np.float32).reshape(-1)

    def lr_of(self, step: int) -> float:
        """The learning rate the optimizer used for step ``step`` (1-based over the run)."""
        return float(self.lrs[min(step - 1, len(self.lrs) - 1)])

    def loss_cell(self) -> nn.Cell:
        """src/step.py's train_step on the network: the Cell the training loops differentiate."""
        return LossCell(self.net, self.step.loss, self.step.train_step)

    def evaluate(self, split: str) -> dict[str, float]:
        """The mean of each metric over every sample of the split; the last batch, usually
        smaller than the others, is taken as it is."""
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
        return {name: total / max(count, 1) for name, total in sums.items()}

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        # The optimizer's parameters include the network's: one entry per name. The learning
        # rate is left out: config.yaml's schedule gives it, also to a resumed run.
        every = (*self.net.get_parameters(), *self.optimizer.get_parameters())
        params = {p.name: p for p in every if p.name != LR}
        # Write then rename: a job killed mid-save leaves the previous checkpoint intact.
        tmp = path.with_name(f".{path.stem}.tmp.ckpt")
        entries = [{"name": name, "data": p} for name, p in params.items()]
        # append_dict takes numbers and strings: what describes the model and the data
        # (names, lists, None) goes as JSON text.
        append = {k: v if k in (*META, PARTIAL) else json.dumps(v) for k, v in meta.items()}
        ms.save_checkpoint(entries, str(tmp), append_dict=append)
        os.replace(tmp, path)
        usual_mode(path)

    def _fits(self, what: str, path: Path, params: dict[str, Any]) -> None:
        """One short line when the checkpoint's weights were made for another model than
        the one src/model.py builds now: a parameter it lacks or holds in another shape
        (its optimizer state is not compared: its names are the optimizer's)."""
        own = {name: tuple(p.shape) for name, p in self.net.parameters_dict().items()}
        theirs = {k: tuple(params[k].shape) for k in own if hasattr(params.get(k), "shape")}
        mismatch = truth.model_mismatch(f"{what} {path}", self.spec.name, own, theirs)
        if mismatch is not None:
            raise mismatch

    def restore(self, path: Path, what: str = "--resume") -> dict[str, int]:
        params = load_params(path, what)
        self._fits(what, path, params)
        try:
            meta = {key: int(params.pop(key).asnumpy()) for key in META}
            meta[PARTIAL] = int(params.pop(PARTIAL).asnumpy()) if PARTIAL in params else 0
            for key in (*DATA_META, LR):  # what describes the data; older ones carry LR
                params.pop(key, None)
            # The learning rate is the schedule's, never the checkpoint's: given as it is, so
            # that MindSpore loads it without a warning that it was not in the file.
            params.update({p.name: p for p in self.optimizer.get_parameters() if p.name == LR})
            missing, _ = ms.load_param_into_net(self.net, params, strict_load=True)
            missing += ms.load_param_into_net(self.optimizer, params, strict_load=True)[0]
            missing = [name for name in missing if name != LR]
        except LOAD_ERRORS as err:
            raise not_this_model(what, path, err) from err
        if missing:
            lacks = ", ".join(missing[:5])
            raise CheckpointError(
                f"{what} {path} is not a checkpoint of this model: it lacks {lacks}"
            )
        return meta

    def prepare(
        self, shape: DataShape, mean: tuple[float, ...], std: tuple[float, ...], path: Path
    ) -> None:
        """The model of the checkpoint at ``path`` built for ``shape``, holding its weights
        (not the optimizer's state), in eval mode; inputs normalised as training did."""
        self.net = guards.build(self.spec, shape)
        params = load_params(path, "--checkpoint")
        for key in (*BOOKKEEPING, LR):
            params.pop(key, None)
        # Shapes compared first: MindSpore logs its own CRITICAL line for a mismatch.
        self._fits("--checkpoint", path, params)
        try:
            missing, _ = ms.load_param_into_net(self.net, params, strict_load=True)
        except LOAD_ERRORS as err:
            raise not_this_model("--checkpoint", path, err) from err
        if missing:
            raise CheckpointError(
                f"--checkpoint {path} is not a checkpoint of this model: it lacks "
                + ", ".join(missing[:5])
            )
        self.net.set_train(False)
        self.normalise = Normalise(mean, std, len(shape.input))

    def infer(self, inputs: np.ndarray) -> np.ndarray:
        outputs = self.net(ms.Tensor(self.normalise(inputs)))
        return np.asarray(outputs.asnumpy(), dtype=np.float32)

    def load_pretrained(self, path: Path, skip: tuple[str, ...]) -> None:
        params = load_params(path, "--pretrained")
        # Every parameter of the net: BatchNorm's running statistics are weights here too.
        own = {name: tuple(p.shape) for name, p in self.net.parameters_dict().items()}
        shapes = {k: tuple(v.shape) for k, v in params.items() if hasattr(v, "shape")}
        chosen = pretrained.select(path, own, shapes, skip)
        ms.load_param_into_net(self.net, {k: params[k] for k in chosen})

    def weights_digest(self) -> str:
        # Trainable parameters: what averaged gradients keep equal on every rank. BatchNorm's
        # moving statistics are each rank's own, from its own batches.
        digest = hashlib.sha256()
        for param in self.net.trainable_params():
            digest.update(np.ascontiguousarray(param.asnumpy()).tobytes())
        return digest.hexdigest()[:16]

    def ahead(self) -> None:
        """Nothing to begin ahead: MindSpore compiles at the first step."""

    def close(self) -> None:
        """The loader processes stop; MindSpore leaves its process group at exit."""
        loader = getattr(self, "loader", None)
        if loader is not None:
            loader.close()


class LossCell(nn.Cell):
    """A batch's loss as a Cell (what Model.train and value_and_grad take): src/step.py's
    train_step(net, batch), else its loss of the network's outputs. Compiled with the step."""

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
