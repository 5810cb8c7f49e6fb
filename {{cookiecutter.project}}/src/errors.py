"""The errors a user can cause; train.py prints them as one line and exits with status 2."""


class TrainError(Exception):
    """Base class: a problem with the user's input, not a bug (no traceback is shown)."""


class ConfigError(TrainError):
    """Raised for a missing or unreadable config file or a bad option value."""


class DatasetError(TrainError):
    """Raised when the dataset is missing or malformed; names the paths searched."""


class CheckpointError(TrainError):
    """Raised when --resume names a file that is missing or is not a checkpoint of this model."""


class DeviceError(TrainError):
    """Raised when the requested device target is unknown or not available here."""


class StorageError(TrainError):
    """Raised when copying between object storage (OBS) and the node fails, or a rank waits
    too long for the copy another rank makes; names the source and the destination."""
