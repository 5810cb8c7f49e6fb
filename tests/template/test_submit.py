"""`gen submit`: the real ModelArts SDK, pointed with with_endpoints at an HTTP server on
127.0.0.1 that checks each request's signature as API Gateway does and answers with
ModelArts' documented replies."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import jsonschema
import pytest

from generator.render.options import Options
from generator.render.project import render

AK, SK, PROJECT_ID = (
    "TESTAK0123456789ABCD",
    "s3cr3t-sk-value-never-shown-0123456789",
    "0a1b2c3d4e5f",
)
SCHEMA = json.loads(
    (Path(__file__).parents[1] / "data/modelarts/create-training-job.schema.json").read_text()
)
IMAGE = "swr.cn-north-4.myhuaweicloud.com/demo-org/demo:0.1"
JOB_ID = "425b7087-83de-49ed-9e40-5bb642be956f"
# Replies as ModelArts' API reference shows them (trimmed).
CREATED = {
    "kind": "job",
    "metadata": {"id": JOB_ID, "name": "demo", "create_time": 1637045545982},
    "status": {
        "phase": "Creating",
        "secondary_phase": "Creating",
        "duration": 0,
        "tasks": ["worker-0"],
    },
}
SHOWN = {
    "kind": "job",
    "metadata": {"id": JOB_ID, "name": "demo"},
    "status": {
        "phase": "Running",
        "secondary_phase": "Running",
        "duration": 125000,
        "tasks": ["worker-0", "worker-1"],
    },
}
LOG = {"content": "epoch 1 loss 0.41\nepoch 2 loss 0.22\n", "current_size": 36, "full_size": 36}
FLAVORS = {
    "total_count": 2,
    "flavors": [
        {
            "flavor_id": "modelarts.vm.cpu.2u",
            "flavor_name": "Computing CPU(2U) instance",
            "flavor_type": "CPU",
        },
        {
            "flavor_id": "modelarts.pool.visual.xlarge",
            "flavor_name": "Ascend 910B x8",
            "flavor_type": "Ascend",
        },
    ],
}


def signature_ok(method: str, raw_path: str, headers: dict[str, str], body: bytes) -> bool:
    """API Gateway's check of an SDK-HMAC-SHA256 signature, written from the SDK's signer
    (huaweicloudsdkcore/signer/signer.py): canonical request, string to sign, HMAC."""
    algorithm, rest = headers["Authorization"].split(" ", 1)
    parts = dict(p.strip().split("=", 1) for p in rest.split(","))
    signed = parts["SignedHeaders"].split(";")
    url = urlsplit(raw_path)
    path = "/".join(quote(s, safe="~") for s in unquote(url.path).split("/"))
    path += "" if path.endswith("/") else "/"
    query = "&".join(
        f"{quote(k, safe='~')}={quote(v, safe='~')}"
        for k, v in sorted(parse_qsl(url.query, keep_blank_values=True))
    )
    low = {k.lower(): v.strip() for k, v in headers.items()}
    canonical_headers = "".join(f"{h}:{low[h]}\n" for h in signed)
    payload = low.get("x-sdk-content-sha256") or hashlib.sha256(body).hexdigest()
    canonical = "\n".join([method, path, query, canonical_headers, ";".join(signed), payload])
    to_sign = "\n".join(
        [algorithm, low["x-sdk-date"], hashlib.sha256(canonical.encode()).hexdigest()]
    )
    expected = hmac.new(SK.encode(), to_sign.encode(), hashlib.sha256).hexdigest()
    return parts["Access"] == AK and hmac.compare_digest(expected, parts["Signature"])


@dataclass
class FakeModelArts:
    """The API on 127.0.0.1: every request recorded; replies by (method, path)."""

    url: str = ""
    requests: list[dict[str, object]] = field(default_factory=list)
    replies: dict[tuple[str, str], tuple[int, object, float]] = field(default_factory=dict)

    def reply(self, method: str, path: str) -> tuple[int, object, float]:
        for (m, pattern), answer in self.replies.items():
            if m == method and re.fullmatch(pattern, path):
                return answer
        return 404, {"error_code": "ModelArts.0404", "error_msg": "no such API"}, 0.0


@pytest.fixture
def api() -> Iterator[FakeModelArts]:
    fake = FakeModelArts()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = dict(self.headers.items())
            fake.requests.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": headers,
                    "body": body,
                    "signed": signature_ok(self.command, self.path, headers, body),
                }
            )
            status, payload, delay = fake.reply(self.command, urlsplit(self.path).path)
            if not fake.requests[-1]["signed"]:
                status, payload = 401, {"error_code": "APIGW.0301", "error_msg": "bad signature"}
            time.sleep(delay)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Request-Id", "req-0001")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (the timeout case)

        do_GET = do_POST = _serve

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    created = render(Options("demo", platform="modelarts", target="ascend", nnodes=2), tmp_path)
    (created / "logs").mkdir()
    (created / "logs" / "image-ascend.pushed").write_text(IMAGE + "\n")
    return created


def gen(
    project: Path,
    api: FakeModelArts | None,
    *args: str,
    keys: bool = True,
    python: Sequence[str] = (sys.executable,),
    **variables: str,
):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUAWEICLOUD_SDK_")}
    if keys:
        env.update(
            HUAWEICLOUD_SDK_AK=AK, HUAWEICLOUD_SDK_SK=SK, HUAWEICLOUD_SDK_PROJECT_ID=PROJECT_ID
        )
    endpoint = ["--endpoint", api.url] if api else []
    return subprocess.run(
        [*python, "-m", "generator", *args, *endpoint],
        cwd=project,
        env={**env, **variables},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def assert_secret_nowhere(project: Path, *outputs: str) -> None:
    for text in outputs:
        assert SK not in text
    for root in (project, Path(os.environ["HOME"])):
        for path in root.rglob("*"):
            if path.is_file():
                assert SK.encode() not in path.read_bytes(), path


SUBMIT = (
    "submit",
    "modelarts",
    "--flavor",
    "modelarts.pool.visual.xlarge",
    "--data-obs",
    "obs://bucket/mnist/",
    "--output-obs",
    "obs://bucket/out",
    "--param",
    "epoch_size=12",
    "--env",
    "TRAIN_JOIN_TIMEOUT=900",
)


def test_a_job_is_created_with_a_signed_request_and_the_documented_body(
    project: Path, api: FakeModelArts
) -> None:
    api.replies[("POST", f"/v2/{PROJECT_ID}/training-jobs")] = (201, CREATED, 0.0)
    done = gen(project, api, *SUBMIT)
    assert done.returncode == 0, done.stderr
    (request,) = api.requests
    assert request["method"] == "POST" and request["path"] == f"/v2/{PROJECT_ID}/training-jobs"
    headers = request["headers"]
    assert request["signed"]
    assert re.fullmatch(
        rf"SDK-HMAC-SHA256 Access={AK}, SignedHeaders=[a-z;-]*host;[a-z;-]*x-project-id;"
        r"x-sdk-date, Signature=[0-9a-f]{64}",
        headers["Authorization"],
    )
    assert re.fullmatch(r"\d{8}T\d{6}Z", headers["X-Sdk-Date"])
    assert headers["X-Project-Id"] == PROJECT_ID
    body = json.loads(request["body"])
    jsonschema.validate(body, SCHEMA)
    assert body["algorithm"] == {
        "command": "bash /app/scripts/run_8p.sh",
        "engine": {"image_url": IMAGE},
        "parameters": [{"name": "epoch_size", "value": "12"}],
        "inputs": [{"name": "data_url", "remote": {"obs": {"obs_url": "/bucket/mnist/"}}}],
        "outputs": [{"name": "train_url", "remote": {"obs": {"obs_url": "/bucket/out/"}}}],
        "environments": {"TRAIN_JOIN_TIMEOUT": "900"},
    }
    assert body["spec"] == {
        "resource": {"flavor_id": "modelarts.pool.visual.xlarge", "node_count": 2}
    }
    assert body["metadata"]["name"] == "demo"
    # ModelArts reruns the same command on a fault or a hang, 3 times; the rerun continues the
    # run in train_url. Not on any failure: a configuration error would fail again.
    assert body["metadata"]["annotations"] == {
        "fault-tolerance/job-retry-num": "3",
        "fault-tolerance/hang-retry": "true",
    }
    assert done.stdout.splitlines()[0] == f"demo ({JOB_ID}): Creating / Creating"
    recorded = (project / "logs" / "modelarts-jobs.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in recorded] == [JOB_ID]
    assert_secret_nowhere(project, done.stdout, done.stderr)


def test_a_dry_run_prints_the_body_and_sends_nothing(project: Path, api: FakeModelArts) -> None:
    done = gen(project, api, *SUBMIT, "--dry-run", keys=False)
    assert done.returncode == 0, done.stderr
    jsonschema.validate(json.loads(done.stdout), SCHEMA)
    assert api.requests == [] and not (project / "logs" / "modelarts-jobs.jsonl").exists()


def _dry_run(project: Path, api: FakeModelArts, *args: str) -> dict:
    done = gen(project, api, *SUBMIT, *args, "--dry-run", keys=False)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    jsonschema.validate(body, SCHEMA)
    return body


def test_max_retries_sets_modelarts_auto_restart_and_zero_turns_it_off(
    project: Path, api: FakeModelArts
) -> None:
    body = _dry_run(project, api, "--max-retries", "128", "--retry-any-failure")
    assert body["metadata"]["annotations"] == {
        "fault-tolerance/job-retry-num": "128",
        "fault-tolerance/hang-retry": "true",
        "fault-tolerance/job-unconditional-retry": "true",
    }
    assert "annotations" not in _dry_run(project, api, "--max-retries", "0")["metadata"]
    # The command stays the one the project's boot runs: a rerun resumes without a flag.
    assert body["algorithm"]["command"] == "bash /app/scripts/run_8p.sh"
    for args, words in (
        (["--max-retries", "129"], "'--max-retries': 129 is not in the range 0<=x<=128"),
        (["--max-retries", "0", "--retry-any-failure"], "--retry-any-failure: needs restarts"),
    ):
        done = gen(project, api, *SUBMIT, *args, "--dry-run", keys=False)
        assert done.returncode == 2 and done.stdout == ""
        assert words in done.stderr, done.stderr
    assert api.requests == []


@pytest.fixture
def without_sdk(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """gen's interpreter with Huawei's SDK really absent: no site processing (python -S), and
    PYTHONPATH a folder of links to everything in site-packages but huaweicloudsdk*, then the
    repository (gen's editable install)."""
    site = Path(sysconfig.get_paths()["purelib"])
    overlay = tmp_path_factory.mktemp("site-packages")
    for entry in site.iterdir():
        if not entry.name.startswith("huaweicloudsdk"):
            (overlay / entry.name).symlink_to(entry)
    variables = {"PYTHONPATH": os.pathsep.join([str(overlay), str(Path(__file__).parents[2])])}
    probe = subprocess.run(
        [sys.executable, "-S", "-c", "import huaweicloudsdkmodelarts"],
        env={**os.environ, **variables},
        capture_output=True,
        text=True,
    )
    assert probe.returncode == 1 and "ModuleNotFoundError" in probe.stderr, probe.stderr
    return variables


def test_a_dry_run_needs_no_sdk_and_a_real_run_says_what_to_install(
    project: Path, api: FakeModelArts, without_sdk: dict[str, str]
) -> None:
    bare = (sys.executable, "-S")
    done = gen(project, api, *SUBMIT, "--dry-run", keys=False, python=bare, **without_sdk)
    assert done.returncode == 0, done.stderr
    # The body the SDK would send: the same as a dry run with it.
    assert json.loads(done.stdout) == json.loads(gen(project, api, *SUBMIT, "--dry-run").stdout)
    sent = gen(project, api, *SUBMIT, python=bare, **without_sdk)
    assert sent.returncode == 1 and sent.stdout == ""
    assert sent.stderr.splitlines() == [
        "error: the ModelArts SDK is not installed: pip install 'train-template[modelarts]' "
        "(or pipx inject train-template huaweicloudsdkmodelarts)"
    ]
    assert api.requests == []


def test_env_refuses_the_names_modelarts_reserves(project: Path, api: FakeModelArts) -> None:
    done = gen(project, api, *SUBMIT, "--env", "MA_NUM_GPUS=4", "--dry-run")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: --env: MA_NUM_GPUS: ModelArts reserves names starting with MA_ for its own "
        "variables (develop-modelarts-0104); choose another name"
    ]
    assert api.requests == []


def test_status_logs_and_flavors_read_the_replies(project: Path, api: FakeModelArts) -> None:
    base = f"/v2/{PROJECT_ID}"
    api.replies[("GET", f"{base}/training-jobs/{JOB_ID}")] = (200, SHOWN, 0.0)
    api.replies[("GET", f"{base}/training-jobs/{JOB_ID}/tasks/worker-1/logs/preview")] = (
        200,
        LOG,
        0.0,
    )
    api.replies[("GET", f"{base}/training-job-flavors")] = (200, FLAVORS, 0.0)
    shown = gen(project, api, "submit", "status", JOB_ID)
    assert shown.stdout.splitlines() == [
        f"demo ({JOB_ID}): Running / Running",
        "duration: 125 s",
        "tasks: worker-0, worker-1 (gen submit logs ID --task T)",
    ]
    log = gen(project, api, "submit", "logs", JOB_ID, "--task", "worker-1")
    assert log.returncode == 0 and log.stdout == LOG["content"]
    flavors = gen(project, api, "submit", "flavors", "--type", "Ascend")
    assert flavors.returncode == 0, flavors.stderr
    assert flavors.stdout.splitlines()[1].split()[:2] == ["modelarts.pool.visual.xlarge", "Ascend"]
    assert api.requests[-1]["path"] == f"{base}/training-job-flavors?flavor_type=Ascend"
    assert all(r["signed"] for r in api.requests)


@pytest.mark.parametrize(
    ("status", "payload", "delay", "message"),
    [
        (
            401,
            {"error_code": "APIGW.0301", "error_msg": "verify aksk signature fail"},
            0.0,
            "error: ModelArts refused to create the job (HTTP 401, APIGW.0301): verify aksk "
            "signature fail; check the access key, its secret and the project id",
        ),
        (
            400,
            {"error_code": "ModelArts.2763", "error_msg": "The selected flavor is invalid."},
            0.0,
            "error: ModelArts refused to create the job (HTTP 400, ModelArts.2763): "
            "The selected flavor is invalid.",
        ),
        (201, CREATED, 5.0, "error: could not create the job: http://127.0.0.1:"),
    ],
    ids=["401", "400", "timeout"],
)
def test_a_refusal_or_a_timeout_is_one_line_and_writes_nothing(
    project: Path, api: FakeModelArts, status: int, payload: object, delay: float, message: str
) -> None:
    api.replies[("POST", f"/v2/{PROJECT_ID}/training-jobs")] = (status, payload, delay)
    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    done = gen(project, api, *SUBMIT, "--timeout", "1")
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(message), done.stderr
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before
    debug = gen(project, api, "--debug", *SUBMIT, "--timeout", "1")
    assert debug.returncode != 0
    assert_secret_nowhere(project, done.stdout, done.stderr, debug.stdout, debug.stderr)


def test_without_keys_or_for_another_platform_nothing_is_sent(
    project: Path, api: FakeModelArts, tmp_path: Path
) -> None:
    done = gen(project, api, *SUBMIT, keys=False)
    assert done.returncode == 1
    assert done.stderr.startswith(
        "error: set HUAWEICLOUD_SDK_AK, HUAWEICLOUD_SDK_SK, HUAWEICLOUD_SDK_PROJECT_ID:"
    )
    openi = render(Options("other"), tmp_path / "openi")
    done = gen(openi, api, *SUBMIT)
    assert done.returncode == 2
    assert done.stderr.startswith("error: platform: this project was made for openi")
    assert api.requests == []


def test_the_region_picks_the_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """--region without --endpoint: the client the commands use signs for that region's
    ModelArts (built only; nothing is sent to a host other than 127.0.0.1)."""
    from generator.cli.submit import _client

    keys = {"AK": AK, "SK": SK, "PROJECT_ID": PROJECT_ID}
    for name, value in keys.items():
        monkeypatch.setenv(f"HUAWEICLOUD_SDK_{name}", value)
    client = _client("cn-southwest-2", None, 5.0)
    assert client.endpoint == "https://modelarts.cn-southwest-2.myhuaweicloud.com"
    # What the SDK itself will call (its client has no public reader for it).
    assert client.client._endpoints == [client.endpoint]
    assert _client("cn-southwest-2", "http://127.0.0.1:9", 5.0).endpoint == "http://127.0.0.1:9"
