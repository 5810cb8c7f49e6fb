"""MLflow tracking of one run, given MLFLOW_TRACKING_URI and mlflow. It never fails or stalls
training: a server that does not answer, or any later error, is one WARNING and no tracking."""

from __future__ import annotations

import logging
import numbers
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)
RUN_TAG = "train_template.run_id"
PROBE_SECONDS = 3.0
# MLflow's client retries 7 times with doubling backoff (minutes): two quick ones will do.
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
    # Its own "View run" line has emoji, which a C-locale stdout cannot encode: ours says it.
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}
# What every server takes: keys of 250 characters, values of 500 (before 2.x), 100 a batch.
MAX_KEY, MAX_VALUE, PARAMS_PER_BATCH = 250, 500, 100


def _probe(uri: str) -> str | None:
    """Why an http(s) server does not answer within seconds, or None if it answers."""
    if not uri.lower().startswith(("http://", "https://")):
        return None  # file:, sqlite:, databricks ...: no server of ours to wait for
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=PROBE_SECONDS).close()
    except urllib.error.HTTPError as err:
        # Any reply is an answer (a proxy's 404, an auth 401), but MLflow would retry a 5xx.
        return f"HTTP {err.code}" if err.code >= 500 else None
    except (OSError, ValueError) as err:  # refused, timed out, unresolvable, malformed
        return str(getattr(err, "reason", err))
    return None


def flatten(values: Mapping[str, object], prefix: str = "") -> dict[str, str]:
    """Nested mappings as dotted keys ("resolved.amp"), values as strings MLflow accepts."""
    flat: dict[str, str] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name[:MAX_KEY]] = str(value)[:MAX_VALUE]
    return flat


def _open_run(client: object, run_id: str, output: Path, resumed: bool) -> tuple[str, str]:
    """The experiment and MLflow run ids: the run tagged run_id when resumed, else new."""
    name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "").strip()
    experiment = "0"  # MLflow's "Default" experiment, which every store has
    if name:
        found = client.get_experiment_by_name(name)
        experiment = found.experiment_id if found else client.create_experiment(name)
    if resumed:
        query = f"tags.`{RUN_TAG}` = '{run_id}'"
        for run in client.search_runs([experiment], filter_string=query, max_results=1):
            client.update_run(run.info.run_id, status="RUNNING")
            return experiment, run.info.run_id
    tags = {RUN_TAG: run_id, "train_template.output": str(output)}
    return experiment, client.create_run(experiment, tags=tags, run_name=run_id).info.run_id


class Tracker:
    """MLflow logging for one run, or nothing."""

    def __init__(self, client: object, mlflow_run: str, where: str, resumed: bool) -> None:
        # None once finished or after an error: later calls do nothing.
        self._client, self._run, self._where, self._resumed = client, mlflow_run, where, resumed

    @classmethod
    def start(cls, run_id: str, output: Path, resumed: bool) -> Tracker | None:
        """A tracker for run_id, a resumed run continuing its MLflow run; None if not tracking."""
        if not (uri := os.environ.get("MLFLOW_TRACKING_URI", "").strip()):
            return None
        try:
            from mlflow.tracking import MlflowClient
        except Exception as err:  # absent, or broken by another package's versions
            log.info("MLFLOW_TRACKING_URI is set, no mlflow to import (%s): not tracking", err)
            return None
        where, parts = uri, urllib.parse.urlsplit(uri)
        if "@" in parts.netloc:  # for log lines: no user name or password
            where = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
        # Before MLflow's client, whose retries would hold training for minutes.
        if (reason := _probe(uri)) is not None:
            log.warning("MLflow server %s does not answer (%s): training without it", where, reason)
            return None
        for name, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(name, value)
        try:
            client = MlflowClient(uri)
            experiment, mlflow_run = _open_run(client, run_id, output, resumed)
        except Exception as err:
            log.warning("MLflow server %s failed (%s): training without it", where, err)
            return None
        link = f"{where.rstrip('/')}/#/experiments/{experiment}/runs/{mlflow_run}"
        log.info("MLflow run: %s", link)
        return cls(client, mlflow_run, where, resumed)

    @contextmanager
    def _guard(self) -> Iterator[object]:
        """The client for one call; its first error is a warning and turns the tracker off."""
        try:
            yield self._client
        except Exception as err:
            self._client = None
            log.warning("MLflow server %s failed (%s): tracking off for this run", self._where, err)

    def params(self, hparams: Mapping[str, object]) -> None:
        if self._client is not None:
            with self._guard() as client:
                from mlflow.entities import Param

                flat = flatten(hparams)
                if self._resumed:
                    # Logged params cannot change: the first values stay (hparams.json has all).
                    logged = client.get_run(self._run).data.params
                    flat = {key: value for key, value in flat.items() if key not in logged}
                items = [Param(key, value) for key, value in flat.items()]
                for i in range(0, len(items), PARAMS_PER_BATCH):
                    client.log_batch(self._run, params=items[i : i + PARAMS_PER_BATCH])

    def metrics(self, values: Mapping[str, float], step: int) -> None:
        if self._client is not None:
            with self._guard() as client:
                from mlflow.entities import Metric

                now = int(time.time() * 1000)
                items = [
                    Metric(key[:MAX_KEY], float(value), now, int(step))
                    for key, value in values.items()
                    if isinstance(value, numbers.Real)  # numpy scalars too; skip anything else
                ]
                client.log_batch(self._run, metrics=items)

    def artifact(self, path: Path) -> None:
        if self._client is not None:
            with self._guard() as client:
                client.log_artifact(self._run, str(path), "checkpoints")

    def finish(self, failed: bool) -> None:
        if self._client is not None:
            with self._guard() as client:
                client.set_terminated(self._run, "FAILED" if failed else "FINISHED")
            self._client = None
