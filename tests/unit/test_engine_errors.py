"""The SDK door (generator/engine/sdk.py) lets no docker, requests or urllib3 exception
out: each family becomes gen's own error, one line, with what gen was doing."""

from __future__ import annotations

import docker.errors
import pytest
import requests
import requests.exceptions
import urllib3.exceptions

from generator.engine import sdk
from generator.errors import EngineError, EngineUnavailable, GenError, ImageNotFound


def _api_error(status: int, explanation: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError("failed", response=response, explanation=explanation)


@pytest.mark.parametrize(
    ("raised", "expected", "message"),
    [
        (requests.exceptions.ConnectionError("refused"), EngineUnavailable, "lost the Docker"),
        (requests.exceptions.ChunkedEncodingError("cut"), EngineUnavailable, "lost the Docker"),
        (urllib3.exceptions.ProtocolError("reset"), EngineUnavailable, "lost the Docker"),
        (ConnectionResetError(104, "reset"), EngineUnavailable, "lost the Docker"),
        (requests.exceptions.ReadTimeout("slow"), EngineUnavailable, "did not answer within"),
        (_api_error(500, "no space\nleft"), EngineError, "failed at tagging x: no space left"),
        (docker.errors.DockerException("odd"), EngineError, "failed at tagging x: odd"),
        (ImageNotFound("mine"), ImageNotFound, "mine"),
    ],
)
def test_every_sdk_failure_becomes_one_gen_error(
    raised: BaseException, expected: type[GenError], message: str
) -> None:
    with pytest.raises(expected) as caught, sdk._translated("tagging x"):
        raise raised
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert caught.value.__cause__ is (None if expected is ImageNotFound else raised)


def test_a_stream_is_translated_while_it_is_read() -> None:
    def chunks():
        yield {"stream": "Step 1/2"}
        raise urllib3.exceptions.ProtocolError("Connection broken")

    stream = sdk._stream("building", chunks)
    assert next(stream) == {"stream": "Step 1/2"}
    with pytest.raises(EngineUnavailable, match="lost the Docker engine while building"):
        next(stream)


def test_keyboard_interrupt_is_not_translated() -> None:
    with pytest.raises(KeyboardInterrupt), sdk._translated("building"):
        raise KeyboardInterrupt
