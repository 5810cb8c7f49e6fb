"""Pushing to and pulling from a registry: progress per layer, each failure named."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

from generator.engine.sdk import Sdk
from generator.engine.types import Auth, LayerProgress, Progress
from generator.errors import (
    AuthRefused,
    EngineError,
    EngineUnavailable,
    PushFailed,
    RemoteUnreachable,
)

# A registry's refusal, by the words Docker passes on (the first match names it).
REGISTRY_REASONS = (
    (("manifest unknown",), "the registry has no such tag"),
    (("no such host",), "{host} does not resolve"),
    (("x509", "certificate"), "{host}'s TLS certificate is not trusted here"),
    (("HTTP response to HTTPS client",), "{host} speaks HTTP (add it to insecure-registries)"),
    (("refused", "timeout", "Timeout", "unreachable", "dial tcp"), "{host} is not reachable"),
    (("denied", "unauthorized"), "the registry refused: no such repository, or docker login"),
    (("not found",), "the registry has no such tag"),
)


def push(sdk: Sdk, local_ref: str, remote_ref: str, *, auth: Auth, on_progress: Progress) -> str:
    """Tag ``local_ref`` as ``remote_ref`` (repository:tag), push it, return the digest.

    ``auth`` None means the credentials ``docker login`` stored. A failure raises
    RemoteUnreachable, AuthRefused or PushFailed, and leaves no new tag behind.
    """
    repository, _, tag = remote_ref.rpartition(":")
    tagged_here = sdk.inspect_image(remote_ref) is None
    sdk.tag(local_ref, repository, tag)
    digest = None
    try:
        for chunk in _chunks(sdk.push(repository, tag, auth), repository, auth):
            digest = (chunk.get("aux") or {}).get("Digest") or digest
            _report(chunk, on_progress)
        if not digest:
            raise PushFailed(f"the push of {remote_ref} ended without a digest")
    except BaseException:
        if tagged_here:  # a failed push leaves no tag behind (the image stays)
            with suppress(EngineError):
                sdk.remove_image(remote_ref)
        raise
    return digest


def pull(
    sdk: Sdk, reference: str, *, auth: Auth, on_progress: Progress, platform: str | None = None
) -> str:
    """Pull ``reference`` (``name:tag`` or ``name@sha256:...``) for ``platform`` (None:
    the engine's); return the image id."""
    repository, _, digest = reference.partition("@")
    stream = sdk.pull(repository, digest or None, auth, platform)
    for chunk in _chunks(stream, repository, auth):
        _report(chunk, on_progress)
    attrs = sdk.inspect_image(reference)
    if attrs is None:
        raise PushFailed(f"the pull of {reference} ended without the image")
    return str(attrs["Id"])


def _chunks(
    stream: Iterator[dict[str, Any]], repository: str, auth: Auth
) -> Iterator[dict[str, Any]]:
    """The chunks of a push or pull; an error (at the start or in a chunk) raises."""
    registry = repository.split("/", 1)[0]
    secret = (auth or {}).get("password") or ""
    try:
        for chunk in stream:
            if "error" in chunk or "errorDetail" in chunk:
                detail = chunk.get("errorDetail") or {}
                message = str(chunk.get("error") or detail.get("message") or chunk)
                raise registry_error(registry, message, secret)
            yield chunk
    except EngineUnavailable:
        raise
    except EngineError as err:  # refused before the stream started
        raise registry_error(registry, str(err), secret) from err


def _report(chunk: dict[str, Any], on_progress: Progress) -> None:
    if chunk.get("id") and chunk.get("status"):
        detail = chunk.get("progressDetail") or {}
        on_progress(
            LayerProgress(
                str(chunk["id"]),
                str(chunk["status"]),
                int(detail.get("current") or 0),
                int(detail.get("total") or 0),
            )
        )


def registry_error(registry: str, message: str, secret: str) -> PushFailed:
    """The error a registry transfer's message describes, with what to do about it."""
    if secret:
        message = message.replace(secret, "***")
    low = message.lower()
    if "http response to https client" in low:
        return RemoteUnreachable(
            f"{registry} speaks plain HTTP: add it to insecure-registries in "
            "/etc/docker/daemon.json (and restart dockerd), or serve it with TLS",
            [message],
        )
    if re.search(
        r"connection refused|no such host|i/o timeout|dial tcp|network is unreachable|"
        r"no route to host|connection reset|tls handshake timeout|broken pipe|eof$",
        low,
    ):
        return RemoteUnreachable(
            f"the registry {registry} does not answer: check --registry and the network "
            "(the engine's proxy settings apply)",
            [message],
        )
    if re.search(r"unauthorized|authentication required|denied|no basic auth|\b401\b", low):
        return AuthRefused(
            f"the registry {registry} refused the credentials: set GEN_REGISTRY_USER and "
            f"GEN_REGISTRY_PASSWORD, or run docker login {registry}",
            [message],
        )
    return PushFailed(f"the registry {registry} refused the transfer: {message}", [message])


def refusal_reason(ref: str, said: str) -> str:
    """What the engine said when asked for ``ref`` (often a few hundred characters, with
    the registry's URL) as one short, true clause: why the registry does not serve it."""
    first = ref.split("/", 1)[0]
    is_host = "/" in ref and ("." in first or ":" in first or first == "localhost")
    host = first if is_host else "registry-1.docker.io"
    for words, reason in REGISTRY_REASONS:
        if any(word in said for word in words):
            return reason.format(host=host)
    last = said.rsplit(": ", 1)[-1].strip()
    return last if len(last) <= 80 else last[:79] + "…"
