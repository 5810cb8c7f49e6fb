"""The errors a user or the platform can cause; train.py prints them as one line and exits 2."""


class TrainError(Exception):
    """Base class: a problem with the input or the platform, not a bug (no traceback is shown)."""


class ConfigError(TrainError):
    """Raised for a missing or unreadable config file or a bad option value."""


class DatasetError(TrainError):
    """Raised when the dataset is missing, ambiguous or malformed; names the paths searched."""


class CheckpointError(TrainError):
    """Raised when a checkpoint to resume from or pretrained weights to load are missing or do
    not fit the model; names the file and, for a shape mismatch, the layer."""


class DeviceError(TrainError):
    """Raised when the requested device is not available, or a multi-rank start lacks what the
    ranks need to meet (the message names the missing variables)."""


class StorageError(TrainError):
    """Raised when copying between the platform's storage and the node fails, or a rank waits
    too long for the copy another rank makes; names the source and the destination."""


class Stopped(BaseException):
    """Raised in the main thread when the platform stops the job (SIGTERM, SIGINT): the runner
    uploads what the finished epochs left, then exits with 128 + the signal number.

    A BaseException, like KeyboardInterrupt: an ``except Exception`` around a copy or in a
    user's loop must not swallow the stop (an upload would be retried, training go on)."""

    def __init__(self, signum: int, name: str) -> None:
        super().__init__(f"stopped by {name}")
        self.signum = signum
