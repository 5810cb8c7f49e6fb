"""MLflow tracking against a real `mlflow server` on 127.0.0.1: src/scaffold/outputs/tracking.py on
its own (params, metrics, checkpoints, resuming, a server that does not answer), then whole
training runs of both frameworks."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.training import runs
from tests.training.mlflow_server import mlflow_server

TAG = "train_template.run_id"
# The Tracker's own bound on waiting for a server (PROBE_SECONDS in tracking.py).
PROBE_SECONDS = 3.0
# Runs a snippet in a generated project as train.py would, logging as "LEVEL name: message".
PRELUDE = """\
import json, logging, sys, time
from pathlib import Path
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s",
                    stream=sys.stdout)
from src.scaffold.outputs.tracking import Tracker
"""


@pytest.fixture(scope="session")
def mlflow_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server for every test here (it takes seconds to start); runs are told apart by id."""
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as uri:
        yield uri


def track(
    project: Path, code: str, uri: str | None, *args: str
) -> subprocess.CompletedProcess[str]:
    """Run PRELUDE + code with ``python -c`` in the project, MLFLOW_TRACKING_URI set to uri."""
    env = runs.clean_env()
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("MLFLOW_EXPERIMENT_NAME", None)
    if uri is not None:
        env["MLFLOW_TRACKING_URI"] = uri
    result = subprocess.run(
        [sys.executable, "-c", PRELUDE + code, *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def lines_with(result: subprocess.CompletedProcess[str], *words: str) -> list[str]:
    out = (result.stdout + result.stderr).splitlines()
    return [line for line in out if all(word in line for word in words)]


def mlflow_runs(uri: str, run_id: str) -> list:
    """The MLflow runs tagged with our run id, in the default experiment."""
    query = f"tags.`{TAG}` = '{run_id}'"
    return MlflowClient(uri).search_runs(["0"], filter_string=query)


def history(client: MlflowClient, run: str, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in client.get_metric_history(run, key)]


def unreachable_uri() -> str:
    """A loopback port where nothing listens: connecting is refused at once."""
    return f"http://127.0.0.1:{runs.free_port()}"


# -- the tracker on its own -------------------------------------------------------------


def test_params_metrics_and_checkpoints_read_back(
    pytorch_project: Path, mlflow_uri: str, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "lenet_epoch1.pt"
    checkpoint.write_bytes(bytes(range(256)) * 300)
    code = """
t = Tracker.start("run-basic", Path(sys.argv[1]).parent, resumed=False)
many = {"p%03d" % i: i for i in range(150)}  # more than one batch request takes
t.params({"lr": 0.01, "resolved": {"amp": "float32", "data_shape": [1, 28, 28]},
          "note": "x" * 600, **many})
for step in (10, 20, 30):
    t.metrics({"train/loss": 1.0 / step, "train/lr": 0.01, "skipped": "text"}, step)
t.metrics({"val/accuracy": 0.5}, 30)
t.artifact(Path(sys.argv[1]))
t.finish(failed=False)
t.metrics({"train/loss": 9.0}, 40)  # after finish: nothing
"""
    result = track(pytorch_project, code, mlflow_uri, str(checkpoint))
    assert not lines_with(result, "WARNING"), result.stdout + result.stderr

    (run,) = mlflow_runs(mlflow_uri, "run-basic")
    client = MlflowClient(mlflow_uri)
    assert run.info.run_name == "run-basic" and run.info.status == "FINISHED"
    params = run.data.params
    assert params["lr"] == "0.01" and params["resolved.amp"] == "float32"
    assert params["resolved.data_shape"] == "[1, 28, 28]"
    assert params["note"] == "x" * 500  # the value length every server takes
    assert params["p149"] == "149" and len(params) == 154
    loss = history(client, run.info.run_id, "train/loss")
    assert loss == [(step, pytest.approx(1.0 / step)) for step in (10, 20, 30)]
    assert history(client, run.info.run_id, "val/accuracy") == [(30, 0.5)]
    assert "skipped" not in run.data.metrics
    listed = [a.path for a in client.list_artifacts(run.info.run_id, "checkpoints")]
    assert listed == ["checkpoints/lenet_epoch1.pt"]
    local = client.download_artifacts(run.info.run_id, listed[0], str(tmp_path / "down"))
    assert Path(local).read_bytes() == checkpoint.read_bytes()


def test_a_resumed_run_continues_its_mlflow_run(
    pytorch_project: Path, mlflow_uri: str, tmp_path: Path
) -> None:
    first = """
t = Tracker.start("run-resumed", Path("."), resumed=False)
t.params({"lr": 0.01, "epoch_size": 2})
t.metrics({"train/loss": 1.0}, 10)
t.finish(failed=True)  # interrupted
"""
    # Resumed with more epochs: the param keeps its first value, a new one is added.
    again = """
t = Tracker.start("run-resumed", Path("."), resumed=True)
t.params({"lr": 0.01, "epoch_size": 4, "resume": "auto"})
t.metrics({"train/loss": 0.5}, 20)
t.finish(failed=False)
# Resuming a run MLflow never saw (it had no server then) starts one.
u = Tracker.start("run-unseen", Path("."), resumed=True)
u.finish(failed=False)
"""
    track(pytorch_project, first, mlflow_uri)
    (before,) = mlflow_runs(mlflow_uri, "run-resumed")
    assert before.info.status == "FAILED"
    result = track(pytorch_project, again, mlflow_uri)
    assert not lines_with(result, "WARNING"), result.stdout + result.stderr

    (run,) = mlflow_runs(mlflow_uri, "run-resumed")
    assert run.info.run_id == before.info.run_id and run.info.status == "FINISHED"
    assert run.data.params == {"lr": "0.01", "epoch_size": "2", "resume": "auto"}
    client = MlflowClient(mlflow_uri)
    assert history(client, run.info.run_id, "train/loss") == [(10, 1.0), (20, 0.5)]
    (unseen,) = mlflow_runs(mlflow_uri, "run-unseen")
    assert unseen.info.run_name == "run-unseen"


def test_an_mlflow_error_is_one_warning_then_tracking_stops(
    pytorch_project: Path, mlflow_uri: str
) -> None:
    # A metric name the server refuses stands in for any failure after start.
    code = """
t = Tracker.start("run-broken", Path("."), resumed=False)
t.metrics({"train/loss": 1.0}, 10)
t.metrics({"bad name!": 1.0}, 20)
t.metrics({"train/loss": 0.5}, 30)
t.artifact(Path("train.py"))
t.finish(failed=False)
print("training went on")
"""
    result = track(pytorch_project, code, mlflow_uri)
    warnings = lines_with(result, "WARNING")
    assert len(warnings) == 1 and "MLflow" in warnings[0], result.stdout + result.stderr
    assert mlflow_uri in warnings[0] and "training went on" in result.stdout

    (run,) = mlflow_runs(mlflow_uri, "run-broken")
    client = MlflowClient(mlflow_uri)
    assert history(client, run.info.run_id, "train/loss") == [(10, 1.0)]
    assert not client.list_artifacts(run.info.run_id)
    assert run.info.status == "RUNNING"  # finish() was off too: MLflow shows it unfinished


def test_no_server_is_one_warning_within_seconds(pytorch_project: Path) -> None:
    # mlflow is imported before the clock starts: the bound is on waiting for the server.
    # Nothing listens on the port, so the probe's connect is refused at once; and MLflow's
    # own client, whose retries would take minutes, is never called.
    code = """
import mlflow.tracking
began = time.monotonic()
t = Tracker.start("run-nowhere", Path("."), resumed=False)
print("elapsed", time.monotonic() - began, "tracker", t)
"""
    uri = unreachable_uri()
    result = track(pytorch_project, code, uri)
    warnings = lines_with(result, "WARNING")
    assert len(warnings) == 1, result.stdout + result.stderr
    assert "MLflow" in warnings[0] and uri in warnings[0]
    (report,) = lines_with(result, "elapsed")
    assert report.endswith("tracker None")
    assert float(report.split()[1]) < PROBE_SECONDS


def test_a_server_that_never_replies_is_given_up_after_the_probe(pytorch_project: Path) -> None:
    # A socket that listens but never accepts: the kernel completes the connection, the
    # request goes out and no reply ever comes, as with a hung server. The probe's timeout
    # (3 s) is what ends the wait.
    code = """
import mlflow.tracking
began = time.monotonic()
t = Tracker.start("run-hung", Path("."), resumed=False)
print("elapsed", time.monotonic() - began, "tracker", t)
"""
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        uri = f"http://127.0.0.1:{hung.getsockname()[1]}"
        result = track(pytorch_project, code, uri)
    assert len(lines_with(result, "WARNING", "MLflow")) == 1, result.stdout + result.stderr
    (report,) = lines_with(result, "elapsed")
    assert report.endswith("tracker None")
    assert PROBE_SECONDS - 0.5 < float(report.split()[1]) < PROBE_SECONDS + 3


def test_no_uri_is_silent_and_no_mlflow_is_one_info_line(pytorch_project: Path) -> None:
    code = """
print("tracker", Tracker.start("run-off", Path("."), resumed=False))
"""
    quiet = track(pytorch_project, code, None)
    assert quiet.stdout == "tracker None\n" and not quiet.stderr
    # sys.modules[name] = None makes importing name fail, as if it were not installed.
    missing = track(pytorch_project, 'sys.modules["mlflow"] = None\n' + code, unreachable_uri())
    infos = lines_with(missing, "mlflow")
    assert len(infos) == 1 and infos[0].startswith("INFO"), missing.stdout + missing.stderr
    assert "tracker None" in missing.stdout and not lines_with(missing, "WARNING")


# -- whole training runs ----------------------------------------------------------------


def train_tracked(project: Path, output: Path, uri: str) -> subprocess.CompletedProcess[str]:
    env = runs.clean_env(MLFLOW_TRACKING_URI=uri)
    env.pop("MLFLOW_EXPERIMENT_NAME", None)
    argv = ("train.py", "--device_target", "cpu", "--train_url", str(output))
    result = runs.run(project, *argv, "--epoch_size", "2", "--log_every", "10", env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def assert_tracked(output: Path, uri: str) -> None:
    """The MLflow run holds what the output directory's record holds."""
    hparams = json.loads((output / "hparams.json").read_text())
    (run,) = mlflow_runs(uri, hparams["run_id"])
    client, mlflow_run = MlflowClient(uri), run.info.run_id
    assert run.info.run_name == hparams["run_id"] and run.info.status == "FINISHED"
    params = run.data.params
    assert params["lr"] == str(hparams["lr"])
    assert params["epoch_size"] == "2"
    assert params["resolved.amp"] == str(hparams["resolved"]["amp"])

    lines = runs.metrics(output)
    steps = [line for line in lines if line["type"] == "step"]
    assert [line["step"] for line in steps][:2] == [10, 20]
    loss = history(client, mlflow_run, "train/loss")
    assert loss == [(line["step"], pytest.approx(line["loss"])) for line in steps]
    vals = [line for line in lines if line["type"] == "val"]
    assert len(vals) == 2
    accuracy = history(client, mlflow_run, "val/accuracy")
    assert accuracy == [(line["step"], pytest.approx(line["accuracy"])) for line in vals]
    (test,) = [line for line in lines if line["type"] == "test"]
    assert history(client, mlflow_run, "test/accuracy") == [
        (test["step"], pytest.approx(test["accuracy"]))
    ]

    artifacts = json.loads((output / "artifacts.json").read_text())
    kept = [a["path"] for a in artifacts if a["path"].endswith((".pt", ".ckpt"))]
    assert kept, artifacts
    logged = {Path(a.path).name for a in client.list_artifacts(mlflow_run, "checkpoints")}
    assert set(kept) <= logged
    for name in kept:
        local = client.download_artifacts(mlflow_run, f"checkpoints/{name}", str(output / "dl"))
        assert Path(local).read_bytes() == (output / name).read_bytes()


@pytest.mark.slow
def test_pytorch_training_is_tracked(pytorch_project: Path, mlflow_uri: str, tmp_path) -> None:
    train_tracked(pytorch_project, tmp_path / "out", mlflow_uri)
    assert_tracked(tmp_path / "out", mlflow_uri)


@pytest.mark.slow
def test_mindspore_training_is_tracked(
    mindspore_projects: dict[str, Path], mlflow_uri: str, tmp_path
) -> None:
    train_tracked(mindspore_projects["model"], tmp_path / "out", mlflow_uri)
    assert_tracked(tmp_path / "out", mlflow_uri)


@pytest.mark.slow
def test_training_without_the_server_is_one_warning(pytorch_project: Path, tmp_path) -> None:
    began = time.monotonic()
    result = train_tracked(pytorch_project, tmp_path / "out", unreachable_uri())
    warnings = lines_with(result, "MLflow")
    assert len(warnings) == 1 and "WARNING" in warnings[0], result.stdout + result.stderr
    assert (tmp_path / "out" / "hparams.json").is_file()
    assert time.monotonic() - began < 300
