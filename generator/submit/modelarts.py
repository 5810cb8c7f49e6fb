"""ModelArts training jobs through Huawei Cloud's official SDK (huaweicloudsdkmodelarts).

The only module that imports the SDK. Its v1 package holds the v2 training-job API:
``create_training_job`` is ``POST /v2/{project_id}/training-jobs``, signed with the
account's access key (SDK-HMAC-SHA256). Keys come from the environment, never from a
file, and are masked in every message this module raises.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from generator.errors import OptionError, SubmitError

AK_ENV, SK_ENV, PROJECT_ENV = (
    "HUAWEICLOUD_SDK_AK",
    "HUAWEICLOUD_SDK_SK",
    "HUAWEICLOUD_SDK_PROJECT_ID",
)
# The image's working directory is /app (the Dockerfile's WORKDIR); run_8p.sh reads the
# nodes, ranks and master ModelArts injects (MA_NUM_HOSTS, VC_TASK_INDEX, ...).
COMMAND = "bash /app/scripts/run_8p.sh"
DEFAULT_TIMEOUT = 60.0
# Names ModelArts keeps for its own variables: "When defining custom environment variables,
# avoid using names that start with MA_ to prevent conflicts with system environment
# variables" (ModelArts User Guide (Standard), "Managing Environment Variables of a Training
# Container", develop-modelarts-0104, Notes and Constraints; the Chinese page adds that such a
# conflict can make the job run abnormally or fail).
RESERVED_ENV_PREFIX = "MA_"
# ModelArts' own fault tolerance, as metadata.annotations of the job (the SDK's JobMetadata;
# ModelArts User Guide (Standard): "Enabling Unconditional Auto Restart", develop-modelarts-0041,
# and "Training Job Restart Upon Suspension", develop-modelarts-0043). job-retry-num (1-128)
# turns on auto restart: on a fault ModelArts finds in the environment (a node, an NPU, the
# network) it reruns the job's same command, in place or on other nodes, which continues the
# run its train_url holds. hang-retry also reruns it in its container when ModelArts finds the
# job suspended (3 times in a row at most). job-unconditional-retry reruns any failure (3 times
# in a row at most), a configuration error (exit status 2) too: it is left to --retry-any-failure.
RETRIES_ANNOTATION = "fault-tolerance/job-retry-num"
HANG_ANNOTATION = "fault-tolerance/hang-retry"
UNCONDITIONAL_ANNOTATION = "fault-tolerance/job-unconditional-retry"
MAX_RETRIES = 128
DEFAULT_RETRIES = 3


def endpoint_of(region: str) -> str:
    return f"https://modelarts.{region}.myhuaweicloud.com"


def require_sdk() -> None:
    try:
        import huaweicloudsdkmodelarts  # noqa: F401
    except ImportError:
        raise SubmitError(
            "the ModelArts SDK is not installed: pip install 'train-template[modelarts]' "
            "(or pipx inject train-template huaweicloudsdkmodelarts)"
        ) from None


def check_environment(environment: dict[str, str]) -> None:
    """Refuse --env names ModelArts reserves (RESERVED_ENV_PREFIX): OptionError naming them."""
    reserved = [name for name in environment if name.startswith(RESERVED_ENV_PREFIX)]
    if reserved:
        raise OptionError(
            "--env",
            f"{', '.join(reserved)}: ModelArts reserves names starting with "
            f"{RESERVED_ENV_PREFIX} for its own variables (develop-modelarts-0104); "
            "choose another name",
        )


@dataclass(frozen=True)
class Credentials:
    """An access key, its secret and the region's project id, from the environment."""

    ak: str
    sk: str
    project_id: str

    @classmethod
    def from_env(cls) -> Credentials:
        missing = [n for n in (AK_ENV, SK_ENV, PROJECT_ENV) if not os.environ.get(n, "").strip()]
        if missing:
            # The SDK would fall back to the ECS metadata service without keys: refuse here.
            raise SubmitError(
                f"set {', '.join(missing)}: an access key and its secret (My Credentials → "
                "Access Keys) and the region's project id (My Credentials → API Credentials)"
            )
        return cls(*(os.environ[n].strip() for n in (AK_ENV, SK_ENV, PROJECT_ENV)))

    def mask(self, text: str) -> str:
        for secret in (self.sk, self.ak):
            text = text.replace(secret, "***")
        return text


@dataclass(frozen=True)
class JobSpec:
    """What a training job is made of: the image, the command, OBS paths and resources."""

    name: str
    image: str
    flavor: str
    nodes: int
    data_obs: str | None = None
    output_obs: str | None = None
    pool_id: str | None = None
    description: str = ""
    parameters: dict[str, str] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    # ModelArts' restarts of the whole job on a fault (0: none); any failure, exit 2 too, with
    # retry_any_failure.
    retries: int = DEFAULT_RETRIES
    retry_any_failure: bool = False


def annotations(spec: JobSpec) -> dict[str, str]:
    """The job's fault-tolerance annotations (RETRIES_ANNOTATION); none with no retries."""
    if not spec.retries:
        return {}
    found = {RETRIES_ANNOTATION: str(spec.retries), HANG_ANNOTATION: "true"}
    if spec.retry_any_failure:
        found[UNCONDITIONAL_ANNOTATION] = "true"
    return found


def obs_path(url: str) -> str:
    """An OBS location as the API writes it: ``/bucket/path/`` (``obs://bucket/path`` too)."""
    path = url.removeprefix("obs://").strip("/")
    return f"/{path}/"


def request_body(spec: JobSpec) -> dict[str, Any]:
    """The JSON body of ``create_training_job`` for ``spec``: what --dry-run prints and what
    create sends. Plain data, so that a dry run needs no SDK; the fields and their order are
    those of the SDK's models (v1.model Job, JobMetadata, JobAlgorithm, Spec, SpecResource),
    which the SDK sends without the fields left unset."""
    algorithm: dict[str, Any] = {"command": COMMAND}
    if spec.parameters:
        algorithm["parameters"] = [{"name": k, "value": v} for k, v in spec.parameters.items()]
    # ModelArts copies data_url's OBS path in and train_url's out, and appends
    # --data_url=<local dir> --train_url=<local dir> to the command: train.py's flags.
    if spec.data_obs:
        obs = {"obs": {"obs_url": obs_path(spec.data_obs)}}
        algorithm["inputs"] = [{"name": "data_url", "remote": obs}]
    if spec.output_obs:
        obs = {"obs": {"obs_url": obs_path(spec.output_obs)}}
        algorithm["outputs"] = [{"name": "train_url", "remote": obs}]
    algorithm["engine"] = {"image_url": spec.image}
    if spec.environment:
        algorithm["environments"] = dict(spec.environment)
    metadata: dict[str, Any] = {"name": spec.name}
    if spec.description:
        metadata["description"] = spec.description
    if annotations(spec):
        metadata["annotations"] = annotations(spec)
    resource: dict[str, Any] = {"flavor_id": spec.flavor, "node_count": spec.nodes}
    if spec.pool_id:
        resource["pool_id"] = spec.pool_id
    return {
        "kind": "job",
        "metadata": metadata,
        "algorithm": algorithm,
        "spec": {"resource": resource},
    }


class ModelArts:
    """A signed ModelArts client for one endpoint."""

    def __init__(self, endpoint: str, credentials: Credentials, timeout: float) -> None:
        require_sdk()
        from huaweicloudsdkcore.auth.credentials import BasicCredentials
        from huaweicloudsdkcore.http.http_config import HttpConfig
        from huaweicloudsdkmodelarts.v1.modelarts_client import ModelArtsClient

        # The SDK logs errors on a logger with no handler: Python's last resort would print
        # them to stderr beside our one line.
        logging.getLogger(f"HuaweiCloud-SDK-{ModelArtsClient.__name__}").addHandler(
            logging.NullHandler()
        )
        config = HttpConfig.get_default_config()
        config.timeout = (timeout, timeout)
        config.retry_times = 0  # a create that timed out may have created the job
        self.endpoint = endpoint
        self.credentials = credentials
        self.client = (
            ModelArtsClient.new_builder()
            .with_http_config(config)
            .with_credentials(
                BasicCredentials(credentials.ak, credentials.sk, credentials.project_id)
            )
            .with_endpoints([endpoint])
            .build()
        )

    def call(self, what: str, method: str, request: Any) -> dict[str, Any]:
        """One API call; its JSON reply, or SubmitError with one masked line."""
        from huaweicloudsdkcore.exceptions.exceptions import (
            ClientRequestException,
            SdkException,
            ServerResponseException,
        )

        try:
            reply = getattr(self.client, method)(request)
        except (ClientRequestException, ServerResponseException) as err:
            hint = {
                401: "; check the access key, its secret and the project id",
                403: "; the account lacks permission (IAM: ModelArts and OBS)",
            }
            raise SubmitError(
                self.credentials.mask(
                    f"ModelArts refused to {what} (HTTP {err.status_code}, {err.error_code}): "
                    f"{err.error_msg}{hint.get(err.status_code, '')}"
                )
            ) from None
        except (SdkException, OSError) as err:
            # A read timeout reaches us as requests' own ReadTimeout (an OSError), unwrapped.
            said = str(getattr(err, "error_msg", "") or err or type(err).__name__).splitlines()[0]
            raise SubmitError(
                self.credentials.mask(f"could not {what}: {self.endpoint} did not answer ({said})")
            ) from None
        return json.loads(reply.raw_content or b"{}")

    def create(self, spec: JobSpec) -> dict[str, Any]:
        from huaweicloudsdkmodelarts.v1.model.create_training_job_request import (
            CreateTrainingJobRequest,
        )

        # The SDK serializes a dict body as it is (huaweicloudsdkcore Client._parse_body).
        request = CreateTrainingJobRequest(body=request_body(spec))
        return self.call("create the job", "create_training_job", request)

    def show(self, job_id: str) -> dict[str, Any]:
        from huaweicloudsdkmodelarts.v1.model.show_training_job_details_request import (
            ShowTrainingJobDetailsRequest,
        )

        return self.call(
            "show the job",
            "show_training_job_details",
            ShowTrainingJobDetailsRequest(training_job_id=job_id),
        )

    def logs(self, job_id: str, task: str) -> dict[str, Any]:
        from huaweicloudsdkmodelarts.v1.model.show_training_job_logs_preview_request import (
            ShowTrainingJobLogsPreviewRequest,
        )

        request = ShowTrainingJobLogsPreviewRequest(training_job_id=job_id, task_id=task)
        return self.call("read the log", "show_training_job_logs_preview", request)

    def flavors(self, kind: str | None) -> dict[str, Any]:
        from huaweicloudsdkmodelarts.v1.model.show_training_job_flavors_request import (
            ShowTrainingJobFlavorsRequest,
        )

        return self.call(
            "list the flavors",
            "show_training_job_flavors",
            ShowTrainingJobFlavorsRequest(flavor_type=kind),
        )
