"""The errors a user or the platform can cause; train.py prints them as one line and exits 2."""


class TrainError(Exception):
    """Base class: a problem with the input or the platform, not a bug (no traceback is shown)."""


class ConfigError(TrainError):
    """A missing or unreadable config file or a bad option value."""


class DatasetError(TrainError):
    """The dataset is missing, ambiguous or malformed; names the paths searched."""


class CheckpointError(TrainError):
    """A checkpoint or pretrained weights are missing or do not fit the model."""


class DiskFullError(TrainError):
    """A checkpoint or record file did not fit on the disk: names it, the bytes needed and free."""


class DeviceError(TrainError):
    """The device is not available, or a multi-rank start lacks the variables it needs."""


class StorageError(TrainError):
    """A copy between the platform's storage and the node failed, or a rank waited too long."""


class Stopped(BaseException):
    """The platform stopped the job (SIGTERM, SIGINT): exit 128 + the signal after uploading.
    A BaseException, so that an ``except Exception`` around a copy cannot swallow the stop."""

    def __init__(self, signum: int, name: str) -> None:
        super().__init__(f"stopped by {name}")
        self.signum = signum
