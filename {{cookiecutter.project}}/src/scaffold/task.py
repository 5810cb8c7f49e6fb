"""The contract between your three files and the floor: what @model records, what a model
function is given (DataShape), and Task, the one object train.py gathers them into."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Any, Callable

from src.scaffold.data.formats import claim
from src.scaffold.data.readers import BUILTIN, Reader, augment
from src.scaffold.errors import ConfigError

# What src/step.py must define: the same three functions in both frameworks.
STEP_FUNCTIONS = ("loss", "optimizer", "metrics")
COUNT = "count"  # a metric sum's divisor, where step.metrics gives one (tokens); else samples


@dataclass(frozen=True)
class DataShape:
    """One sample's shape, (C, H, W), (F,) or (T,) ids, and the outputs: the classes (a
    sample's, or a position's), or 1 for values."""

    input: tuple[int, ...]
    num_classes: int


@dataclass(frozen=True)
class ModelSpec:
    """A model function and what @model said of it."""

    name: str
    build: Callable[[DataShape], Any]
    input_shape: tuple[int, ...]  # the input of a --smoke run (no data to read it from)
    head: str  # the output layer: left initialised by --pretrained with other classes
    where: str  # file:line, for the lines that name it
    ids: bool = False  # takes integer ids (tokens) below its classes, scores a class a position
    blocks: str = ""  # the attribute holding its repeated blocks: what shard: full splits by


MODEL_NAMES: dict[str, str] = {}  # the models' names and where each is defined


def model(
    name: str, input_shape: tuple[int, ...], head: str = "", ids: bool = False, blocks: str = ""
) -> Callable:
    """Mark a model function as the model ``name``; a name already taken is refused. ``ids``:
    it takes integer ids (a language model's tokens) and scores a class at each position (what
    a --smoke run without data feeds it). ``blocks``: the attribute (a dotted path) of the
    model's list of repeated blocks, each its own shard with shard: full."""

    def mark(build: Callable[[DataShape], Any]) -> Callable[[DataShape], Any]:
        where = claim("model", name, build, MODEL_NAMES)
        spec = ModelSpec(name, build, tuple(input_shape), head, where, ids, blocks)
        build.model_spec = spec  # type: ignore[attr-defined]
        return build

    return mark


def image_input(name: str, shape: DataShape) -> tuple[int, int, int]:
    """(C, H, W) of image data; one clear line for data a model of images cannot take."""
    if len(shape.input) != 3:
        raise ValueError(
            f"model {name} takes images (C, H, W); the data's samples have shape {shape.input}: "
            "use mlp, or a model of your own"
        )
    channels, height, width = shape.input
    return channels, height, width


@dataclass(frozen=True)
class Monitor:
    """The validation metric that chooses the best checkpoint, and which way is better."""

    metric: str = "accuracy"
    mode: str = "max"

    def better(self, new: float, old: float) -> bool:
        return new > old if self.mode == "max" else new < old

    def key(self, value: float) -> float:
        """A sort key under which larger is better."""
        return value if self.mode == "max" else -value

    def check(self) -> None:
        """Refuse a mode against a metric whose direction is known (a loss, an accuracy)."""
        if (known := direction(self.metric)) not in (None, self.mode):
            better = "smaller" if known == "min" else "larger"
            raise ConfigError(
                f"monitor.mode {self.mode} with monitor.metric {self.metric}: a {better} "
                f"{self.metric} is better, so the best checkpoint would be the worst; set "
                f"monitor.mode: {known} in config.yaml (or --monitor_mode {known})"
            )


# Metrics whose better direction is known, by name (and by the end of a name: val_loss).
LOWER_BETTER = ("loss", "perplexity", "ppl", "error", "mse", "mae", "rmse", "cer", "wer")
HIGHER_BETTER = ("accuracy", "acc", "f1", "precision", "recall", "auc", "iou", "miou", "dice")


def direction(metric: str) -> str | None:
    """min or max for a metric whose better way is known by its name; None otherwise."""
    name = metric.lower()
    for words, way in ((LOWER_BETTER, "min"), (HIGHER_BETTER, "max")):
        # The first word (loss, accuracy) also ends a name without "_": valloss.
        if name in words or name.endswith((words[0], *(f"_{word}" for word in words))):
            return way
    return None


@dataclass(frozen=True)
class Step:
    """src/step.py's functions: loss(outputs, labels), optimizer(params, lr, options by
    name), metrics(outputs, labels) -> per-batch sums, and train_step."""

    loss: Callable[..., Any]
    optimizer: Callable[..., Any]
    metrics: Callable[..., dict[str, Any]]
    # One batch of training (None: the floor's): PyTorch's train_step(model, batch, run);
    # MindSpore's train_step(net, batch) returns the loss the floor differentiates.
    train_step: Callable[..., Any] | None = None
    # Metrics made from the means of the others (perplexity: exp of the loss), if any.
    derived: Callable[[dict[str, float]], dict[str, float]] | None = None

    def reduce(self, sums: dict[str, Any], samples: int) -> dict[str, float]:
        """The metrics over a split: its sums divided by their summed "count" (tokens, where
        step.metrics gives one) or by its samples, with the step's derived metrics."""
        sums = {name: float(value) for name, value in sums.items()}
        count = sums.pop(COUNT, samples)
        means = {name: value / max(count, 1) for name, value in sums.items()}
        return {**means, **(self.derived(means) if self.derived else {})}

    def optimizer_args(self, options: dict[str, Any]) -> dict[str, Any]:
        """The optimizer's further parameters from the options of their names (or their
        defaults); one named cfg gets all the options as attributes (an older step.py)."""
        given = {}
        for name, param in list(inspect.signature(self.optimizer).parameters.items())[2:]:
            if name == "cfg":
                given[name] = SimpleNamespace(**options)
            elif name in options:
                given[name] = options[name]
            elif param.default is inspect.Parameter.empty:
                raise ConfigError(
                    f"src/step.py's optimizer asks for {name!r}, which is no option of "
                    "config.yaml: name one (momentum, lr ...) or give it a default"
                )
        return given

    def make_optimizer(self, params: Any, lr: Any, args: dict[str, Any]) -> Any:
        return self.optimizer(params, lr, **args)


@dataclass(frozen=True)
class Task:
    """Your project as one object: models, readers, augmentation, training step and monitor."""

    models: dict[str, ModelSpec]
    step: Step
    readers: dict[str, type[Reader]] = field(default_factory=lambda: dict(BUILTIN))
    augment: Callable[..., Any] = augment
    monitor: Monitor = Monitor()

    @classmethod
    def gather(
        cls, model: ModuleType, data: ModuleType, step: ModuleType, monitor: Monitor = Monitor()
    ) -> Task:
        """The Task of your src/model.py, src/data.py and src/step.py."""
        # @model and @reader refused a second place for a name when they marked it.
        models = {
            spec.name: spec
            for value in vars(model).values()
            if isinstance(spec := getattr(value, "model_spec", None), ModelSpec)
            and spec.build is value
        }
        if not models:
            raise ConfigError(f"{model.__file__} defines no model: mark one with @model(...)")
        readers = dict(BUILTIN)
        readers.update(
            (value.name, value)
            for value in vars(data).values()
            if inspect.isclass(value)
            and issubclass(value, Reader)
            and value.__module__ == data.__name__
            and getattr(value, "name", None)
        )
        missing = [name for name in STEP_FUNCTIONS if not callable(getattr(step, name, None))]
        if missing:
            raise ConfigError(f"{step.__file__} lacks {', '.join(missing)}: see its docstring")
        named = (*STEP_FUNCTIONS, "train_step", "derived")
        functions = Step(*(getattr(step, name, None) for name in named))
        return cls(models, functions, readers, getattr(data, "augment", augment), monitor)

    def model(self, name: str | None) -> ModelSpec:
        """The model called ``name`` (None: the only one)."""
        if name is None:
            if len(self.models) == 1:
                return next(iter(self.models.values()))
            raise ConfigError(
                f"src/model.py has {', '.join(self.models)}: choose one with model: in "
                "config.yaml or --model"
            )
        if name not in self.models:
            raise ConfigError(f"unknown model {name!r}; src/model.py has {', '.join(self.models)}")
        return self.models[name]

    def check_metrics(self, scores: dict[str, float]) -> None:
        """The monitored metric must be one step.metrics returns."""
        if self.monitor.metric not in scores:
            raise ConfigError(
                f"monitor.metric {self.monitor.metric!r} is not among the metrics src/step.py "
                f"returns ({', '.join(scores)}): set monitor.metric in config.yaml"
            )
